#include "raylet/worker_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "raylet/raylet_log.h"
#include "common/status.h"

extern char** environ;

namespace manta::raylet {
namespace {

std::string ExitDetail(int64_t exit_status, int term_signal) {
  if (term_signal != 0) return absl::StrCat("killed by signal ", term_signal, " (", strsignal(term_signal), ")");
  return absl::StrCat("exited with code ", exit_status);
}

// The worker's environment: the raylet's own, then the job's variables ("":
// removed), with what tells the worker who and where it is set anew.
std::vector<std::string> WorkerEnvironment(const WorkerPoolOptions& o, const WorkerId& id, const JobId& job,
                                           const std::map<std::string, std::string>& job_vars) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"MANTA_WORKER_ID", id.Hex()},
      {"MANTA_JOB_ID", job.Hex()},
      {"MANTA_NODE_ID", o.node_id.Hex()},
      {"MANTA_NODE_IP", o.node_ip},
      {"MANTA_RAYLET_ADDRESS", o.raylet_address},
      {"MANTA_RAYLET_PID", std::to_string(::getpid())},
      {"MANTA_GCS_ADDRESS", o.gcs_address},
  };
  if (!o.session_dir.empty()) vars.emplace_back("MANTA_SESSION_DIR", o.session_dir);
  if (!o.stats_dir.empty()) vars.emplace_back("MANTA_STATS_DIR", o.stats_dir);
  if (!o.token_file.empty()) {
    vars.emplace_back("MANTA_TOKEN_FILE", o.token_file);
  } else if (!o.token.empty()) {
    vars.emplace_back("MANTA_TOKEN", o.token);
  }
  auto pool_only = [&vars](std::string_view kv) {
    bool overridden = false;
    for (const auto& [k, v] : vars) overridden |= kv.substr(0, k.size() + 1) == k + "=";
    // Variables only the pool sets must not leak in from elsewhere.
    return overridden || kv.substr(0, 11) == "MANTA_TOKEN" || kv.substr(0, 18) == "MANTA_SESSION_DIR=" ||
           kv.substr(0, 16) == "MANTA_STATS_DIR=";
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    std::string_view name = kv.substr(0, kv.find('='));
    if (!pool_only(kv) && job_vars.count(std::string(name)) == 0) env.emplace_back(kv);
  }
  for (const auto& [k, v] : job_vars) {
    std::string kv = k + "=" + v;
    if (!v.empty() && !pool_only(kv)) env.push_back(std::move(kv));
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

// The worker's stdout and stderr files, open for appending; closed with it.
struct WorkerPool::LogFds {
  int out = -1;
  int err = -1;
  LogFds() = default;
  LogFds(const LogFds&) = delete;
  LogFds& operator=(const LogFds&) = delete;
  ~LogFds() {
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
  }
  // Opens (creates) `base`.out and `base`.err, creating `dir` first when it
  // is missing (the first worker). Blocking: the file thread only.
  absl::Status Open(const std::string& dir, const std::string& base) {
    out = ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0 && errno == ENOENT) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return absl::FailedPreconditionError("cannot create the worker log directory " + dir + ": " + ec.message());
      }
      out = ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    if (out >= 0) err = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out >= 0 && err >= 0) return absl::OkStatus();
    return absl::FailedPreconditionError("cannot create worker log files in " + dir + ": " + std::strerror(errno));
  }
};

// The libuv handle of one child; outlives the Worker until libuv closes it.
struct WorkerPool::Process {
  uv_process_t handle;
  WorkerPool* pool;  // null once the pool is gone
  WorkerId id;
};

WorkerPool::WorkerPool(WorkerPoolOptions options, EventLoop* loop) : options_(std::move(options)), loop_(loop) {}

WorkerPool::~WorkerPool() {
  *alive_ = false;  // what the file thread posts back finds the pool gone
  files_.Stop();
  timer_.reset();
  for (auto& [id, w] : workers_) {
    if (w->process == nullptr) continue;  // never spawned
    if (w->pid > 0) ::kill(-w->pid, SIGKILL);
    w->process->pool = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&w->process->handle),
             [](uv_handle_t* h) { delete reinterpret_cast<Process*>(h); });
  }
}

