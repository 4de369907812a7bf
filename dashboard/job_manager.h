// JobManager: the jobs of one cluster. It owns the job records (mirrored to
// the JobStore, i.e. the GCS), starts each job's runner (job_runner.h) once
// its working directory is unpacked and its entrypoint resources fit on the
// head node, watches runners, stops them on request (SIGTERM to the job's
// process group, SIGKILL after the grace period) and records how they ended.
//
// Threads. The public calls marked "any thread" are made by the HTTP server's
// threads; they validate, update the in-memory table under `mu_` and Post the
// slow work to the supervisor loop. Everything that touches processes, the
// working directories and the resource reservations runs on the supervisor
// loop (`loop`, the dashboard's main EventLoop), which is allowed to block
// on the store and on unpacking: HTTP is served on other threads.
//
// Invariants. A record is in the store before Submit returns; later changes
// reach the store in order through Flush (one writer at a time, `store_mu_`),
// and are retried while the store is unreachable. A job's entrypoint
// resources are reserved exactly while it is RUNNING.
//
//   JobManager jobs(options, &store, &packages, &loop);
//   RETURN_IF_ERROR(jobs.Start());               // loop thread, before Run()
//   ASSIGN_OR_RETURN(std::string id, jobs.Submit(request));   // any thread
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "common/resources.h"
#include "dashboard/job_info.h"
#include "dashboard/job_runner.h"
#include "dashboard/job_store.h"
#include "dashboard/package_store.h"

namespace manta::dashboard {

struct JobManagerOptions {
  std::string session_dir;
  std::string gcs_address;  // given to jobs as MANTA_ADDRESS
  std::string token;        // given to jobs as MANTA_TOKEN; empty with --auth=none
  std::string runner_path;  // the job_runner executable
  absl::Duration stop_grace = absl::Seconds(10);
  absl::Duration shutdown_grace = absl::Seconds(3);
  // How often runners are checked; runners of this process are also
  // checked on SIGCHLD.
  absl::Duration poll_period = absl::Milliseconds(200);
  // How long Start() retries loading the records while the GCS is not up.
  absl::Duration load_timeout = absl::Seconds(15);
  // The records' start and end times, and when a job that could not start
  // is tried again, read this clock.
  Clock clock = absl::Now;
};

class JobManager {
 public:
  JobManager(JobManagerOptions options, JobStore* store, PackageStore* packages, EventLoop* loop);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Loop thread, once. Loads the records; a job left RUNNING by an earlier
  // dashboard is adopted when its runner still lives, else finished from its
  // exit file or marked FAILED; one left PENDING is marked FAILED. Starts
  // watching. Unavailable when the store stays unreachable.
  absl::Status Start();

  // Any thread. Records the job (PENDING) and queues its start. Returns the
  // submission id. AlreadyExists for a taken id (InvalidArgument-worthy for
  // HTTP), Unavailable when the store cannot be written or the dashboard is
  // shutting down.
  absl::StatusOr<std::string> Submit(const JobSubmitRequest& request);

  // Any thread. True when the job was pending or running and is now being
  // stopped; false when it had already ended. NotFound for unknown ids.
  absl::StatusOr<bool> Stop(const std::string& id);

  // Any thread. Removes a terminal job's record, log and working directory.
  // NotFound; FailedPrecondition when it has not ended; Unavailable when the
  // store cannot be written (nothing is removed then).
  absl::Status Delete(const std::string& id);

  // Any thread.
  absl::StatusOr<JobRecord> Get(const std::string& id) const;
  std::vector<JobRecord> List() const;

  // Any thread: <session>/logs/job-driver-<id>.log of a known job.
  absl::StatusOr<std::string> LogPath(const std::string& id) const;

  // Loop thread: stops every unfinished job (SIGTERM, SIGKILL after
  // shutdown_grace), writes the records, then calls `done` on the loop.
  void Shutdown(std::function<void()> done);

 private:
  struct Entry {
    JobRecord record;
    bool dirty = false;     // newer than the store
    bool busy = false;      // being created or deleted by an HTTP thread
    bool starting = false;  // the loop is preparing its start
  };

  // Loop thread.
  void StartQueued();
  // ResourceExhausted when `demand` can never fit on the head node.
  absl::Status CheckFits(const ResourceSet& demand);
  // Reserves the job's entrypoint resources: the reason it cannot start yet
  // (empty: it can), or an error (Unavailable: ask again later).
  absl::StatusOr<std::string> Reserve(const std::string& id, const JobRecord& job);
  // Gives the job's reservation back now or, failing that, from Poll.
  void Release(const std::string& id);
  void ReleasePending();
  void StartOne(const std::string& id);
  // Puts the job's working-directory package (if any) where every node can
  // fetch it.
  absl::Status PublishPackage(const std::string& package);
  void BeginStop(const std::string& id, const Runner& runner);
  void Poll();
  // Whether job `id` has ended: its runner is gone, and so is every process
  // of its group that lived when it went (what the runner's SIGKILL reached
  // may take a while to exit, holding ports, files or a device the next job
  // wants), or kLeftoverWait has passed since. Once ended: whether a stop
  // was asked before the runner went (nullopt until then).
  std::optional<bool> Ended(const std::string& id, const Runner& runner);
  // Records how the job ended; `stop_requested`: whether a stop was asked
  // before its runner went (a later one stops nothing).
  void Finish(const std::string& id, const Runner& runner, bool stop_requested);
  void Flush();
  void FailLocked(Entry* e, std::string_view error_type, std::string message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string ExitFile(const std::string& id) const;
  std::string LogFile(const std::string& id) const;

  const JobManagerOptions options_;
  JobStore* const store_;
  PackageStore* const packages_;
  EventLoop* const loop_;

  // Serializes writes to the store so they land in the order they were made.
  absl::Mutex store_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  // Loop thread only.
  std::deque<std::string> queue_;     // PENDING jobs, in submission order
  std::set<std::string> reserving_;   // jobs holding or waiting for a reservation
  std::set<std::string> to_release_;  // reservations to give back
  std::map<std::string, std::unique_ptr<EventLoop::Timer>> kill_timers_;
  // Jobs whose runner is gone while processes of their group may still be
  // exiting (see Ended). A killed process goes within milliseconds unless
  // stuck in the kernel, which kLeftoverWait bounds.
  struct Ending {
    absl::Time since;                                 // real time: processes exit in it, whatever options_.clock says
    std::vector<std::pair<pid_t, uint64_t>> members;  // live then: pid, start ticks
    bool stop_requested = false;                      // as it was then
  };
  static constexpr absl::Duration kLeftoverWait = absl::Seconds(5);
  std::map<std::string, Ending> ending_;
  std::unique_ptr<EventLoop::Timer> poll_timer_;
  std::function<void()> shutdown_done_;
  absl::Time next_start_attempt_ = absl::InfinitePast();        // while jobs wait for resources
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for the SIGCHLD handler
};

}  // namespace manta::dashboard
