#include "train/controller.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "manta/api.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "train/controller_common.h"
#include "train/scaling.h"
#include "train/elastic.h"
#include "train/worker.h"
#include "common/clock.h"

namespace manta::train {

MANTA_REMOTE(TrainController::Create, &TrainController::Run, &TrainController::WorkerReport,
             &TrainController::AwaitGroup, TrainWorker::Create, &TrainWorker::Setup, &TrainWorker::Run,
             &TrainWorker::Interrupt);

namespace {

// The controller's lines go to its stdout, which reaches the driver as
// "(TrainController pid=..., ip=...) ...".
std::shared_ptr<spdlog::logger> ControllerLogger() {
  auto log = spdlog::get("train_controller");
  if (log) return log;
  log = spdlog::stdout_logger_mt("train_controller");
  log->set_pattern("%v");
  log->flush_on(spdlog::level::info);
  return log;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

TrainController* TrainController::Create(ControllerSpec spec) { return new TrainController(std::move(spec)); }

TrainController::~TrainController() = default;

TrainController::TrainController(ControllerSpec spec)
    : spec_(std::move(spec)),
      log_(ControllerLogger()),
      recorder_([this] {
        state::TrainRun r;
        r.run_id = spec_.run_id;
        r.name = spec_.run_name;
        r.state = state::TrainRunState::kInitializing;
        r.start_time_ms = NowUnixMs();
        r.max_failures = spec_.max_failures;
        r.min_workers = spec_.scaling.min_workers;
        r.max_workers = spec_.scaling.max_workers;
        r.storage_path = spec_.run_dir;
        return r;
      }()),
      checkpoints_(spec_.num_to_keep, [log = log_](const std::string& path) {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
        if (ec) log->warn("could not delete checkpoint {}: {}", path, ec.message());
      }) {}

void TrainController::Transition(state::TrainRunState to, const std::string& detail) {
  log_->info("[State Transition] {} -> {}.", state::TrainRunStateName(state_), state::TrainRunStateName(to));
  state_ = to;
  recorder_.Update([&](state::TrainRun& r) {
    r.state = to;
    r.status_detail = detail;
    if (state::IsTerminal(to)) r.end_time_ms = NowUnixMs();
  });
}

RunOutcome TrainController::Run(ActorHandle<TrainController> self) {
  recorder_.Update([&](state::TrainRun& r) { r.controller_actor_id = self.ID(); });
  // Drain notices of the group's nodes become its preemption info; without
  // the watch a run still trains, without that info.
  auto watch = TryWatchNodes([this](const NodeEvent& e) {
    if (e.kind == NodeEvent::kDraining) NotePreemption(e.node);
  });
  if (watch.ok()) {
    drain_watch_ = *std::move(watch);
  } else {
    log_->warn("Preemption notices will not reach the loops: {}", std::string(watch.status().message()));
  }
  if (spec_.scaling.elastic()) {
    // RunControl is a private base: the cast is made here, where it is accessible.
    elastic_ = std::make_unique<ElasticDriver>(static_cast<RunControl*>(this), self);
    return elastic_->Run();
  }
  return RunFixed(self);
}

RunOutcome TrainController::RunFixed(const ActorHandle<TrainController>& self) {
  Transition(state::TrainRunState::kScheduling);
  const int n = spec_.scaling.max_workers;
  while (true) {
    const std::string attempt_id = RandomHexId();
    ++attempts_;
    const absl::Time began = absl::Now();
    RecordAttempt(attempt_id, state::TrainAttemptState::kPending, "", nullptr);
    auto group = Schedule(n, attempt_id);
    if (!group.ok()) {
      RecordAttempt(attempt_id, state::TrainAttemptState::kErrored, std::string(group.status().message()), nullptr);
      Transition(state::TrainRunState::kErrored, std::string(group.status().message()));
      return Finish(group.status());
    }
    std::vector<state::TrainWorker> workers = WorkersOf(**group);
    RecordAttempt(attempt_id, state::TrainAttemptState::kRunning, "", &workers);
    Transition(state::TrainRunState::kRunning);
    OpenReports(attempt_id, 1, static_cast<int>((*group)->members().size()), began);
    WorkerGroup::Outcome out = RunAttempt(**group, attempt_id, self);
    for (state::TrainWorker& w : workers) w.alive = false;
    if (out.finished) {
      RecordAttempt(attempt_id, state::TrainAttemptState::kFinished, "", &workers);
      ShutdownGroup(**group);
      Transition(state::TrainRunState::kFinished);
      return Finish(absl::OkStatus());
    }
    std::vector<std::string> lines;
    last_failures_.clear();
    for (const auto& [rank, error] : out.failures) {
      lines.push_back(absl::StrCat("[", (*group)->Describe(rank), "] ", error.message()));
      last_failures_.push_back(WorkerFailure{rank, (*group)->Describe(rank), std::string(error.message()),
                                             core::ErrorData(error).value_or("")});
    }
    const std::string errors = absl::StrJoin(lines, "\n");
    const bool restart = DecideOnFailure(errors, static_cast<int>(out.failures.size()));
    const absl::Time torn = absl::Now();
    ShutdownGroup(**group);
    log_->info("Shut down the worker group in {:.3f} s.", Seconds(absl::Now() - torn));
    RecordAttempt(attempt_id, state::TrainAttemptState::kErrored, errors, &workers);
    if (!restart) {
      Transition(state::TrainRunState::kErrored, errors);
      return Finish(absl::AbortedError(absl::StrCat(TrainingFailedPrefix(attempts_, failures_, spec_.max_failures),
                                                    "The last attempt failed on ", out.failures.size(), " worker(s):\n",
                                                    errors)));
    }
    Transition(state::TrainRunState::kRestarting, errors);
    Transition(state::TrainRunState::kScheduling);
  }
}

absl::StatusOr<std::unique_ptr<WorkerGroup>> TrainController::Schedule(int n, const std::string& attempt_id) {
  const ScalingSpec& sc = spec_.scaling;
  if (sc.use_tpu) LogReservingSlices(*log_, n / sc.hosts_per_slice, sc.topology);
  LogStartingGroup(*log_, n, sc.resources_per_worker);
  const absl::Duration limit = absl::Milliseconds(spec_.scheduling_timeout_ms);
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    const absl::Time tried = absl::Now();
    auto group = WorkerGroup::Reserve(spec_, n, std::min(kReserveTry, std::max(deadline - tried, absl::Seconds(1))));
    if (!group.ok() && !absl::IsDeadlineExceeded(group.status())) return group.status();
    if (!group.ok()) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("the worker group of size ", n,
                                                        " could not be scheduled within ", absl::FormatDuration(limit),
                                                        ": ", group.status().message()));
      }
      if (state_ != state::TrainRunState::kRescheduling) {
        log_->info("Waiting for resources for {} worker(s) (up to {}): {}", n, absl::FormatDuration(limit),
                   std::string(group.status().message()));
        Transition(state::TrainRunState::kRescheduling, std::string(group.status().message()));
      }
      continue;
    }
    const absl::Time reserved = absl::Now();
    if (state_ == state::TrainRunState::kRescheduling) {
      log_->info(
          "Detected ready resources for {} workers in the cluster. Deciding to start/restart training with "
          "this worker group size.",
          n);
      Transition(state::TrainRunState::kScheduling);
    }
    absl::Status started = (*group)->Start(attempt_id, attempts_, absl::Milliseconds(spec_.worker_start_timeout_ms));
    AddGroupTime(GroupOperation::kStart, absl::Now() - tried);
    if (started.ok()) {
      log_->info("Started a training worker group of size {}: reserved in {:.3f} s, workers up in {:.3f} s.", n,
                 Seconds(reserved - tried), Seconds(absl::Now() - reserved));
      return group;
    }
    // A failed start is retried while time allows; it does not count
    // against max_failures.
    LogRetryingLaunch(*log_, started.message());
    ShutdownGroup(**group);
    if (absl::Now() >= deadline) return started;
    if (state_ != state::TrainRunState::kRescheduling) {
      Transition(state::TrainRunState::kRescheduling, std::string(started.message()));
    }
  }
}