std::string WorkerPool::LogsDir() const {
  return options_.session_dir.empty() ? "/tmp/manta/worker_logs" : options_.session_dir + "/logs";
}

size_t WorkerPool::num_idle() const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w->state == State::kIdle;
  return n;
}

size_t WorkerPool::num_starting() const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += Starting(*w);
  return n;
}

int WorkerPool::PidOf(const WorkerId& worker) const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second->pid;
}

void WorkerPool::ForEachProcess(const std::function<void(const WorkerId&, int pid, bool leased)>& visit) const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (const auto& [id, w] : workers_) {
    if (w->pid > 0 && w->state != State::kKilling) visit(id, w->pid, w->state == State::kLeased);
  }
}

bool WorkerPool::HasWorkersOf(const JobId& job) const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (const auto& [id, w] : workers_) {
    if (w->job == job) return true;
  }
  return false;
}

absl::Status WorkerPool::Start(const rpc::TaskSpec& spec, PopCallback pop) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto job = JobId::FromBinary(spec.job_id());
  if (!job.ok()) return job.status();
  auto w = std::make_unique<Worker>();
  w->id = WorkerId::FromRandom();
  w->job = *job;
  w->key = WorkerKey(spec);
  w->state = State::kSpawning;
  w->deadline = options_.now() + options_.start_timeout;
  w->pop = std::move(pop);
  const WorkerId id = w->id;
  const std::string base = LogsDir() + "/worker-" + id.Hex();
  w->err_path = base + ".err";
  std::vector<std::string> args = {spec.worker_executable()};
  args.insert(args.end(), spec.worker_args().begin(), spec.worker_args().end());
  workers_.emplace(id, std::move(w));
  ArmTimer();
  // The source may answer at once, failing (and forgetting) the worker.
  if (options_.job_envs == nullptr) {
    OnJobEnv(id, std::move(args), base, JobEnv());
  } else {
    options_.job_envs->Prepare(*job,
                               [this, alive = alive_, id, args = std::move(args), base](absl::StatusOr<JobEnv> e) {
                                 if (*alive) OnJobEnv(id, args, base, std::move(e));
                               });
  }
  return absl::OkStatus();
}

void WorkerPool::OnJobEnv(const WorkerId& id, std::vector<std::string> args, const std::string& base,
                          absl::StatusOr<JobEnv> job_env) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  Worker& w = *it->second;
  if (w.state == State::kKilling) return FailSpawn(w, absl::CancelledError("stopped before it started"), base);
  if (!job_env.ok()) return FailSpawn(w, job_env.status(), base);
  std::vector<std::string> env = WorkerEnvironment(options_, id, w.job, job_env->env_vars);
  // The directory and files are made off the loop; the loop spawns once
  // they exist.
  files_.Submit([this, alive = alive_, mailbox = loop_->mailbox(), id, dir = LogsDir(), base, args = std::move(args),
                 env = std::move(env), cwd = std::move(job_env->cwd)] {
    auto fds = std::make_shared<LogFds>();
    absl::Status opened = fds->Open(dir, base);
    mailbox->Post([this, alive, id, args, env, cwd, base, fds, opened] {
      if (*alive) Spawn(id, args, env, cwd, base, fds, opened);
    });
  });
}

