// RuntimeEnvManager: the jobs' runtime environments on this node.
//
// A job's runtime env (rpc::RuntimeEnv in its GCS job record) is what every
// worker of the job starts with: the job's environment variables and, when
// the job has a working-directory package, that package unpacked. The first
// worker of a job on this node asks for it (Prepare); the manager reads the
// job's record, fetches the package from the GCS KV, checks that its bytes
// are the ones its name promises (common/package_name.h), and unpacks it
// with the Jobs API's hardened extraction (dashboard/tar_reader.h: no path
// leaves the directory, sizes and entry counts bounded) into
//
//   <root>/<job id hex>/      root = <session>/runtime_resources/nodes/<node id hex>
//
// once; later workers of the job get the same answer at once. A job's
// directory is removed once the job has finished and no worker of it is
// left on the node (OnJobFinished, OnWorkerGone), and the whole root when
// the manager is destroyed (the raylet exits after its workers).
//
// A GCS that does not answer (Unavailable, DeadlineExceeded) is asked
// again every `retry_period`, up to `max_attempts` times in all. A failure
// (GCS still unreachable, package missing, tampered or hostile) is
// reported to the waiting starts and not kept: the next start asks again.
// A job the GCS does not know has an empty runtime env.
//
// Thread: the raylet's loop thread. Unpacking and removal run on the
// manager's own file thread, which posts back to the loop.
//
//   RuntimeEnvManager envs(options, loop, get_job_env, get_package, in_use);
//   envs.Prepare(job, [](absl::StatusOr<JobEnv> env) { ... spawn in env->cwd ... });
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/thread_pool.h"
#include "dashboard/tar_reader.h"
#include "proto/common.pb.h"

namespace manta::raylet {

// What a job's workers start with.
struct JobEnv {
  std::string cwd;  // empty: the raylet's own directory
  std::map<std::string, std::string> env_vars;
};

// Where the worker pool gets a job's environment before it starts a worker.
class JobEnvSource {
 public:
  using Callback = std::function<void(absl::StatusOr<JobEnv>)>;
  virtual ~JobEnvSource() = default;
  // Calls `cb` exactly once, on the loop thread, possibly before returning.
  // Errors: FailedPrecondition saying why the job's environment cannot be
  // made (the message names the job and the package).
  virtual void Prepare(const JobId& job, Callback cb) = 0;
  // The pool forgot a worker of `job`: it exited, or never started.
  virtual void OnWorkerGone(const JobId& job) {}
};

struct RuntimeEnvManagerOptions {
  std::string root;  // created on first use; removed by the destructor
  dashboard::TarLimits limits;
  absl::Duration retry_period = absl::Milliseconds(500);
  int max_attempts = 20;
};

class RuntimeEnvManager : public JobEnvSource {
 public:
  // Reads a job's runtime env from the GCS: NotFound when the GCS does not
  // know the job. Calls back on the loop thread.
  using GetJobEnv = std::function<void(const JobId&, std::function<void(absl::StatusOr<rpc::RuntimeEnv>)>)>;
  // Fetches a package's bytes from the GCS KV: NotFound when absent. Calls
  // back on the loop thread.
  using GetPackage = std::function<void(const std::string& name, std::function<void(absl::StatusOr<std::string>)>)>;
  // Whether a worker of the job is alive on this node.
  using InUse = std::function<bool(const JobId&)>;

  RuntimeEnvManager(RuntimeEnvManagerOptions options, EventLoop* loop, GetJobEnv get_job_env, GetPackage get_package,
                    InUse in_use);
  // Waits for the file thread, then removes the root and everything in it.
  ~RuntimeEnvManager() override;

  void Prepare(const JobId& job, Callback cb) override;

  // The job finished: its directory goes once no worker of it is left.
  void OnJobFinished(const JobId& job);
  void OnWorkerGone(const JobId& job) override;

  // Jobs with an environment ready or being made.
  size_t num_jobs() const { return jobs_.size(); }
  std::string DirOf(const JobId& job) const;

 private:
  struct Job {
    bool ready = false;
    bool finished = false;
    JobEnv env;
    std::vector<Callback> waiting;  // while being made
    int attempts = 0;               // GCS calls that did not get an answer
    std::unique_ptr<EventLoop::Timer> retry;
  };

  // Reads the job's runtime env (again, after a GCS that did not answer).
  void FetchJobEnv(const JobId& job);
  void FetchPackage(const JobId& job, const std::string& name);
  // Whether `status` is a GCS that did not answer and `job` may ask again;
  // if so, `again` runs after the retry period.
  bool RetryLater(const JobId& job, const absl::Status& status, std::function<void()> again);
  void OnJobEnv(const JobId& job, absl::StatusOr<rpc::RuntimeEnv> env);
  void OnPackage(const JobId& job, const std::string& name, absl::StatusOr<std::string> data);
  // Answers the job's waiters; a failure forgets the job.
  void Complete(const JobId& job, absl::Status status);
  void MaybeRemove(const JobId& job);

  const RuntimeEnvManagerOptions options_;
  EventLoop* const loop_;
  const GetJobEnv get_job_env_;
  const GetPackage get_package_;
  const InUse in_use_;
  // Loop thread only. Invariant: a job is here from its first Prepare until
  // it failed or its directory was removed; `ready` jobs have no waiters.
  absl::flat_hash_map<JobId, Job> jobs_;
  // Cleared by the destructor: work posted back to the loop checks it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  ThreadPool files_{1};
};

}  // namespace manta::raylet