WorkerGroup::Outcome TrainController::RunAttempt(WorkerGroup& group, const std::string& attempt_id,
                                                 const ActorHandle<TrainController>& self) {
  WorkerRunRequest base;
  base.loop_name = spec_.loop_name;
  base.loop_args = spec_.loop_args;
  base.loop_takes_config = spec_.loop_takes_config;
  base.controller = self;
  {
    absl::MutexLock lock(&mu_);
    base.checkpoint = checkpoints_.Latest();
  }
  group.Run(base);
  WorkerGroup::Outcome out = group.Wait(absl::InfiniteDuration());
  CloseReports();
  return out;
}

bool TrainController::DecideOnFailure(const std::string& errors, int failed_workers) {
  ++failures_;
  recorder_.Update([&](state::TrainRun& r) { r.num_failures = failures_; });
  const int max = spec_.max_failures;
  if (max == -1) {
    log_->error("Restarting training worker group after encountering failures on {} worker(s):\n{}", failed_workers,
                errors);
    log_->info("Deciding to RESTART, since infinite retry is enabled. Encountered {} failures so far.", failures_);
    return true;
  }
  if (failures_ > max) {
    log_->error("Terminating training worker group after encountering failure(s) on {} worker(s):\n{}", failed_workers,
                errors);
    log_->info(
        "Deciding to TERMINATE, since the total failure count ({}) exceeded the maximum allowed failures: "
        "FailureConfig(max_failures={}).",
        failures_, max);
    return false;
  }
  log_->error("Restarting training worker group after encountering failures on {} worker(s):\n{}", failed_workers,
              errors);
  log_->info("Deciding to RESTART, since the total failure count ({}) <= FailureConfig(max_failures={}).", failures_,
             max);
  return true;
}