void WorkerPool::Spawn(const WorkerId& id, const std::vector<std::string>& args, const std::vector<std::string>& env,
                       const std::string& cwd, const std::string& base, const std::shared_ptr<LogFds>& fds,
                       const absl::Status& opened) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  Worker& w = *it->second;
  if (w.state == State::kKilling) return FailSpawn(w, absl::CancelledError("stopped before it started"), base);
  if (!opened.ok()) return FailSpawn(w, opened, base);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = fds->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = fds->err;
  uv_process_options_t opts;
  std::memset(&opts, 0, sizeof(opts));
  opts.file = args[0].c_str();
  opts.args = argv.data();
  opts.env = envp.data();
  if (!cwd.empty()) opts.cwd = cwd.c_str();
  opts.stdio = stdio;
  opts.stdio_count = 3;
  opts.flags = UV_PROCESS_DETACHED;  // own process group: killed as a group
  opts.exit_cb = [](uv_process_t* h, int64_t exit_status, int term_signal) {
    auto* p = reinterpret_cast<Process*>(h);
    if (p->pool != nullptr) p->pool->OnProcessExit(p->id, exit_status, term_signal);
  };
  auto* process = new Process;
  process->pool = this;
  process->id = id;
  int r = uv_spawn(loop_->uv_loop(), &process->handle, &opts);
  if (r != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&process->handle),
             [](uv_handle_t* h) { delete reinterpret_cast<Process*>(h); });
    return FailSpawn(
        w, absl::FailedPreconditionError(absl::StrCat("cannot start worker program '", args[0], "': ", uv_strerror(r))),
        base);
  }
  w.pid = process->handle.pid;
  w.process = process;
  w.state = State::kStarting;
  // The time to register counts from the spawn, not from the file work.
  w.deadline = options_.now() + options_.start_timeout;
  std::string suffix = "-" + std::to_string(w.pid);
  WorkerLogFiles logs{id, w.job, w.pid, base + suffix + ".out", base + suffix + ".err"};
  w.err_path = logs.err_path;
  Log()->info("started worker worker_id={} pid={} job_id={} program={}", id.Hex(), w.pid, w.job.Hex(), args[0]);
  // The pid goes into the files' names off the loop; the log listener hears
  // of them then.
  naming_logs_[id] = std::nullopt;
  files_.Submit([this, alive = alive_, mailbox = loop_->mailbox(), base, logs]() mutable {
    if (::rename((base + ".out").c_str(), logs.out_path.c_str()) != 0) logs.out_path = base + ".out";
    if (::rename((base + ".err").c_str(), logs.err_path.c_str()) != 0) logs.err_path = base + ".err";
    mailbox->Post([this, alive, logs] {
      if (*alive) OnLogsNamed(logs);
    });
  });
}

void WorkerPool::FailSpawn(Worker& w, const absl::Status& why, const std::string& base) {
  if (!absl::IsCancelled(why)) Log()->warn("{}", std::string(why.message()));
  PopCallback pop = std::move(w.pop);
  const JobId job = w.job;
  workers_.erase(w.id);  // `w` is gone from here
  if (options_.job_envs != nullptr) options_.job_envs->OnWorkerGone(job);
  files_.Submit([base] {
    ::unlink((base + ".out").c_str());
    ::unlink((base + ".err").c_str());
  });
  if (pop) pop(why);
  ArmTimer();
  NotifyIfAllExited();
}

void WorkerPool::OnLogsNamed(const WorkerLogFiles& logs) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(logs.worker_id);
  if (it != workers_.end()) it->second->err_path = logs.err_path;
  std::optional<WorkerExit> exit;
  if (auto n = naming_logs_.find(logs.worker_id); n != naming_logs_.end()) {
    exit = std::move(n->second);
    naming_logs_.erase(n);
  }
  if (on_logs_) on_logs_(logs);
  if (!exit) return;
  if (on_exit_) on_exit_(*exit);
  NotifyIfAllExited();
}

absl::Status WorkerPool::RegisterWorker(const rpc::RegisterWorkerRequest& request) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto id = WorkerId::FromBinary(request.worker_id());
  if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat("worker_id: ", id.status().message()));
  auto it = workers_.find(*id);
  if (it == workers_.end()) {
    return absl::InvalidArgumentError("unknown worker " + id->Hex() + ": this raylet did not start it");
  }
  if (request.port() <= 0 || request.port() > 65535) return absl::InvalidArgumentError("port must be 1 to 65535");
  Worker& w = *it->second;
  if (w.state != State::kStarting) {
    if (w.port == request.port()) return absl::OkStatus();
    return absl::FailedPreconditionError("worker " + id->Hex() + " is already registered");
  }
  w.port = request.port();
  w.deadline = absl::InfiniteFuture();
  Log()->info("worker registered worker_id={} pid={} port={}", id->Hex(), w.pid, w.port);
  if (w.pop) {
    PopCallback cb = std::move(w.pop);
    w.pop = nullptr;
    Lease(w, std::move(cb));
  } else {
    w.state = State::kIdle;
    w.idle_since = options_.now();
  }
  ArmTimer();
  return absl::OkStatus();
}

