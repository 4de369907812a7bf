#include "gcs/job_manager.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/package_name.h"

namespace manta::gcs {
namespace {

constexpr char kCounterKey[] = "next_job_id";
constexpr size_t kMaxRuntimeEnvBytes = 64 << 10;

// A job's runtime env reaches every worker's environment and a path on
// every node: names that could not be a variable or a package are refused.
absl::Status ValidateRuntimeEnv(const rpc::RuntimeEnv& env) {
  if (!env.working_dir_package().empty()) {
    if (auto s = ValidatePackageRef(env.working_dir_package()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("runtime_env.working_dir_package: ", s.message()));
    }
  }
  if (env.ByteSizeLong() > kMaxRuntimeEnvBytes) {
    return absl::InvalidArgumentError(absl::StrCat("runtime_env exceeds ", kMaxRuntimeEnvBytes, " bytes"));
  }
  for (const auto& [name, value] : env.env_vars()) {
    if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos ||
        value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("runtime_env.env_vars: a name is empty or holds '=' or NUL, or a value NUL");
    }
  }
  return absl::OkStatus();
}

}  // namespace

JobId JobIdFromInt(uint32_t n) {
  char b[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  return *JobId::FromBinary(std::string_view(b, 4));
}

uint32_t JobIdToInt(const JobId& id) {
  std::string b = id.Binary();
  return (static_cast<uint32_t>(static_cast<uint8_t>(b[0])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[2])) << 8) | static_cast<uint32_t>(static_cast<uint8_t>(b[3]));
}

absl::Status ValidateAddress(const rpc::Address& a, const char* what) {
  if (a.ip().size() > 255) return absl::InvalidArgumentError(absl::StrCat(what, ": ip is too long"));
  if (a.port() < 0 || a.port() > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": port ", a.port(), " is invalid"));
  }
  if (!a.worker_id().empty() && a.worker_id().size() != WorkerId::kSize) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": worker_id must be ", WorkerId::kSize, " bytes"));
  }
  if (!a.node_id().empty() && a.node_id().size() != NodeId::kSize) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": node_id must be ", NodeId::kSize, " bytes"));
  }
  return absl::OkStatus();
}

JobManager::JobManager(Store* store, Publisher* publisher, RayletClientPool* raylets, AliveNodes alive_nodes,
                       RunAfter run_after, JobManagerOptions options)
    : store_(store),
      publisher_(publisher),
      raylets_(raylets),
      alive_nodes_(std::move(alive_nodes)),
      run_after_(std::move(run_after)),
      options_(options) {}

absl::Status JobManager::Initialize() {
  MANTA_CHECK_THREAD(thread_);
  auto counter = store_->ReadAll(kCounterTable);
  if (!counter.ok()) return counter.status();
  for (const auto& [k, v] : *counter) {
    uint32_t n;
    if (k == kCounterKey && absl::SimpleAtoi(v, &n) && n > 0) next_job_ = n;
  }
  auto rows = store_->ReadAll(kTable);
  if (!rows.ok()) return rows.status();
  for (const auto& [key, value] : *rows) {
    rpc::JobInfo info;
    auto id = JobId::FromBinary(key);
    // The finished listeners take the entry's job_id as valid.
    if (!id.ok() || !info.ParseFromString(value) || info.job_id() != key) {
      Logger("gcs")->warn("skipping a corrupt job row in the store");
      continue;
    }
    // Never reuse an id, even if the counter row was lost.
    uint32_t n = JobIdToInt(*id);
    if (n != UINT32_MAX && n >= next_job_) next_job_ = n + 1;
    bool alive = !info.is_dead();
    if (!info.driver_address().worker_id().empty()) by_driver_[info.driver_address().worker_id()] = *id;
    jobs_[*id] = std::move(info);
    if (alive) ArmDriverTimer(*id, options_.driver_recovery_grace, "its driver did not return after the GCS restarted");
  }
  Logger("gcs")->info("recovered {} jobs, next job id {}", jobs_.size(), next_job_);
  return absl::OkStatus();
}