state::TrainWorker TrainController::WorkerRecord(const TrainContext& c, const WorkerInfo& info, const ActorId& actor,
                                                 const std::string& slice_name) const {
  state::TrainWorker w;
  w.world_rank = c.world_rank;
  w.local_rank = c.local_rank;
  w.node_rank = c.node_rank;
  if (auto id = NodeId::FromHex(info.node_id); id.ok()) w.node_id = *id;
  w.node_ip = info.node_ip;
  w.pid = info.pid;
  w.actor_id = actor;
  w.slice_id = spec_.scaling.use_tpu ? c.slice_id : -1;
  w.slice_name = slice_name;
  w.alive = true;
  w.resources = spec_.scaling.resources_per_worker;
  return w;
}

std::vector<state::TrainWorker> TrainController::WorkersOf(const WorkerGroup& group) const {
  std::vector<state::TrainWorker> out;
  for (const WorkerGroup::Member& m : group.members()) {
    TrainContext c = m.context;
    c.slice_id = m.slice_id;
    out.push_back(WorkerRecord(c, m.info, m.actor.ID(), m.slice_name));
  }
  return out;
}

void TrainController::AddGroupTime(GroupOperation op, absl::Duration took) {
  recorder_.UpdateLater([&](state::TrainRun& r) {
    (op == GroupOperation::kStart ? r.worker_group_start_total_time_s : r.worker_group_shutdown_total_time_s) +=
        absl::ToDoubleSeconds(took);
  });
}

void TrainController::ShutdownGroup(WorkerGroup& group) {
  const absl::Time began = absl::Now();
  group.Shutdown();
  AddGroupTime(GroupOperation::kShutdown, absl::Now() - began);
}

