// WorkerPool: the worker processes of this node.
//
// Owns every worker process the raylet started: starting (spawned, not yet
// registered), idle, leased, and being killed. Starts a worker with uv_spawn
// as the lease's program (spec.worker_executable and worker_args) in its own
// process group, with the MANTA_* variables below on top of the raylet's
// environment and stdout/stderr in <session>/logs/worker-<id>-<pid>.{out,err};
// reaps it in libuv's exit callback. One timer, armed only while something
// can expire, handles start timeouts, idle timeouts (idle workers beyond
// `min_idle_workers`) and the SIGKILL that follows a SIGTERM after the grace.
//
// Environment of a worker (the core worker reads it):
//   MANTA_WORKER_ID      hex worker id; announce it in RegisterWorker
//   MANTA_JOB_ID         hex job id
//   MANTA_NODE_ID        hex node id
//   MANTA_NODE_IP        this node's address; bind the worker's server to it
//   MANTA_RAYLET_ADDRESS ip:port of this raylet
//   MANTA_RAYLET_PID     the raylet's pid: prctl(PR_SET_PDEATHSIG, SIGKILL)
//                        at start, then exit if getppid() differs, so a
//                        killed raylet leaves no workers behind
//   MANTA_GCS_ADDRESS    ip:port of the GCS
//   MANTA_SESSION_DIR    the session directory (unset when there is none)
//   MANTA_STATS_DIR      where the worker publishes its stats pages for the
//                        raylet's metrics (common/metrics/stats_page.h);
//                        unset when the raylet serves no metrics
//   MANTA_TOKEN_FILE     file with the cluster token (or MANTA_TOKEN, the
//                        token itself, when the raylet has no token file);
//                        neither is set when auth is off
// TPU_* variables are inherited unchanged; the core worker applies
// tpu::VisibleChipsEnv per lease from the lease reply.
//
// The job's runtime env: with a JobEnvSource, a worker starts in its job's
// directory (JobEnv::cwd) with the job's env_vars on top of the raylet's
// environment (a name mapped to "" is removed; the MANTA_* variables above
// always win). Workers serve one job only, so nothing of one job's
// environment reaches another's. A job whose environment cannot be made
// fails the start (the pop gets FailedPrecondition saying why).
//
// Nothing blocks the loop on the disk: a start creates the log directory and
// files on the pool's file thread, the loop then spawns with uv_spawn, and
// the file thread renames the files to carry the pid. The log listener hears
// of a worker once its files have their final names, and always before the
// exit listener hears of the same worker.
//
// Thread: the raylet's loop thread; the file thread only touches files and
// posts back to the loop.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/container/flat_hash_map.h"
#include "common/event_loop.h"
#include "common/thread_pool.h"
#include "proto/node_manager.pb.h"
#include "raylet/runtime_env_manager.h"
#include "raylet/worker_pool_interface.h"

namespace manta::raylet {

struct WorkerPoolOptions {
  NodeId node_id;
  std::string node_ip = "127.0.0.1";
  std::string raylet_address;  // ip:port
  std::string gcs_address;
  std::string token_file;   // preferred over token
  std::string token;        // both empty: auth off
  std::string session_dir;  // empty: logs go to /tmp/manta/worker_logs
  std::string stats_dir;    // MANTA_STATS_DIR; empty: none
  // Workers started ahead of need (Prestart) only while fewer than this many
  // are alive. Workers for leases that hold resources are always started.
  int max_workers = 4;
  int min_idle_workers = 1;
  absl::Duration idle_timeout = absl::Seconds(60);
  absl::Duration start_timeout = absl::Seconds(30);
  absl::Duration kill_grace = absl::Seconds(2);
  // Where a job's directory and variables come from, told when the pool
  // forgets a worker (so a job's directory goes only after its last
  // worker); null: every worker starts in the raylet's directory with its
  // environment. Not owned.
  JobEnvSource* job_envs = nullptr;
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

// A worker process that exited.
struct WorkerExit {
  WorkerId worker_id;
  JobId job_id;
  int pid = 0;
  std::string detail;        // "exited with code 3", "killed by signal 9"
  bool intentional = false;  // the pool stopped it
  bool registered = false;
};

struct WorkerLogFiles {
  WorkerId worker_id;
  JobId job_id;
  int pid = 0;
  std::string out_path;
  std::string err_path;
};

class WorkerPool : public WorkerPoolInterface {
 public:
  WorkerPool(WorkerPoolOptions options, EventLoop* loop);
  // Kills (SIGKILL) workers still alive.
  ~WorkerPool() override;

  void set_raylet_address(const std::string& address) { options_.raylet_address = address; }

  // A spawned worker announces its port. InvalidArgument for an unknown or
  // malformed worker id or port. Idempotent for a registered worker.
  absl::Status RegisterWorker(const rpc::RegisterWorkerRequest& request);

