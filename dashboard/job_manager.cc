#include "dashboard/job_manager.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/package_name.h"
#include "common/runtime_env_json.h"
#include "common/process.h"
#include "common/status.h"
#include "dashboard/validation.h"

namespace manta::dashboard {
namespace {

constexpr size_t kLogTailInMessage = 2000;

std::shared_ptr<spdlog::logger> Log() { return Logger("dashboard"); }

// The last `n` bytes of a file (for failure messages).
std::string FileTail(const std::string& path, size_t n) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  return text->size() <= n ? *text : text->substr(text->size() - n);
}

// The entrypoint resources a job holds while it runs.
std::map<std::string, double> DemandMapOf(const JobRecord& job) {
  std::map<std::string, double> m = job.entrypoint_resources;
  if (job.entrypoint_num_cpus && *job.entrypoint_num_cpus > 0) m["CPU"] = *job.entrypoint_num_cpus;
  if (job.entrypoint_num_gpus && *job.entrypoint_num_gpus > 0) m["GPU"] = *job.entrypoint_num_gpus;
  if (job.entrypoint_memory && *job.entrypoint_memory > 0) m["memory"] = *job.entrypoint_memory;
  return m;
}

absl::StatusOr<ResourceSet> DemandOf(const JobRecord& job) { return ResourceSet::FromMap(DemandMapOf(job)); }

}  // namespace

JobManager::JobManager(JobManagerOptions options, JobStore* store, PackageStore* packages, EventLoop* loop)
    : options_(std::move(options)), store_(store), packages_(packages), loop_(loop) {}

JobManager::~JobManager() = default;

std::string JobManager::ExitFile(const std::string& id) const {
  return absl::StrCat(options_.session_dir, "/jobs/", id, ".exit");
}

std::string JobManager::LogFile(const std::string& id) const {
  return absl::StrCat(options_.session_dir, "/logs/", JobLogFileName(id));
}

absl::Status JobManager::Start() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  RETURN_IF_ERROR(MakeDirs(options_.session_dir + "/jobs", 0700));
  RETURN_IF_ERROR(MakeDirs(options_.session_dir + "/logs", 0755));
  absl::Time deadline = absl::Now() + options_.load_timeout;
  absl::StatusOr<std::vector<JobRecord>> records = store_->List();
  while (!records.ok() && absl::IsUnavailable(records.status()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    records = store_->List();
  }
  if (!records.ok()) return Annotate(records.status(), "loading job records");

  std::vector<std::pair<std::string, Runner>> gone;
  {
    absl::MutexLock lock(&mu_);
    for (JobRecord& r : *records) {
      Entry& e = jobs_[r.submission_id];
      e.record = std::move(r);
      JobRecord& job = e.record;
      // A reservation a job that ended may still hold (the dashboard died
      // before giving it back) is released by Poll.
      if (!DemandMapOf(job).empty()) to_release_.insert(job.submission_id);
      if (IsTerminal(job.status)) continue;
      if (job.status == JobStatus::kPending || job.runner_pid <= 0) {
        FailLocked(&e, "JOB_SUPERVISOR_LOST",
                   "The dashboard restarted before the job started; it was not run. Submit it again.");
        continue;
      }
      // The job holds its reservation until it ends, also one whose runner
      // went while the dashboard was down (its group may still be exiting).
      to_release_.erase(job.submission_id);
      if (!DemandMapOf(job).empty()) reserving_.insert(job.submission_id);
      Runner runner{job.runner_pid, job.runner_start_ticks};
      if (RunnerGone(runner)) {
        gone.emplace_back(job.submission_id, runner);
      } else {
        Log()->info("adopted running job submission_id={} runner_pid={}", job.submission_id, job.runner_pid);
      }
    }
  }
  // Their ending starts now, before any call can ask to stop them; Poll
  // finishes it.
  for (const auto& [id, runner] : gone) Ended(id, runner);
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, e] : jobs_) {
      if (e.record.status == JobStatus::kRunning && e.record.stop_requested) {
        loop_->Post(
            [this, id = id, r = Runner{e.record.runner_pid, e.record.runner_start_ticks}] { BeginStop(id, r); });
      }
    }
  }
  Flush();
  poll_timer_ = loop_->RunEvery(options_.poll_period, [this] { Poll(); });
  // Runners started by this process are noticed the moment they exit; the
  // timer covers adopted ones. A handler cannot be removed from the loop, so
  // it holds only a weak reference to this manager.
  loop_->OnSignal(SIGCHLD, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.lock()) Poll();
  });
  return absl::OkStatus();
}

