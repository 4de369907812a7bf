#include "train/worker.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "manta/state.h"
#include "train/controller.h"

namespace manta::train {
namespace {

// What the in-loop calls of this process see; set by TrainWorker::Run.
struct Session {
  std::mutex mu;
  bool active = false;                      // guarded by mu
  TrainContext context;                     // guarded by mu; constant while active
  ActorHandle<TrainController> controller;  // guarded by mu
  std::optional<Checkpoint> checkpoint;     // guarded by mu
  int64_t reports = 0;                      // guarded by mu
};

Session& TheSession() {
  static Session* s = new Session();
  return *s;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace

TrainWorker* TrainWorker::Create(std::string attempt_id) { return new TrainWorker(std::move(attempt_id)); }

WorkerInfo TrainWorker::Setup() {
  RuntimeContext here = GetRuntimeContext();
  WorkerInfo info;
  info.pid = here.pid;
  info.node_id = here.node_id;
  info.node_ip = here.node_ip;
  info.free_port = FreePort();
  return info;
}

absl::Status TrainWorker::Run(WorkerRunRequest request) {
  if (request.context.attempt_id != attempt_id_) {
    return absl::InvalidArgumentError(absl::StrCat("a worker of attempt ", attempt_id_, " was asked to run attempt ",
                                                   request.context.attempt_id));
  }
  // The attempt's distributed environment, recomputed by the controller for
  // each attempt: set over whatever the process inherited.
  for (const auto& [name, value] : request.env) {
    if (value.empty()) {
      ::unsetenv(name.c_str());
    } else {
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  Session& s = TheSession();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.context = request.context;
    s.controller = request.controller;
    s.checkpoint = request.checkpoint;
    s.reports = 0;
    s.active = true;
  }
  std::vector<std::string> args;
  if (request.loop_takes_config) args.push_back(request.loop_args);
  absl::StatusOr<std::string> result = manta::internal::CallLocal(request.loop_name, args);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.active = false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return result.status();
}

// ---- the in-loop API --------------------------------------------------------------

const TrainContext& GetContext() {
  Session& s = TheSession();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.active) {
    throw Error(absl::FailedPreconditionError("manta::train::GetContext() is only for a training loop's workers"));
  }
  return s.context;
}

std::optional<Checkpoint> GetCheckpoint() {
  Session& s = TheSession();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.checkpoint;
}

void Report(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint) {
  Session& s = TheSession();
  ReportRequest req;
  ActorHandle<TrainController> controller;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.active) {
      throw Error(absl::FailedPreconditionError("manta::train::Report() is only for a training loop's workers"));
    }
    req.attempt_id = s.context.attempt_id;
    req.rank = s.context.world_rank;
    req.seq = ++s.reports;
    controller = s.controller;
  }
  req.metrics = metrics;
  req.checkpoint = checkpoint;
  std::shared_ptr<ReportReply> reply = Get(controller.Task(&TrainController::WorkerReport).Remote(req));
  if (!reply->ok) throw Error(absl::AbortedError(reply->error));
  std::lock_guard<std::mutex> lock(s.mu);
  if (reply->committed) s.checkpoint = reply->committed;
}

}  // namespace manta::train