  // Called once per exited worker, after the pool forgot it.
  void SetExitListener(std::function<void(const WorkerExit&)> fn) { on_exit_ = std::move(fn); }
  // Called once per spawned worker with its log files.
  void SetLogListener(std::function<void(const WorkerLogFiles&)> fn) { on_logs_ = std::move(fn); }

  // Stops every worker (SIGTERM, SIGKILL after `grace`); `done` runs once
  // all have exited.
  void KillAll(absl::Duration grace, std::function<void()> done);
  // Runs the expirations due at options.now(). Called by the pool's timer;
  // tests with a fake clock call it directly.
  void OnTimer();

  // WorkerPoolInterface.
  void PopWorker(const rpc::TaskSpec& spec, PopCallback cb) override;
  void PushWorker(const WorkerId& worker) override;
  void DisconnectWorker(const WorkerId& worker, const std::string& why) override;
  void Prestart(const rpc::TaskSpec& spec, int backlog) override;
  void KillJobWorkers(const JobId& job, const absl::flat_hash_set<WorkerId>& keep) override;

  size_t num_workers() const { return workers_.size(); }
  size_t num_idle() const;
  size_t num_starting() const;
  // The pid of a live worker; 0 when unknown.
  int PidOf(const WorkerId& worker) const;
  // Visits each live worker process (started, idle or leased, not being
  // killed): its id, pid and whether a lease holds it.
  void ForEachProcess(const std::function<void(const WorkerId&, int pid, bool leased)>& visit) const;
  // Whether any worker of `job` (in any state) is still known to the pool.
  bool HasWorkersOf(const JobId& job) const;

 private:
  struct Process;
  struct LogFds;
  // kSpawning: log files being made, no process yet (pid 0); kKilling may
  // also have no process, when the worker was stopped while spawning.
  enum class State { kSpawning, kStarting, kIdle, kLeased, kKilling };
  struct Worker {
    WorkerId id;
    JobId job;
    std::string key;  // job, program and arguments: which leases it may serve
    pid_t pid = 0;
    int port = 0;
    State state = State::kStarting;
    absl::Time deadline = absl::InfiniteFuture();  // starting: register by; killing: SIGKILL at
    absl::Time idle_since;
    PopCallback pop;  // starting: the lease waiting for it; empty if prestarted
    bool sigkilled = false;
    std::string err_path;
    Process* process = nullptr;
  };

  // Adds a kSpawning worker that will serve `pop` (empty: prestarted), gets
  // its job's environment, then has its log files made; Spawn follows.
  // InvalidArgument (pop not called) for a malformed job id.
  absl::Status Start(const rpc::TaskSpec& spec, PopCallback pop);
  // On the loop, once the job's environment is known: fails the worker or
  // has its log files made.
  void OnJobEnv(const WorkerId& id, std::vector<std::string> args, const std::string& base,
                absl::StatusOr<JobEnv> job_env);
  // On the loop, once the files are made (or could not be): starts the
  // process in `cwd` (empty: the raylet's), or fails the worker's pop.
  void Spawn(const WorkerId& id, const std::vector<std::string>& args, const std::vector<std::string>& env,
             const std::string& cwd, const std::string& base, const std::shared_ptr<LogFds>& fds,
             const absl::Status& opened);
  void FailSpawn(Worker& w, const absl::Status& why, const std::string& base);
  void OnLogsNamed(const WorkerLogFiles& logs);
  // Whether `w` is on its way to registering (kSpawning or kStarting).
  static bool Starting(const Worker& w) { return w.state == State::kSpawning || w.state == State::kStarting; }
  void OnProcessExit(const WorkerId& id, int64_t exit_status, int term_signal);
  void Kill(Worker& w, const std::string& why, absl::Duration grace);
  void Kill(Worker& w, const std::string& why) { Kill(w, why, options_.kill_grace); }
  void Lease(Worker& w, PopCallback cb);
  void ArmTimer();
  // Runs KillAll's `done` once no worker is left and every exit is reported.
  void NotifyIfAllExited();
  std::string LogsDir() const;

  WorkerPoolOptions options_;
  EventLoop* const loop_;
  std::map<WorkerId, std::unique_ptr<Worker>> workers_;
  std::unique_ptr<EventLoop::Timer> timer_;
  absl::Time timer_deadline_ = absl::InfiniteFuture();
  std::function<void(const WorkerExit&)> on_exit_;
  std::function<void(const WorkerLogFiles&)> on_logs_;
  std::function<void()> all_exited_;
  // Workers whose log files are still being renamed, and the exits that wait
  // for that (the log listener hears of a worker first).
  absl::flat_hash_map<WorkerId, std::optional<WorkerExit>> naming_logs_;
  // Cleared by the destructor: work posted back to the loop checks it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Log directory and file calls, in order (one thread).
  ThreadPool files_{1};
};

}  // namespace manta::raylet