void TrainController::RecordAttempt(const std::string& attempt_id, state::TrainAttemptState s,
                                    const std::string& detail, const std::vector<state::TrainWorker>* workers) {
  const bool ended = s == state::TrainAttemptState::kFinished || s == state::TrainAttemptState::kErrored ||
                     s == state::TrainAttemptState::kAborted;
  recorder_.Update([&](state::TrainRun& r) {
    if (r.attempts.empty() || r.attempts.back().attempt_id != attempt_id) {
      state::TrainAttempt a;
      a.attempt_id = attempt_id;
      a.start_time_ms = NowUnixMs();
      r.attempts.push_back(std::move(a));
    }
    state::TrainAttempt& a = r.attempts.back();
    a.state = s;
    a.status_detail = detail;
    if (ended) a.end_time_ms = NowUnixMs();
    if (workers == nullptr) return;
    // A worker's report time is the record's, not the caller's copy's.
    std::map<std::string, double> blocked;
    for (const state::TrainWorker& w : a.workers) blocked[w.actor_id.Hex()] = w.report_total_blocked_time_s;
    a.num_workers = static_cast<int>(workers->size());
    a.workers = *workers;
    for (state::TrainWorker& w : a.workers) {
      auto it = blocked.find(w.actor_id.Hex());
      if (it != blocked.end()) w.report_total_blocked_time_s = it->second;
    }
  });
  if (s != state::TrainAttemptState::kRunning || workers == nullptr) return;
  // A new group: no node of it drains (a draining node takes no new work).
  absl::MutexLock lock(&mu_);
  group_nodes_.clear();
  for (const state::TrainWorker& w : *workers) group_nodes_[w.node_id.Hex()].push_back(w.world_rank);
  preemption_.reset();
  round_preemption_.reset();
}

void TrainController::NotePreemption(const NodeInfo& node) {
  absl::MutexLock lock(&mu_);
  auto it = group_nodes_.find(node.node_id);
  if (it == group_nodes_.end()) return;
  PreemptionInfo& p = preemption_ ? *preemption_ : preemption_.emplace();
  if (std::find(p.node_ids.begin(), p.node_ids.end(), node.node_id) != p.node_ids.end()) return;
  p.node_ids.push_back(node.node_id);
  p.ranks.insert(p.ranks.end(), it->second.begin(), it->second.end());
  std::sort(p.ranks.begin(), p.ranks.end());
  if (node.drain_deadline_ms > 0 && (p.deadline_ms == 0 || node.drain_deadline_ms < p.deadline_ms)) {
    p.deadline_ms = node.drain_deadline_ms;
  }
  if (p.reason.empty()) p.reason = node.drain_reason;
  log_->info("Received a preemption notice: node {} ({}) is draining, ranks [{}] preempted, deadline {}.",
             node.node_id.substr(0, 8), node.drain_reason, absl::StrJoin(it->second, ", "),
             node.drain_deadline_ms > 0 ? absl::FormatTime(absl::FromUnixMillis(node.drain_deadline_ms))
                                        : std::string("none"));
}

RunOutcome TrainController::Finish(const absl::Status& error) {
  recorder_.Flush();
  RunOutcome out;
  absl::MutexLock lock(&mu_);
  out.metrics = latest_metrics_;
  out.checkpoint = checkpoints_.Latest();
  out.code = static_cast<int>(error.code());
  out.message = std::string(error.message());
  out.run_id = spec_.run_id;
  out.num_failures = failures_;
  out.num_attempts = attempts_;
  if (!error.ok()) out.worker_failures = last_failures_;
  return out;
}

// ---- reports -----------------------------------------------------------------------

void TrainController::OpenReports(const std::string& attempt_id, int64_t epoch, int world_size, absl::Time began) {
  absl::MutexLock lock(&mu_);
  if (attempt_id != open_attempt_ && !open_attempt_.empty()) reported_ = false;
  open_attempt_ = attempt_id;
  open_epoch_ = epoch;
  rounds_ = std::make_unique<ReportRounds>(world_size);
  first_round_logged_ = false;
  pause_requested_ = false;
  paused_seq_ = -1;
  group_began_ = began;
  workers_started_ = absl::Now();
}

void TrainController::CloseReports() {
  absl::MutexLock lock(&mu_);
  open_attempt_.clear();  // wakes the waiting reports: they return "ended"
}

void TrainController::RequestPause() {
  absl::MutexLock lock(&mu_);
  pause_requested_ = true;
}

