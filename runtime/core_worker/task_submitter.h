// TaskSubmitter: normal tasks from the caller's side. Queues tasks by
// shape, leases workers for them from the raylets (reused for tasks of the
// same shape, returned when idle, spilled to other nodes as the raylets
// say), pushes them, and retries them when their worker dies.
//
// Invariants:
//  * a task is in exactly one place: resolving its arguments, in its
//    queue, or in one push (PushCall) on one lease, until it ends;
//  * a lease is in its queue until it is dead or returned, and is returned
//    to its raylet exactly once;
//  * a queue's `lease_requests_in_flight` counts the requests whose replies
//    are still to come (a retry keeps its count).
//
// Threads: any. The queues are behind mu_ rather than on the io loop: a
// task is pushed from the thread that submits it, and the reply of a push
// is settled (and the next queued task pushed) on the gRPC thread that gets
// it, so a burst of tasks wakes no other thread of this process. The loop
// runs lease replies, the idle-lease timer and argument resolution. Pushes
// are made under mu_ and started (SubmitHost::StartPushes) after it is
// released: a failing call may complete inline.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "manta/internal/core_worker.h"
#include "runtime/core_worker/submit_deps.h"

namespace manta::core {

struct WorkerLease {
  LeaseId lease_id;
  std::string raylet;  // "ip:port" of the granting raylet
  rpc::Address worker;
  std::vector<int> chips;
  int chips_per_host = 0;
  int worker_pid = 0;
  int in_flight = 0;
  absl::Time idle_since = absl::InfiniteFuture();
  absl::Time last_done = absl::InfinitePast();  // when a task pushed here last ended
  bool dead = false;
};

// The tasks of one shape (resources, labels, placement, environment) and
// the leases that run them. Never erased, so pointers to it stay valid.
struct TaskQueue {
  std::deque<rpc::TaskSpec> tasks;
  std::vector<std::shared_ptr<WorkerLease>> leases;
  int lease_requests_in_flight = 0;
  absl::Time oldest_lease_request = absl::InfinitePast();
  // What lease requests carry: job, program, caller, resources, labels,
  // placement, environment. Set once, by the first task; then read-only.
  std::shared_ptr<const rpc::TaskSpec> shape;
  // From `shape`: CPU-only tasks pipeline on a lease; the demand as task
  // events carry it.
  bool fungible = true;
  std::shared_ptr<const TaskEventBuffer::Resources> resources;
};

class TaskSubmitter {
 public:
  // Tasks pushed to one leased worker before the first completes: keeps the
  // worker busy across the round trip. Only once more workers cannot be
  // had quickly (lease requests outstanding longer than kPipelineAfter):
  // until then each task gets a worker of its own, so tasks holding a
  // device each get a different one. And only onto a worker that ended a
  // task within kPipelineAfter, so no task is pushed behind one that has
  // run that long (which may be waiting for it). One pushed while the task
  // ahead of it was younger still waits if that task turns out long.
  static constexpr int kPipelineDepth = 32;
  static constexpr absl::Duration kPipelineAfter = absl::Milliseconds(10);
  // Lease requests in flight per shape.
  static constexpr int kMaxLeaseRequests = 4;
  // A lease with nothing to run is returned after this long.
  static constexpr absl::Duration kLeaseIdle = absl::Milliseconds(500);
  // How long lease requests to the local raylet are retried while they
  // fail: a stalled raylet answers again; a dead one is declared dead well
  // before.
  static constexpr absl::Duration kLocalRayletPatience = absl::Seconds(30);
  static constexpr int kMaxSpillbacks = 8;

  // Who submits: what every lease request carries.
  struct Caller {
    rpc::Address address;  // this process
    std::string job_id;    // binary
    std::string worker_executable;
    std::vector<std::string> worker_args;
    std::string local_raylet;  // "ip:port"
    bool is_driver = false;    // a driver, which no raylet manages
  };

  TaskSubmitter(SubmitDeps deps, DependencyResolver* resolver) : deps_(deps), resolver_(resolver) {}
  TaskSubmitter(const TaskSubmitter&) = delete;
  TaskSubmitter& operator=(const TaskSubmitter&) = delete;

  // Set before the first submission.
  void set_caller(Caller caller) { caller_ = std::move(caller); }