void WorkerPool::Lease(Worker& w, PopCallback cb) {
  w.state = State::kLeased;
  cb(LeasedWorker{w.id, w.port, static_cast<int>(w.pid)});
}

void WorkerPool::PopWorker(const rpc::TaskSpec& spec, PopCallback cb) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  std::string key = WorkerKey(spec);
  Worker* idle = nullptr;
  Worker* starting = nullptr;
  for (auto& [id, w] : workers_) {
    if (w->key != key) continue;
    if (w->state == State::kIdle && (idle == nullptr || w->idle_since > idle->idle_since)) idle = w.get();
    if (Starting(*w) && !w->pop && starting == nullptr) starting = w.get();
  }
  if (idle != nullptr) {
    Lease(*idle, std::move(cb));
    ArmTimer();
    return;
  }
  if (starting != nullptr) {
    starting->pop = std::move(cb);
    return;
  }
  // Start owns `cb` once it succeeds; it fails only before taking it.
  auto pending = std::make_shared<PopCallback>(std::move(cb));
  if (auto s = Start(spec, [pending](absl::StatusOr<LeasedWorker> w) { (*pending)(std::move(w)); }); !s.ok()) {
    Log()->warn("{}", std::string(s.message()));
    (*pending)(s);
  }
}

void WorkerPool::PushWorker(const WorkerId& worker) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(worker);
  if (it == workers_.end() || it->second->state != State::kLeased) return;
  it->second->state = State::kIdle;
  it->second->idle_since = options_.now();
  ArmTimer();
}

void WorkerPool::DisconnectWorker(const WorkerId& worker, const std::string& why) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(worker);
  if (it != workers_.end()) Kill(*it->second, why);
}

void WorkerPool::Prestart(const rpc::TaskSpec& spec, int backlog) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  std::string key = WorkerKey(spec);
  int have = 0;
  int alive = 0;
  for (const auto& [id, w] : workers_) {
    // A worker stopped before it was spawned still waits for its files.
    if (w->state == State::kKilling && w->pid > 0) continue;
    ++alive;
    if (w->key == key && (w->state == State::kIdle || (Starting(*w) && !w->pop))) ++have;
  }
  int n = std::min(backlog - have, options_.max_workers - alive);
  for (int i = 0; i < n; ++i) {
    if (auto s = Start(spec, nullptr); !s.ok()) {
      Log()->warn("prestart: {}", std::string(s.message()));
      return;
    }
  }
}

void WorkerPool::KillJobWorkers(const JobId& job, const absl::flat_hash_set<WorkerId>& keep) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (auto& [id, w] : workers_) {
    if (w->job == job && !keep.contains(id)) Kill(*w, "its job finished");
  }
}

void WorkerPool::KillAll(absl::Duration grace, std::function<void()> done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  all_exited_ = std::move(done);
  for (auto& [id, w] : workers_) Kill(*w, "the raylet is stopping", grace);
  NotifyIfAllExited();
}

void WorkerPool::Kill(Worker& w, const std::string& why, absl::Duration grace) {
  if (w.state == State::kKilling) return;
  Log()->info("stopping worker worker_id={} pid={}: {}", w.id.Hex(), w.pid, why);
  w.state = State::kKilling;
  w.deadline = options_.now() + grace;
  // A worker still spawning has no process: Spawn forgets it instead.
  if (w.pid > 0) ::kill(-w.pid, SIGTERM);
  if (w.pop) {
    PopCallback cb = std::move(w.pop);
    w.pop = nullptr;
    cb(absl::FailedPreconditionError("worker " + w.id.Hex() + " was stopped before it registered: " + why +
                                     (w.pid > 0 ? " (see " + w.err_path + ")" : std::string())));
  }
  ArmTimer();
}