void JobManager::FailLocked(Entry* e, std::string_view error_type, std::string message) {
  e->record.status = JobStatus::kFailed;
  e->record.error_type = std::string(error_type);
  e->record.message = std::move(message);
  e->record.end_time_ms = absl::ToUnixMillis(options_.clock());
  e->dirty = true;
  Log()->info("job failed submission_id={} error_type={}: {}", e->record.submission_id, error_type,
              e->record.message.substr(0, 200));
}

absl::StatusOr<std::string> JobManager::Submit(const JobSubmitRequest& request) {
  std::string id = request.submission_id.empty() ? NewSubmissionId() : request.submission_id;
  RETURN_IF_ERROR(ValidateSubmissionId(id));
  JobRecord record = NewJobRecord(request, id, absl::ToUnixMillis(options_.clock()));
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the dashboard is shutting down");
    if (jobs_.count(id) > 0)
      return absl::AlreadyExistsError(absl::StrCat("Job with submission_id ", id, " already exists"));
    Entry& e = jobs_[id];
    e.record = record;
    e.busy = true;
  }
  absl::Status stored;
  {
    absl::MutexLock store_lock(&store_mu_);
    stored = store_->Create(record);
  }
  absl::MutexLock lock(&mu_);
  if (!stored.ok()) {
    jobs_.erase(id);
    if (absl::IsAlreadyExists(stored)) {
      return absl::AlreadyExistsError(absl::StrCat("Job with submission_id ", id, " already exists"));
    }
    return stored;
  }
  jobs_[id].busy = false;
  Log()->info("job submitted submission_id={} entrypoint={}", id, record.entrypoint.substr(0, 200));
  loop_->Post([this, id] {
    queue_.push_back(id);
    next_start_attempt_ = absl::InfinitePast();
    StartQueued();
  });
  return id;
}

absl::StatusOr<bool> JobManager::Stop(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.busy) {
    return absl::NotFoundError(absl::StrCat("Job ", id, " does not exist"));
  }
  Entry& e = it->second;
  if (IsTerminal(e.record.status)) return false;
  if (e.record.stop_requested) return true;
  e.record.stop_requested = true;
  e.dirty = true;
  if (e.record.status == JobStatus::kPending && !e.starting) {
    e.record.status = JobStatus::kStopped;
    e.record.message = "Job was intentionally stopped.";
    e.record.end_time_ms = absl::ToUnixMillis(options_.clock());
    Log()->info("job stopped before it started submission_id={}", id);
    loop_->Post([this] { Flush(); });
    return true;
  }
  if (e.record.status == JobStatus::kRunning) {
    Runner runner{e.record.runner_pid, e.record.runner_start_ticks};
    loop_->Post([this, id, runner] { BeginStop(id, runner); });
  }
  // A job the loop is starting is signalled by StartOne once its runner exists.
  loop_->Post([this] { Flush(); });
  return true;
}

absl::Status JobManager::Delete(const std::string& id) {
  absl::MutexLock store_lock(&store_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.busy) return absl::NotFoundError(absl::StrCat("Job ", id, " does not exist"));
    if (!IsTerminal(it->second.record.status)) {
      return absl::FailedPreconditionError(absl::StrCat("Attempted to delete job '", id,
                                                        "', but it is in a non-terminal state ",
                                                        JobStatusName(it->second.record.status), "; stop it first"));
    }
    it->second.busy = true;
  }
  absl::Status s = store_->Delete(id);
  absl::MutexLock lock(&mu_);
  if (!s.ok()) {
    jobs_[id].busy = false;
    return s;
  }
  jobs_.erase(id);
  unlink(LogFile(id).c_str());
  unlink(ExitFile(id).c_str());
  packages_->RemoveWorkingDir(id).IgnoreError();
  Log()->info("job deleted submission_id={}", id);
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> JobManager::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.busy) return absl::NotFoundError(absl::StrCat("Job ", id, " does not exist"));
  return it->second.record;
}

std::vector<JobRecord> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<JobRecord> out;
  for (const auto& [id, e] : jobs_) {
    if (!e.busy) out.push_back(e.record);
  }
  return out;
}

absl::StatusOr<std::string> JobManager::LogPath(const std::string& id) const {
  RETURN_IF_ERROR(Get(id).status());
  return LogFile(id);
}