  // Submits `spec` (a NORMAL_TASK with its id, function and arguments):
  // its return is expected, its arguments (and `contained`, the refs inside
  // them) held until it ends, and it runs on a worker leased for `options`.
  void Submit(rpc::TaskSpec spec, const TaskOptions& options, const std::vector<ObjectId>& contained)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A push made here ended (its returns stored): settles it; the caller
  // starts `to_start` once it holds no lock.
  void OnPushDone(PushCall& call, std::vector<PushCall*>* to_start) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels task `task_id` (binary), as CoreWorker::CancelTask: queued, it
  // fails now; pushed, its worker is asked to cancel it (and, `recursive`,
  // the tasks it submitted) or, `force`, its lease is returned with the
  // worker killed (with `recursive`, once the worker has cancelled those
  // tasks with force); resolving its arguments, it fails once they are. A
  // cancelled task is never retried. NotFound when no task of that id is
  // pending here. `done` (optional) runs once, on any thread and never
  // under mu_, when the cancel was carried out: at once but for a forced
  // one, whose lease's return the raylet then answered.
  absl::Status Cancel(const std::string& task_id, bool force, bool recursive = false,
                      std::function<void()> done = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether task `task_id` (binary) was submitted here and has not ended.
  bool IsPending(const std::string& task_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Stopping: lease replies and retries are ignored from now on, but a
  // worker granted after this is returned to its raylet.
  void Stop() { stopping_.store(true); }
  // io loop, once stopping: returns every lease and drops the timers.
  void ReturnAllLeases() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the leases in placement group `group` (binary id) that run
  // nothing and have nothing queued, so that their workers go back to their
  // raylets' pools rather than being stopped with the group when it is
  // removed; `done` runs once every raylet has taken its leases back (at
  // once when there are none). Any thread.
  void ReturnIdleLeasesOf(const std::string& group, std::function<void()> done) ABSL_LOCKS_EXCLUDED(mu_);
  void DropTimers();

  // For tests and diagnostics.
  struct Counts {
    int queued = 0;
    int leases = 0;
    int lease_requests = 0;
  };
  Counts counts() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `call` ended in an application error its worker found retryable
  // (retry_exceptions) while the task has retries left: it is then
  // submitted again rather than settled.
  static bool RetriesApplicationError(const PushCall& call);

  // The key tasks of the same shape share (computed from their options).
  static std::string SchedulingKey(const TaskOptions& options);

 private:
  void InitQueue(TaskQueue& q, const TaskOptions& options) const;
  void AddCallerAndProgram(rpc::TaskSpec* spec) const;
  // Asks for leases the queue needs and makes the pushes it can.
  void Pump(TaskQueue& q, std::vector<PushCall*>* to_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Any thread; the reply is handled on the loop. An empty `lease_id` is a
  // new lease; a given one asks again for that lease (idempotent on the
  // raylet).
  void RequestLease(TaskQueue* q, const std::string& raylet, bool grant_or_reject, int spillbacks,
                    std::string lease_id = "");
  // Asks the local raylet again after `delay` (io loop); the request still
  // counts as in flight.
  void RetryLocalLease(TaskQueue* q, absl::Duration delay, std::string lease_id = "");
  void OnLeaseReply(TaskQueue* q, const std::string& raylet, int spillbacks, const std::string& lease_id,
                    const absl::Status& s, const rpc::RequestWorkerLeaseReply& reply, std::vector<PushCall*>* to_start)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PushCall* PushTask(TaskQueue& q, const std::shared_ptr<WorkerLease>& lease, rpc::TaskSpec spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnTaskFailed(TaskQueue& q, rpc::TaskSpec spec, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailQueue(TaskQueue& q, ErrorType type, const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `done` as SubmitHost::ReturnWorker's.
  void ReturnLease(const WorkerLease& lease, bool disconnect, std::function<void()> done = nullptr);
  // Cancels the task of `it` (a pending_ entry), queued or resolving its
  // arguments.
  void CancelUnpushed(std::map<std::string, PushCall*>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Force: the lease of cancelled task `task_id` goes back with its worker
  // killed, if the task still runs there; `done` runs when that is answered
  // (at once when there is nothing to kill).
  void KillCancelled(const std::string& task_id, std::function<void()> done) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns lease `lease_id` at `raylet` in case it was granted with a reply
  // that never arrived.
  void ReleaseLease(const std::string& raylet, const std::string& lease_id);
  void ReturnIdleLeases() ABSL_LOCKS_EXCLUDED(mu_);  // io loop (timer)
  // Returns the leases idle long enough; true while any lease is left.
  bool ReturnIdleLeasesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SubmitDeps deps_;
  DependencyResolver* const resolver_;
  Caller caller_;
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  // Tasks submitted and not yet ended, by task id: where each is (null
  // while resolving or queued; its push once pushed).
  std::map<std::string, PushCall*> pending_ ABSL_GUARDED_BY(mu_);
  // Cancelled tasks still pending (failed as cancelled when they end).
  std::set<std::string> cancelled_ ABSL_GUARDED_BY(mu_);
  // Tasks resolving their arguments: what failing one needs (ids, name,
  // returns), to fail it at once when cancelled.
  std::map<std::string, rpc::TaskSpec> resolving_ ABSL_GUARDED_BY(mu_);
  // The queues, by SchedulingKey.
  std::map<std::string, TaskQueue> queues_ ABSL_GUARDED_BY(mu_);
  bool idle_lease_timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  // Since when lease requests to the local raylet fail (InfiniteFuture: they
  // do not).
  absl::Time local_raylet_failing_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();

  // io loop only.
  std::unique_ptr<EventLoop::Timer> idle_lease_timer_;
  // Lease requests to send again after a rejection; dropped by DropTimers.
  std::list<std::unique_ptr<EventLoop::Timer>> lease_retry_timers_;
};

}  // namespace manta::core