void WorkerPool::OnProcessExit(const WorkerId& id, int64_t exit_status, int term_signal) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  std::unique_ptr<Worker> w = std::move(it->second);
  workers_.erase(it);
  if (options_.job_envs != nullptr) options_.job_envs->OnWorkerGone(w->job);
  uv_close(reinterpret_cast<uv_handle_t*>(&w->process->handle),
           [](uv_handle_t* h) { delete reinterpret_cast<Process*>(h); });
  WorkerExit exit{
      w->id,       w->job, static_cast<int>(w->pid), ExitDetail(exit_status, term_signal), w->state == State::kKilling,
      w->port != 0};
  if (exit.intentional) {
    Log()->info("worker exited worker_id={} pid={}: {}", id.Hex(), w->pid, exit.detail);
  } else {
    Log()->warn("worker exited unexpectedly worker_id={} pid={}: {} (see {})", id.Hex(), w->pid, exit.detail,
                w->err_path);
  }
  if (w->pop) {
    w->pop(absl::FailedPreconditionError(
        absl::StrCat("worker ", id.Hex(), " ", exit.detail, " before it registered (see ", w->err_path, ")")));
  }
  if (auto n = naming_logs_.find(id); n != naming_logs_.end()) {
    n->second = std::move(exit);  // reported after its log files (OnLogsNamed)
  } else if (on_exit_) {
    on_exit_(exit);
  }
  ArmTimer();
  NotifyIfAllExited();
}

void WorkerPool::OnTimer() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  absl::Time now = options_.now();
  timer_deadline_ = absl::InfiniteFuture();
  std::vector<Worker*> idle;
  for (auto& [id, w] : workers_) {
    Worker& x = *w;
    if (Starting(x) && x.deadline <= now) {
      const bool spawned = x.state == State::kStarting;
      if (x.pop) {
        PopCallback cb = std::move(x.pop);
        x.pop = nullptr;
        cb(absl::FailedPreconditionError(
            spawned ? absl::StrCat("worker ", x.id.Hex(), " (pid ", x.pid, ") did not register within ",
                                   absl::FormatDuration(options_.start_timeout), " (see ", x.err_path, ")")
                    : absl::StrCat("worker ", x.id.Hex(), " was not started within ",
                                   absl::FormatDuration(options_.start_timeout),
                                   ": its job's environment or its log files in ", LogsDir(),
                                   " were not ready in time (a slow GCS or a slow or stuck disk?)")));
      }
      Kill(x, spawned ? "it did not register in time" : "it was not ready to spawn in time");
    } else if (x.state == State::kKilling && x.pid > 0 && !x.sigkilled && x.deadline <= now) {
      Log()->warn("worker ignored SIGTERM; sending SIGKILL worker_id={} pid={}", x.id.Hex(), x.pid);
      ::kill(-x.pid, SIGKILL);
      x.sigkilled = true;
    } else if (x.state == State::kIdle) {
      idle.push_back(&x);
    }
  }
  // The most recently used idle workers are kept.
  std::sort(idle.begin(), idle.end(), [](Worker* a, Worker* b) { return a->idle_since > b->idle_since; });
  for (size_t i = options_.min_idle_workers; i < idle.size(); ++i) {
    if (idle[i]->idle_since + options_.idle_timeout <= now) Kill(*idle[i], "idle");
  }
  ArmTimer();
}

void WorkerPool::NotifyIfAllExited() {
  if (workers_.empty() && naming_logs_.empty() && all_exited_) std::exchange(all_exited_, nullptr)();
}

void WorkerPool::ArmTimer() {
  absl::Time next = absl::InfiniteFuture();
  std::vector<absl::Time> idle_since;
  for (const auto& [id, w] : workers_) {
    if (Starting(*w) || (w->state == State::kKilling && w->pid > 0 && !w->sigkilled)) {
      next = std::min(next, w->deadline);
    } else if (w->state == State::kIdle) {
      idle_since.push_back(w->idle_since);
    }
  }
  std::sort(idle_since.begin(), idle_since.end(), std::greater<>());
  for (size_t i = options_.min_idle_workers; i < idle_since.size(); ++i) {
    next = std::min(next, idle_since[i] + options_.idle_timeout);
  }
  if (next == timer_deadline_) return;
  timer_deadline_ = next;
  if (next == absl::InfiniteFuture()) {
    timer_.reset();
    return;
  }
  absl::Duration delay = std::max(absl::ZeroDuration(), next - options_.now());
  timer_ = loop_->RunAfter(delay + absl::Milliseconds(1), [this] { OnTimer(); });
}

}  // namespace manta::raylet