RunControl::ReportState TrainController::Snapshot() {
  absl::MutexLock lock(&mu_);
  ReportState s;
  s.resizable = resizable_;
  s.replicated = replicated_;
  s.committed_next_step = committed_next_step_;
  s.latest_checkpoint = checkpoints_.Latest();
  return s;
}

void TrainController::CommitCheckpoint(const Checkpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  checkpoints_.Commit(checkpoint);
  recorder_.Update([&](state::TrainRun& r) { r.latest_checkpoint = checkpoint.path; });
}

ReportReply TrainController::WorkerReport(ReportRequest request) {
  const absl::Time arrived = absl::Now();
  ReportReply reply;
  bool paused_now = false;
  {
    absl::MutexLock lock(&mu_);
    if (request.attempt_id != open_attempt_ || request.epoch != open_epoch_ ||
        (paused_seq_ >= 0 && request.seq > paused_seq_)) {
      reply.error = absl::StrCat("group ", request.epoch, " of attempt ", request.attempt_id, " has ended");
      return reply;
    }
    std::optional<RoundOutcome> done;
    if (absl::Status s = rounds_->Add(request, &done); !s.ok()) {
      reply.error = std::string(s.message());
      return reply;
    }
    if (done.has_value()) paused_now = CompleteRound(*done, request);
    const std::string attempt = request.attempt_id;
    const int64_t epoch = request.epoch, seq = request.seq;
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return open_attempt_ != attempt || open_epoch_ != epoch || rounds_->Completed(seq);
    };
    mu_.Await(absl::Condition(&settled));
    if (open_attempt_ != attempt || open_epoch_ != epoch || !rounds_->Completed(seq)) {
      reply.error = absl::StrCat("group ", epoch, " of attempt ", attempt, " ended before every rank reported");
      return reply;
    }
    reply.ok = true;
    reply.pause = seq == paused_seq_;
    reply.committed = checkpoints_.Latest();
    reply.preemption = round_preemption_;
  }
  // How long the rank waited for its round: Ray's report blocked time.
  recorder_.UpdateLater([&, blocked = absl::ToDoubleSeconds(absl::Now() - arrived)](state::TrainRun& r) {
    for (state::TrainAttempt& a : r.attempts) {
      if (a.attempt_id != request.attempt_id) continue;
      for (state::TrainWorker& w : a.workers) {
        if (w.alive && w.world_rank == request.rank) w.report_total_blocked_time_s += blocked;
      }
    }
  });
  if (paused_now && elastic_) elastic_->OnPaused();
  return reply;
}

bool TrainController::CompleteRound(const RoundOutcome& done, const ReportRequest& request) {
  latest_metrics_ = done.metrics;
  round_preemption_ = preemption_;
  reported_ = true;
  resizable_ = request.resizable;
  replicated_ = request.replicated;
  auto step = done.metrics.find("step");
  if (step != done.metrics.end()) {
    if (request.resizable) committed_next_step_ = static_cast<int64_t>(step->second) + 1;
    recorder_.AddMetrics(static_cast<int64_t>(step->second), done.metrics);
  }
  if (done.checkpoint.has_value()) {
    checkpoints_.Commit(*done.checkpoint);
    recorder_.Update([&](state::TrainRun& r) { r.latest_checkpoint = done.checkpoint->path; });
  } else if (done.partial_checkpoints > 0) {
    log_->warn("Dropped the checkpoint of report {}: only {} of {} ranks reported one.", done.seq,
               done.partial_checkpoints, rounds_->world_size());
  }
  if (!first_round_logged_) {
    first_round_logged_ = true;
    log_->info(
        "The worker group made its first report {:.3f} s after the event that formed it ({:.3f} s after its "
        "workers were started or told).",
        Seconds(absl::Now() - group_began_), Seconds(absl::Now() - workers_started_));
  }
  if (!pause_requested_) return false;
  pause_requested_ = false;
  paused_seq_ = done.seq;
  return true;
}

AwaitReply TrainController::AwaitGroup(AwaitRequest request) {
  if (elastic_) return elastic_->Await(request);
  AwaitReply leave;
  leave.leave = true;
  return leave;
}

}  // namespace manta::train