absl::Status JobManager::CheckFits(const ResourceSet& demand) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (demand.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(HeadNode head, store_->GetHeadNode());
  ASSIGN_OR_RETURN(ResourceSet total, ResourceSet::FromMap(head.resources_total));
  if (!total.Contains(demand)) {
    return absl::ResourceExhaustedError(absl::StrCat("The entrypoint resources ", demand.DebugString(),
                                                     " do not fit on the head node, which has ", total.DebugString(),
                                                     " in total."));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobManager::Reserve(const std::string& id, const JobRecord& job) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  std::map<std::string, double> demand = DemandMapOf(job);
  ASSIGN_OR_RETURN(ResourceSet set, ResourceSet::FromMap(demand));
  RETURN_IF_ERROR(CheckFits(set));
  if (demand.empty()) return std::string();
  reserving_.insert(id);
  ASSIGN_OR_RETURN(bool held, store_->ReserveOnHead(id, demand));
  if (held) return std::string();
  return absl::StrCat("Job is waiting for entrypoint resources ", set.DebugString(),
                      " on the head node, held by other jobs or tasks.");
}

void JobManager::Release(const std::string& id) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  reserving_.erase(id);
  to_release_.insert(id);
  ReleasePending();
}

void JobManager::ReleasePending() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (auto it = to_release_.begin(); it != to_release_.end();) {
    absl::Status s = store_->ReleaseOnHead(*it);
    if (!s.ok()) {
      Log()->warn("cannot release entrypoint resources submission_id={}, will retry: {}", *it,
                  std::string(s.message()));
      return;
    }
    it = to_release_.erase(it);
  }
}

void JobManager::StartQueued() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (queue_.empty() || options_.clock() < next_start_attempt_) return;
  std::deque<std::string> waiting;
  while (!queue_.empty()) {
    std::string id = queue_.front();
    queue_.pop_front();
    JobRecord job;
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) return;
      auto it = jobs_.find(id);
      bool pending = it != jobs_.end() && it->second.record.status == JobStatus::kPending;
      if (pending) {
        auto parsed = DemandOf(it->second.record);
        if (!parsed.ok()) {
          FailLocked(&it->second, "ENTRYPOINT_RESOURCES_INVALID", std::string(parsed.status().message()));
          pending = false;
        }
      }
      if (!pending) {
        if (reserving_.count(id) > 0) loop_->Post([this, id] { Release(id); });  // stopped while waiting
        continue;
      }
      job = it->second.record;
    }
    auto wait = Reserve(id, job);
    if (!wait.ok() && !absl::IsUnavailable(wait.status())) {
      {
        absl::MutexLock lock(&mu_);
        if (auto it = jobs_.find(id); it != jobs_.end()) {
          FailLocked(&it->second, "ENTRYPOINT_RESOURCES_UNAVAILABLE", std::string(wait.status().message()));
        }
      }
      Release(id);
      continue;
    }
    if (!wait.ok() || !wait->empty()) {
      std::string why = wait.ok() ? *wait : absl::StrCat("Job is waiting for the GCS: ", wait.status().message());
      absl::MutexLock lock(&mu_);
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second.record.message != why) {
        it->second.record.message = why;
        it->second.dirty = true;
      }
      waiting.push_back(id);
      continue;
    }
    StartOne(id);
  }
  queue_ = std::move(waiting);
  // Waiting jobs are retried when a job ends, and at least every second.
  next_start_attempt_ = queue_.empty() ? absl::InfinitePast() : options_.clock() + absl::Seconds(1);
  Flush();
}