void JobManager::HandleAddJob(const rpc::AddJobRequest& request, rpc::AddJobReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  const rpc::JobInfo& in = request.job();
  if (auto s = ValidateAddress(in.driver_address(), "driver_address"); !s.ok()) return done(s);
  if (in.driver_ip().size() > 255) return done(absl::InvalidArgumentError("driver_ip is too long"));
  if (in.driver_pid() < 0) return done(absl::InvalidArgumentError("driver_pid must not be negative"));
  if (in.entrypoint().size() > kMaxEntrypointBytes) {
    return done(absl::InvalidArgumentError(absl::StrCat("entrypoint exceeds ", kMaxEntrypointBytes, " bytes")));
  }
  if (auto s = ValidateRuntimeEnv(in.runtime_env()); !s.ok()) return done(s);
  JobId id;
  if (!in.job_id().empty()) {
    auto given = JobId::FromBinary(in.job_id());
    if (!given.ok()) return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
    id = *given;
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      if (it->second.is_dead()) {
        return done(absl::FailedPreconditionError("job " + id.Hex() + " has finished; start a new job"));
      }
      reply->set_job_id(id.Binary());
      return done(absl::OkStatus());
    }
    uint32_t n = JobIdToInt(id);
    if (n == 0 || n == UINT32_MAX) return done(absl::InvalidArgumentError("job_id " + id.Hex() + " is reserved"));
    if (n >= next_job_) next_job_ = n + 1;
  } else {
    const std::string& driver = in.driver_address().worker_id();
    if (auto known = by_driver_.find(driver); !driver.empty() && known != by_driver_.end()) {
      // A retry whose first reply was lost: the driver's job, not a second one.
      reply->set_job_id(known->second.Binary());
      return done(absl::OkStatus());
    }
    if (next_job_ == UINT32_MAX) return done(absl::ResourceExhaustedError("job ids are exhausted"));
    id = JobIdFromInt(next_job_++);
  }
  store_->Put(kCounterTable, kCounterKey, std::to_string(next_job_), nullptr);
  rpc::JobInfo info = in;
  info.set_job_id(id.Binary());
  info.set_is_dead(false);
  info.set_start_time_ms(NowUnixMs());
  info.clear_end_time_ms();
  jobs_[id] = info;
  if (!info.driver_address().worker_id().empty()) by_driver_[info.driver_address().worker_id()] = id;
  reply->set_job_id(id.Binary());
  Logger("gcs")->info("job added job_id={} driver_pid={} driver_ip={}", id.Hex(), info.driver_pid(), info.driver_ip());
  // Writes apply in order: once the job is durable, so is the counter.
  store_->Put(kTable, id.Binary(), info.SerializeAsString(), std::move(done));
  Publish(info);
}

void JobManager::HandleMarkJobFinished(const rpc::MarkJobFinishedRequest& request, rpc::MarkJobFinishedReply*,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = JobId::FromBinary(request.job_id());
  if (!id.ok()) return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
  auto it = jobs_.find(*id);
  if (it == jobs_.end()) return done(absl::NotFoundError("no job " + id->Hex()));
  if (it->second.is_dead()) return done(absl::OkStatus());
  FinishJob(*id, "the driver finished");
  done(absl::OkStatus());
}

void JobManager::HandleGetAllJobInfo(const rpc::GetAllJobInfoRequest& request, rpc::GetAllJobInfoReply* reply,
                                     rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (!request.job_id().empty()) {
    auto id = JobId::FromBinary(request.job_id());
    if (!id.ok()) return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
    if (auto it = jobs_.find(*id); it != jobs_.end()) *reply->add_jobs() = it->second;
    return done(absl::OkStatus());
  }
  for (const auto& [id, info] : jobs_) *reply->add_jobs() = info;
  done(absl::OkStatus());
}

