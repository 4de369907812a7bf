// JobManager: the job table.
//
// Owns every job's JobInfo, kept in the store's "jobs" table, and the job id
// counter (the "job_counter" table), so a restarted GCS recovers both and
// never hands out an id twice. Job ids are 4 bytes, big-endian, from 1 up, as
// in Ray. Publishes every change on the JOB channel (key: job id).
//
// A job finishes when its driver calls MarkJobFinished, or when its driver is
// gone: drivers hold a long poll with subscriber_job_id set, and the poll
// adapter reports each poll's start and end here. When a held poll's
// connection drops and no new poll from the job starts within
// `driver_reconnect_grace`, or when no poll starts within `driver_poll_gap`
// after one ended normally, the job is finished. A timer exists only for a
// job whose driver holds no poll at that moment.
//
// A driver killed between two polls (its last one answered, the next not yet
// sent) drops no held connection. So when no poll follows a normal end within
// `driver_probe_delay`, the driver's core worker is asked whether it lives
// (the DriverProbe); a process that is gone (nothing listens at its address,
// or another worker does) finishes the job then, not `driver_poll_gap` later.
//
// On finish, listeners run (the actor manager kills the job's non-detached
// actors) and every alive raylet is asked to stop the job's workers.
//
// Thread: the GCS loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/publisher.h"
#include "gcs/raylet_client.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

struct JobManagerOptions {
  absl::Duration driver_reconnect_grace = absl::Seconds(2);
  absl::Duration driver_poll_gap = absl::Seconds(30);
  // After a restart, a job recovered alive is finished unless its driver
  // polls again within this long (a driver that exited while the GCS was
  // down never will).
  absl::Duration driver_recovery_grace = absl::Seconds(10);
  absl::Duration driver_probe_delay = absl::Seconds(1);
};

class JobManager {
 public:
  using Listener = std::function<void(const rpc::JobInfo&)>;
  // Schedules `fn` after a delay; destroying the timer cancels it.
  using RunAfter = std::function<std::unique_ptr<EventLoop::Timer>(absl::Duration, std::function<void()>)>;
  using AliveNodes = std::function<std::vector<rpc::NodeInfo>()>;
  // Asks whether the driver at `driver` lives; `gone` is true only when its
  // process is known to be gone (a hung or unreachable one is not).
  using DriverProbe = std::function<void(const rpc::Address& driver, std::function<void(bool gone)> answer)>;

  static constexpr char kTable[] = "jobs";
  static constexpr char kCounterTable[] = "job_counter";
  static constexpr size_t kMaxEntrypointBytes = 64 << 10;

  JobManager(Store* store, Publisher* publisher, RayletClientPool* raylets, AliveNodes alive_nodes, RunAfter run_after,
             JobManagerOptions options = {});

  // Loads the table and the counter from the store.
  absl::Status Initialize();

  void AddJobFinishedListener(Listener l) { finished_listeners_.push_back(std::move(l)); }
  // Without one, a driver between polls is given the whole poll gap.
  void SetDriverProbe(DriverProbe probe) { probe_ = std::move(probe); }

  // Assigns the next job id when request.job().job_id() is empty, unless the
  // driver (driver_address.worker_id) already added a job: a retry gets that
  // job's id. A known alive job id is accepted again (idempotent); a
  // finished one is FailedPrecondition. Replies once the job is durable.
  void HandleAddJob(const rpc::AddJobRequest& request, rpc::AddJobReply* reply, rpc::Done done);
  // NotFound for an unknown job; finishing a finished job is OK.
  void HandleMarkJobFinished(const rpc::MarkJobFinishedRequest& request, rpc::MarkJobFinishedReply* reply,
                             rpc::Done done);
  void HandleGetAllJobInfo(const rpc::GetAllJobInfoRequest& request, rpc::GetAllJobInfoReply* reply, rpc::Done done);

  // From the poll adapter: a poll with subscriber_job_id started or ended
  // (`connection_lost`: the client went away while the poll was held).
  void OnDriverPollStarted(const JobId& job);
  void OnDriverPollEnded(const JobId& job, bool connection_lost);

  // Finishes an alive job (no-op otherwise). `reason` goes to the log.
  void FinishJob(const JobId& job, const std::string& reason);

  // Null for an unknown job.
  const rpc::JobInfo* Get(const JobId& job) const;
  bool IsFinished(const JobId& job) const;
  size_t num_watched_drivers() const { return drivers_.size(); }

 private:
  struct DriverWatch {
    int held_polls = 0;
    uint64_t polls_started = 0;               // tells a stale probe answer from a current one
    std::unique_ptr<EventLoop::Timer> timer;  // set only while held_polls == 0
  };

  void Publish(const rpc::JobInfo& info);
  void ArmDriverTimer(const JobId& job, absl::Duration delay, const std::string& reason);
  void ProbeDriver(const JobId& job);

  Store* const store_;
  Publisher* const publisher_;
  RayletClientPool* const raylets_;
  const AliveNodes alive_nodes_;
  const RunAfter run_after_;
  const JobManagerOptions options_;

  std::map<JobId, rpc::JobInfo> jobs_;                 // ordered by id, so by age
  absl::flat_hash_map<std::string, JobId> by_driver_;  // driver worker id -> its job
  uint32_t next_job_ = 1;                              // persisted before an id is handed out
  absl::flat_hash_map<JobId, DriverWatch> drivers_;    // alive jobs whose driver polled
  std::vector<Listener> finished_listeners_;
  DriverProbe probe_;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// 4 bytes, big-endian.
JobId JobIdFromInt(uint32_t n);
uint32_t JobIdToInt(const JobId& id);

// Checks an Address from outside; `what` names it in the error.
absl::Status ValidateAddress(const rpc::Address& a, const char* what);

}  // namespace manta::gcs