void JobManager::StartOne(const std::string& id) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  RunnerSpec spec;
  std::string package;
  RuntimeEnvSpec runtime_env;
  {
    absl::MutexLock lock(&mu_);
    Entry& e = jobs_[id];
    e.starting = true;
    spec.entrypoint = e.record.entrypoint;
    package = e.record.working_dir_package;
    for (const auto& [k, v] : e.record.env_vars) spec.env.emplace_back(k, v);
    runtime_env.env_vars = e.record.env_vars;
  }
  // The driver registers the job with its runtime env, so that every worker
  // of the job, on any node, gets the same directory and variables.
  if (!package.empty()) runtime_env.working_dir = "gcs://" + package;
  spec.env.emplace_back(kRuntimeEnvVar, RuntimeEnvJson(runtime_env));
  spec.runner_path = options_.runner_path;
  spec.log_file = LogFile(id);
  spec.exit_file = ExitFile(id);
  spec.env.emplace_back("MANTA_ADDRESS", options_.gcs_address);
  if (!options_.token.empty()) spec.env.emplace_back("MANTA_TOKEN", options_.token);
  spec.env.emplace_back("MANTA_SUBMISSION_ID", id);
  unlink(spec.exit_file.c_str());

  auto head = store_->GetHeadNode();
  absl::StatusOr<std::string> cwd = packages_->PrepareWorkingDir(id, package);
  if (cwd.ok()) {
    if (absl::Status published = PublishPackage(package); !published.ok()) cwd = published;
  }
  absl::StatusOr<Runner> runner = absl::UnknownError("not started");
  if (cwd.ok()) {
    spec.cwd = *cwd;
    runner = StartRunner(spec);
  }
  absl::MutexLock lock(&mu_);
  Entry& e = jobs_[id];
  e.starting = false;
  if (!cwd.ok() || !runner.ok()) {
    loop_->Post([this, id] { Release(id); });
    if (!cwd.ok()) {
      FailLocked(&e, "RUNTIME_ENV_SETUP_FAILURE",
                 absl::StrCat("Failed to set up the working directory: ", cwd.status().message()));
    } else {
      FailLocked(&e, "JOB_SUPERVISOR_START_FAILURE",
                 absl::StrCat("Failed to start the job runner: ", runner.status().message()));
    }
    if (e.record.stop_requested) e.record.status = JobStatus::kStopped;
    return;
  }
  JobRecord& job = e.record;
  job.status = JobStatus::kRunning;
  job.message = "Job is currently running.";
  job.runner_pid = runner->pid;
  job.runner_start_ticks = runner->start_ticks;
  job.supervisor_pid = getpid();
  job.driver_node_ip = head.ok() ? head->node_ip : "";
  e.dirty = true;
  Log()->info("job started submission_id={} runner_pid={}", id, runner->pid);
  if (job.stop_requested) loop_->Post([this, id, r = *runner] { BeginStop(id, r); });
}

absl::Status JobManager::PublishPackage(const std::string& package) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (package.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string data, packages_->Read(package));
  if (data.size() > kMaxKvPackageBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("the package is ", data.size(),
                                                     " bytes; a package reaches the cluster's nodes through the GCS, "
                                                     "which takes packages of at most ",
                                                     kMaxKvPackageBytes, " bytes"));
  }
  return Annotate(store_->PublishPackage(package, data), "publishing the package to the cluster");
}

void JobManager::BeginStop(const std::string& id, const Runner& runner) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (kill_timers_.count(id) > 0) return;
  bool shutting_down;
  {
    absl::MutexLock lock(&mu_);
    shutting_down = shutting_down_;
  }
  Log()->info("stopping job submission_id={} runner_pid={}", id, runner.pid);
  SignalRunnerGroup(runner, SIGTERM).IgnoreError();
  absl::Duration grace = shutting_down ? options_.shutdown_grace : options_.stop_grace;
  kill_timers_[id] = loop_->RunAfter(grace, [id, runner] {
    if (SignalRunnerGroup(runner, SIGKILL).ok()) {
      Log()->info("job did not exit after SIGTERM, sent SIGKILL submission_id={}", id);
    }
  });
}

void JobManager::Poll() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  std::vector<std::pair<std::string, Runner>> running;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : jobs_) {
      if (e.record.status == JobStatus::kRunning && e.record.runner_pid > 0) {
        running.emplace_back(id, Runner{e.record.runner_pid, e.record.runner_start_ticks});
      }
    }
  }
  for (const auto& [id, runner] : running) {
    if (std::optional<bool> stop_requested = Ended(id, runner)) Finish(id, runner, *stop_requested);
  }
  if (!to_release_.empty()) ReleasePending();
  StartQueued();
  Flush();
  if (shutdown_done_ && running.empty()) {
    auto done = std::move(shutdown_done_);
    shutdown_done_ = nullptr;
    done();
  }
}

