#include "train/worker.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "manta/state.h"
#include "train/controller.h"
#include "train/kernels/rendezvous.h"
#include "train/worker_session.h"

namespace manta::train {
namespace {

// What the in-loop calls of this process see; set by TrainWorker::Run.
struct Session {
  absl::Mutex mu;
  bool active ABSL_GUARDED_BY(mu) = false;
  TrainContext context ABSL_GUARDED_BY(mu);  // changes only between groups
  ActorHandle<TrainController> controller ABSL_GUARDED_BY(mu);
  std::optional<Checkpoint> checkpoint ABSL_GUARDED_BY(mu);
  JoinInstruction join ABSL_GUARDED_BY(mu);
  int64_t reports ABSL_GUARDED_BY(mu) = 0;  // this group's
  WorkerKey worker_key ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&)> interrupt ABSL_GUARDED_BY(mu);
  std::optional<PreemptionInfo> preemption ABSL_GUARDED_BY(mu);  // as of the latest report
};

Session& TheSession() {
  static Session* s = new Session();
  return *s;
}

// Sets (or, for "", removes) each variable.
void ApplyEnv(const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) {
    if (value.empty()) {
      ::unsetenv(name.c_str());
    } else {
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
}

Session& ActiveSession(const char* call) {
  Session& s = TheSession();
  absl::MutexLock lock(&s.mu);
  if (!s.active) {
    throw Error(absl::FailedPreconditionError(
        absl::StrCat("manta::train::", call, "() is only for a training loop's workers")));
  }
  return s;
}

// Sends this rank's next report of its group; the controller's answer.
ReportReply SendReport(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint,
                       bool resizable, bool replicated) {
  Session& s = ActiveSession("Report");
  ReportRequest req;
  ActorHandle<TrainController> controller;
  {
    absl::MutexLock lock(&s.mu);
    req.attempt_id = s.context.attempt_id;
    req.epoch = s.context.epoch;
    req.rank = s.context.world_rank;
    req.seq = ++s.reports;
    controller = s.controller;
  }
  req.metrics = metrics;
  req.checkpoint = checkpoint;
  req.resizable = resizable;
  req.replicated = replicated;
  std::shared_ptr<ReportReply> reply = Get(controller.Task(&TrainController::WorkerReport).Remote(req));
  if (reply->ok) {
    absl::MutexLock lock(&s.mu);
    if (reply->committed) s.checkpoint = reply->committed;
    s.preemption = reply->preemption;
  }
  return *reply;
}

}  // namespace

TrainWorker* TrainWorker::Create(std::string attempt_id) { return new TrainWorker(std::move(attempt_id)); }

WorkerInfo TrainWorker::Setup() {
  RuntimeContext here = GetRuntimeContext();
  WorkerInfo info;
  info.pid = here.pid;
  info.node_id = here.node_id;
  info.node_ip = here.node_ip;
  info.free_port = PickCoordinatorPort().value_or(0);
  return info;
}

absl::Status TrainWorker::Run(WorkerRunRequest request) {
  if (request.context.attempt_id != attempt_id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a worker of attempt ", attempt_id_, " was asked to run attempt ", request.context.attempt_id));
  }
  // The group's distributed environment, recomputed by the controller for
  // each group: set over whatever the process inherited.
  ApplyEnv(request.env);
  Session& s = TheSession();
  {
    absl::MutexLock lock(&s.mu);
    s.context = request.context;
    s.controller = request.controller;
    s.checkpoint = request.checkpoint;
    s.join = request.join;
    s.reports = 0;
    s.worker_key = request.worker_key;
    s.preemption.reset();
    s.active = true;
  }
  std::vector<std::string> args;
  if (request.loop_takes_config) args.push_back(request.loop_args);
  absl::StatusOr<std::string> result = manta::internal::CallLocal(request.loop_name, args);
  {
    absl::MutexLock lock(&s.mu);
    s.active = false;
    s.interrupt = nullptr;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return result.status();
}

void TrainWorker::Interrupt(int64_t epoch, std::string why) {
  Session& s = TheSession();
  std::function<void(const std::string&)> interrupt;
  {
    absl::MutexLock lock(&s.mu);
    if (!s.active || s.context.epoch != epoch) return;
    interrupt = s.interrupt;
  }
  if (interrupt) interrupt(why);
}

// ---- the in-loop API --------------------------------------------------------------

const TrainContext& GetContext() {
  Session& s = ActiveSession("GetContext");
  absl::MutexLock lock(&s.mu);
  return s.context;
}

std::optional<PreemptionInfo> GetPreemptionInfo() {
  Session& s = TheSession();
  absl::MutexLock lock(&s.mu);
  return s.preemption;
}

std::optional<Checkpoint> GetCheckpoint() {
  Session& s = TheSession();
  absl::MutexLock lock(&s.mu);
  return s.checkpoint;
}

void Report(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint) {
  ReportReply reply = SendReport(metrics, checkpoint, /*resizable=*/false, /*replicated=*/false);
  if (!reply.ok) throw Error(absl::AbortedError(reply.error));
}

namespace internal {

JoinInstruction CurrentJoin() {
  Session& s = ActiveSession("CurrentJoin");
  absl::MutexLock lock(&s.mu);
  return s.join;
}

CommitReply CommitStep(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint,
                       bool replicated) {
  CommitReply c;
  try {
    ReportReply reply = SendReport(metrics, checkpoint, /*resizable=*/true, replicated);
    c.commit = reply.ok;
    c.pause = reply.pause;
    c.committed = reply.committed;
  } catch (const TaskError&) {
    c.commit = false;  // the controller is gone: nothing is committed
  }
  return c;
}

std::optional<JoinInstruction> AwaitNextGroup(int64_t next_step, const std::string& why,
                                              const std::optional<Checkpoint>& checkpoint) {
  Session& s = ActiveSession("AwaitNextGroup");
  AwaitRequest req;
  ActorHandle<TrainController> controller;
  {
    absl::MutexLock lock(&s.mu);
    req.attempt_id = s.context.attempt_id;
    req.worker_key = s.worker_key;
    req.epoch = s.context.epoch;
    controller = s.controller;
  }
  req.next_step = next_step;
  req.why = why;
  req.checkpoint = checkpoint;
  std::shared_ptr<AwaitReply> reply = Get(controller.Task(&TrainController::AwaitGroup).Remote(req));
  if (reply->leave) return std::nullopt;
  ApplyEnv(reply->env);
  absl::MutexLock lock(&s.mu);
  s.context = reply->context;
  s.join = reply->join;
  s.reports = 0;
  s.preemption.reset();
  return reply->join;
}

void SetInterruptHandler(std::function<void(const std::string&)> handler) {
  Session& s = ActiveSession("SetInterruptHandler");
  absl::MutexLock lock(&s.mu);
  s.interrupt = std::move(handler);
}

}  // namespace internal
}  // namespace manta::train
