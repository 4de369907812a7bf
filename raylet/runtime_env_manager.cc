#include "raylet/runtime_env_manager.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/package_name.h"
#include "common/status.h"
#include "raylet/raylet_log.h"

namespace manta::raylet {

RuntimeEnvManager::RuntimeEnvManager(RuntimeEnvManagerOptions options, EventLoop* loop, GetJobEnv get_job_env,
                                     GetPackage get_package, InUse in_use)
    : options_(std::move(options)),
      loop_(loop),
      get_job_env_(std::move(get_job_env)),
      get_package_(std::move(get_package)),
      in_use_(std::move(in_use)) {}

RuntimeEnvManager::~RuntimeEnvManager() {
  *alive_ = false;
  files_.Stop();
  if (auto s = dashboard::RemoveTree(options_.root); !s.ok()) {
    Log()->warn("cannot remove the jobs' working directories {}: {}", options_.root, s.ToString());
  }
}

std::string RuntimeEnvManager::DirOf(const JobId& job) const { return options_.root + "/" + job.Hex(); }

void RuntimeEnvManager::Prepare(const JobId& job, Callback cb) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto [it, inserted] = jobs_.try_emplace(job);
  if (it->second.ready) return cb(it->second.env);
  it->second.waiting.push_back(std::move(cb));
  if (inserted) FetchJobEnv(job);  // else being made
}

void RuntimeEnvManager::FetchJobEnv(const JobId& job) {
  get_job_env_(job, [this, alive = alive_, job](absl::StatusOr<rpc::RuntimeEnv> env) {
    if (*alive) OnJobEnv(job, std::move(env));
  });
}

void RuntimeEnvManager::FetchPackage(const JobId& job, const std::string& name) {
  get_package_(name, [this, alive = alive_, job, name](absl::StatusOr<std::string> data) {
    if (*alive) OnPackage(job, name, std::move(data));
  });
}

bool RuntimeEnvManager::RetryLater(const JobId& job, const absl::Status& status, std::function<void()> again) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !(absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status))) return false;
  if (++it->second.attempts >= options_.max_attempts) return false;
  it->second.retry = loop_->RunAfter(options_.retry_period, std::move(again));
  return true;
}

void RuntimeEnvManager::OnJobEnv(const JobId& job, absl::StatusOr<rpc::RuntimeEnv> env) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (!env.ok() && absl::IsNotFound(env.status())) env = rpc::RuntimeEnv();  // a job the GCS does not know
  if (!env.ok() && RetryLater(job, env.status(), [this, job] { FetchJobEnv(job); })) return;
  if (!env.ok()) {
    return Complete(job, absl::FailedPreconditionError(absl::StrCat("cannot read the runtime env of job ", job.Hex(),
                                                                    ": ", env.status().message())));
  }
  it->second.env.env_vars.insert(env->env_vars().begin(), env->env_vars().end());
  const std::string name = env->working_dir_package();
  if (name.empty()) return Complete(job, absl::OkStatus());
  if (auto s = ValidatePackageRef(name); !s.ok()) {
    return Complete(job, absl::FailedPreconditionError(absl::StrCat("job ", job.Hex(), ": ", s.message())));
  }
  FetchPackage(job, name);
}

void RuntimeEnvManager::OnPackage(const JobId& job, const std::string& name, absl::StatusOr<std::string> data) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (jobs_.find(job) == jobs_.end()) return;
  const std::string what = absl::StrCat("the working_dir package ", name, " of job ", job.Hex());
  if (!data.ok() && RetryLater(job, data.status(), [this, job, name] { FetchPackage(job, name); })) return;
  if (!data.ok()) {
    return Complete(job, absl::FailedPreconditionError(
                             absl::StrCat("cannot fetch ", what, " from the GCS: ", data.status().message())));
  }
  const std::string dir = DirOf(job);
  // Checking and unpacking read and write the disk: off the loop.
  files_.Submit([this, alive = alive_, mailbox = loop_->mailbox(), job, name, what, dir, root = options_.root,
                 limits = options_.limits, data = std::move(*data)] {
    absl::Status done = [&]() -> absl::Status {
      RETURN_IF_ERROR(CheckPackageContent(name, data));
      RETURN_IF_ERROR(MakeDirs(root, 0700));
      RETURN_IF_ERROR(dashboard::RemoveTree(dir));
      return dashboard::ExtractTar(data, dir, limits);
    }();
    mailbox->Post([this, alive, job, what, dir, done] {
      if (!*alive) return;
      if (!done.ok()) {
        Log()->warn("refused {}: {}", what, done.ToString());
        return Complete(job, absl::FailedPreconditionError(absl::StrCat("refused ", what, ": ", done.message())));
      }
      if (auto it = jobs_.find(job); it != jobs_.end()) it->second.env.cwd = dir;
      Log()->info("unpacked {} into {}", what, dir);
      Complete(job, absl::OkStatus());
    });
  });
}

void RuntimeEnvManager::Complete(const JobId& job, absl::Status status) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  std::vector<Callback> waiting = std::move(it->second.waiting);
  it->second.waiting.clear();
  if (status.ok()) {
    it->second.ready = true;
    JobEnv env = it->second.env;
    for (Callback& cb : waiting) cb(env);
    MaybeRemove(job);
    return;
  }
  jobs_.erase(it);
  for (Callback& cb : waiting) cb(status);
}

void RuntimeEnvManager::OnJobFinished(const JobId& job) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.finished = true;
  MaybeRemove(job);
}

void RuntimeEnvManager::OnWorkerGone(const JobId& job) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  MaybeRemove(job);
}

void RuntimeEnvManager::MaybeRemove(const JobId& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.finished || !it->second.ready || in_use_(job)) return;
  const bool had_dir = !it->second.env.cwd.empty();
  jobs_.erase(it);
  if (!had_dir) return;
  files_.Submit([dir = DirOf(job)] {
    if (auto s = dashboard::RemoveTree(dir); !s.ok()) Log()->warn("cannot remove {}: {}", dir, s.ToString());
  });
}

}  // namespace manta::raylet