std::optional<bool> JobManager::Ended(const std::string& id, const Runner& runner) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = ending_.find(id);
  if (it == ending_.end()) {
    if (!RunnerGone(runner)) return std::nullopt;
    Ending e;
    e.since = absl::Now();
    // The runner SIGKILLs its group as it exits; this covers a runner
    // killed from outside. Once, with the members known now, and not when
    // the runner's pid is another process's by now: the group's id may then
    // be another group's.
    if (!ProcessStartTicks(runner.pid).has_value()) {
      KillLeftovers(runner);
      for (pid_t pid : LiveGroupMembers(runner.pid)) {
        if (auto ticks = ProcessStartTicks(pid)) e.members.emplace_back(pid, *ticks);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      auto job = jobs_.find(id);
      e.stop_requested = job != jobs_.end() && job->second.record.stop_requested;
    }
    it = ending_.emplace(id, std::move(e)).first;
  }
  bool waiting = false;
  for (const auto& [pid, ticks] : it->second.members) waiting = waiting || ProcessStartTicks(pid) == ticks;
  if (waiting && absl::Now() - it->second.since < kLeftoverWait) return std::nullopt;
  const bool stop_requested = it->second.stop_requested;
  ending_.erase(it);
  return stop_requested;
}

void JobManager::Finish(const std::string& id, const Runner& runner, bool stop_requested) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  kill_timers_.erase(id);
  if (reserving_.count(id) > 0) Release(id);
  std::optional<int> exit = ReadExitFile(ExitFile(id));
  std::string tail;
  if (exit && !(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0)) tail = FileTail(LogFile(id), kLogTailInMessage);
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || IsTerminal(it->second.record.status)) return;
  Entry& e = it->second;
  JobRecord& job = e.record;
  job.end_time_ms = absl::ToUnixMillis(options_.clock());
  e.dirty = true;
  if (exit && WIFEXITED(*exit)) job.driver_exit_code = WEXITSTATUS(*exit);
  if (stop_requested) {
    job.status = JobStatus::kStopped;
    if (!job.stopped_by_shutdown) job.message = "Job was intentionally stopped.";
  } else if (exit && WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) {
    job.status = JobStatus::kSucceeded;
    job.message = "Job finished successfully.";
  } else if (exit) {
    job.status = JobStatus::kFailed;
    job.error_type = "JOB_ENTRYPOINT_COMMAND_ERROR";
    job.message = absl::StrCat("Job entrypoint command failed with ", DescribeExit(*exit),
                               ". Last available logs (truncated to ", kLogTailInMessage, " bytes):\n", tail);
  } else {
    job.status = JobStatus::kFailed;
    job.error_type = "JOB_SUPERVISOR_LOST";
    job.message = absl::StrCat("The job's process group (runner pid ", runner.pid,
                               ") ended without recording the entrypoint's exit status; it was killed "
                               "from outside or lost while the dashboard was down.");
  }
  Log()->info("job ended submission_id={} status={}", id, JobStatusName(job.status));
  next_start_attempt_ = absl::InfinitePast();
}

void JobManager::Flush() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  absl::MutexLock store_lock(&store_mu_);
  std::vector<JobRecord> dirty;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, e] : jobs_) {
      if (!e.dirty || e.busy) continue;
      dirty.push_back(e.record);
      e.dirty = false;
    }
  }
  for (const JobRecord& job : dirty) {
    absl::Status s = store_->Put(job);
    if (s.ok()) continue;
    Log()->warn("cannot store job record submission_id={}, will retry: {}", job.submission_id,
                std::string(s.message()));
    absl::MutexLock lock(&mu_);
    if (auto it = jobs_.find(job.submission_id); it != jobs_.end()) it->second.dirty = true;
  }
}

void JobManager::Shutdown(std::function<void()> done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  std::vector<std::pair<std::string, Runner>> running;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [id, e] : jobs_) {
      JobRecord& job = e.record;
      if (IsTerminal(job.status)) continue;
      job.stop_requested = true;
      job.stopped_by_shutdown = true;
      job.message = "Job was stopped because the dashboard shut down.";
      e.dirty = true;
      if (job.status == JobStatus::kPending) {
        job.status = JobStatus::kStopped;
        job.end_time_ms = absl::ToUnixMillis(options_.clock());
        if (reserving_.count(id) > 0) loop_->Post([this, id = id] { Release(id); });
      } else if (job.runner_pid > 0) {
        running.emplace_back(id, Runner{job.runner_pid, job.runner_start_ticks});
      }
    }
  }
  queue_.clear();
  for (const auto& [id, runner] : running) {
    kill_timers_.erase(id);
    BeginStop(id, runner);
  }
  shutdown_done_ = std::move(done);
  if (!poll_timer_) poll_timer_ = loop_->RunEvery(options_.poll_period, [this] { Poll(); });
}

}  // namespace manta::dashboard