void JobManager::FinishJob(const JobId& job, const std::string& reason) {
  MANTA_CHECK_THREAD(thread_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.is_dead()) return;
  drivers_.erase(job);
  rpc::JobInfo& info = it->second;
  info.set_is_dead(true);
  info.set_end_time_ms(NowUnixMs());
  Logger("gcs")->info("job finished job_id={} reason={}", job.Hex(), reason);
  store_->Put(kTable, job.Binary(), info.SerializeAsString(), [job](const absl::Status& s) {
    if (!s.ok()) Logger("gcs")->error("cannot persist job_id={}: {}", job.Hex(), s.ToString());
  });
  rpc::JobInfo copy = info;
  Publish(copy);
  for (auto& l : finished_listeners_) l(copy);
  rpc::KillJobWorkersRequest kill;
  kill.set_job_id(job.Binary());
  for (const rpc::NodeInfo& node : alive_nodes_()) {
    NodeId node_id = *NodeId::FromBinary(node.node_id());
    raylets_->KillJobWorkers(node_id, RayletAddress(node), kill,
                             [job, node_id](const absl::Status& s, rpc::KillJobWorkersReply&&) {
                               if (!s.ok()) {
                                 Logger("gcs")->warn("KillJobWorkers failed job_id={} node_id={}: {}", job.Hex(),
                                                     node_id.Hex(), s.ToString());
                               }
                             });
  }
}

void JobManager::OnDriverPollStarted(const JobId& job) {
  MANTA_CHECK_THREAD(thread_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.is_dead()) return;
  DriverWatch& w = drivers_[job];
  ++w.held_polls;
  ++w.polls_started;
  w.timer.reset();
}

void JobManager::OnDriverPollEnded(const JobId& job, bool connection_lost) {
  MANTA_CHECK_THREAD(thread_);
  auto it = drivers_.find(job);
  if (it == drivers_.end()) return;
  DriverWatch& w = it->second;
  if (w.held_polls > 0) --w.held_polls;
  if (w.held_polls > 0) return;
  if (connection_lost) {
    ArmDriverTimer(job, options_.driver_reconnect_grace, "the driver's connection to the GCS dropped");
  } else if (probe_ != nullptr) {
    w.timer = run_after_(options_.driver_probe_delay, [this, job] { ProbeDriver(job); });
  } else {
    ArmDriverTimer(job, options_.driver_poll_gap, "the driver stopped polling the GCS");
  }
}

void JobManager::ProbeDriver(const JobId& job) {
  auto it = drivers_.find(job);
  auto info = jobs_.find(job);
  if (it == drivers_.end() || it->second.held_polls > 0 || info == jobs_.end()) return;
  it->second.timer.reset();  // this one fired; the answer arms the next
  const uint64_t polls_started = it->second.polls_started;
  probe_(info->second.driver_address(), [this, job, polls_started](bool gone) {
    auto it = drivers_.find(job);
    if (it == drivers_.end() || it->second.held_polls > 0 || it->second.polls_started != polls_started) return;
    if (gone) {
      Logger("gcs")->warn("driver of job_id={} is gone: its process no longer answers", job.Hex());
      return FinishJob(job, "the driver's process is gone");
    }
    ArmDriverTimer(job, std::max(options_.driver_poll_gap - options_.driver_probe_delay, absl::ZeroDuration()),
                   "the driver stopped polling the GCS");
  });
}

void JobManager::ArmDriverTimer(const JobId& job, absl::Duration delay, const std::string& reason) {
  drivers_[job].timer = run_after_(delay, [this, job, reason] {
    auto it = drivers_.find(job);
    if (it == drivers_.end() || it->second.held_polls > 0) return;
    Logger("gcs")->warn("driver of job_id={} is gone: {}", job.Hex(), reason);
    // FinishJob erases the watch, and with it this timer: nothing after.
    FinishJob(job, reason);
  });
}

const rpc::JobInfo* JobManager::Get(const JobId& job) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

bool JobManager::IsFinished(const JobId& job) const {
  MANTA_CHECK_THREAD(thread_);
  const rpc::JobInfo* info = Get(job);
  return info != nullptr && info->is_dead();
}

void JobManager::Publish(const rpc::JobInfo& info) {
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::JOB);
  msg.set_key(info.job_id());
  *msg.mutable_job_info() = info;
  publisher_->Publish(std::move(msg));
}

}  // namespace manta::gcs
