// TaskReceiver: the worker side of tasks. Owns the queue of pushed tasks,
// the per-caller ordering of actor calls, the actor instance, and the
// threads that run user code: the process's main thread, plus a pool when
// the actor allows concurrent calls.
//
// A normal task or actor creation pushed again by PushTask (a retry whose
// reply was lost: the same task id and attempt) does not run again: it gets
// the first push's reply, at once or when that push finishes. The replies of
// the last kRememberedReplies such pushes are kept.
//
// It knows its process only through TaskHost (resolving arguments, keeping
// large returns, handing over refs, task events), and its callers only
// through PushedTask: the core worker wires it to gRPC; its unit tests to
// fakes.
//
// Thread-safety: Enqueue from gRPC threads; RunMainLoop on the main thread.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "manta/internal/core_worker.h"
#include "manta/internal/function_registry.h"
#include "proto/core_worker.pb.h"
#include "runtime/core_worker/memory_store.h"
#include "runtime/core_worker/task_event_buffer.h"

namespace grpc {
class Status;
}

namespace manta::core {

// One push of a task: its request, its reply, and how the caller is told
// the push is over (a PushTask call, a push on a PushTasks stream).
class PushedTask {
 public:
  // The request and reply stay valid until Finish.
  virtual const rpc::PushTaskRequest& request() const = 0;
  virtual rpc::PushTaskReply* reply() = 0;
  // Sends reply() (status OK) or the refusal; called once, after which the
  // push may be gone.
  virtual void Finish(const grpc::Status& status) = 0;

 protected:
  ~PushedTask() = default;
};

// What the receiver needs of its process. Any thread that runs tasks.
class TaskHost {
 public:
  virtual ~TaskHost() = default;
  // The value of a reference argument (local, or fetched from its owner).
  virtual absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg) = 0;
  // The refs inside a return value (each holding a reference handed over),
  // to list in `ret` for the caller (ReferenceCounter::HandOverNested).
  virtual void HandOverRefs(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs, rpc::ReturnObject* ret) = 0;
  // Drops a reference (a failed task's result's refs).
  virtual void DropRef(const ObjectId& id) = 0;
  // Takes one more reference (each return of several holds the call's refs).
  virtual void AddRef(const ObjectId& id) = 0;
  // Keeps a large return here until its owner has pulled it; says where.
  virtual void HoldForOwner(const ObjectId& id, Value value, rpc::Address* location) = 0;
  // The task started running: a RUNNING event, named by `ticket`; withdrawn
  // when it ends (TaskEnded, with the same spec), as its pusher reports how
  // it ended.
  virtual void TaskRunning(const rpc::TaskSpec& spec, TaskEventBuffer::Ticket* ticket) = 0;
  virtual void TaskEnded(const rpc::TaskSpec& spec, const TaskEventBuffer::Ticket& ticket) = 0;
};

class TaskReceiver {
 public:
  static constexpr size_t kRememberedReplies = 64;

  explicit TaskReceiver(TaskHost* host) : host_(host) {}
  // Stops and joins the actor's threads (whose calls must have returned).
  ~TaskReceiver();
  TaskReceiver(const TaskReceiver&) = delete;
  TaskReceiver& operator=(const TaskReceiver&) = delete;

  // Why a push must be refused before it is enqueued (OK: take it): it was
  // meant for another worker than `self_worker_id`, its task id is
  // malformed, or it is a normal task while this worker holds an actor.
  grpc::Status Admit(const rpc::PushTaskRequest& req, const std::string& self_worker_id) const;
  // Takes a pushed task, which is finished when it has run (or at once when
  // it is a retry of one that ran).
  void Enqueue(PushedTask* push);
  // Cancels task `task_id` here: dropped (its push answered with a
  // TASK_CANCELLED error) while queued, interrupted while running (its flag
  // set, and InterruptTask called unless `interrupt` is false), or
  // remembered for a moment in case its push is on its way to running.
  // Whether it was queued or running.
  bool Cancel(const std::string& task_id, bool interrupt = true);
  // Whether this worker's actor was created: it then runs only its calls.
  bool holds_actor() const { return holds_actor_.load(std::memory_order_acquire); }
  // Runs tasks on the calling (main) thread until Stop.
  void RunMainLoop();
  // Ends RunMainLoop and the actor's threads once the tasks they run end;
  // what is queued stays unrun.
  void Stop();
  // Replies are already sent: exit the process shortly.
  static void ExitSoon(int code);

 private:
  using Work = PushedTask*;
  struct CallerState {
    int64_t next = 0;
    std::map<int64_t, Work> buffered;
  };

  // Which threads to wake once mu_ is released.
  struct Wake {
    bool main = false;
    int pool = 0;
  };
  void Dispatch(Work w, Wake* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Execute(Work w);
  // Execute's start: false when the task was cancelled before it ran (its
  // push is answered); else its cancel flag is registered in `flag`.
  bool StartRunning(Work w, std::shared_ptr<std::atomic<bool>>* flag);
  void FinishCancelled(Work w, const std::string& why);
  // Execute's steps: the arguments' values (inline, or fetched into `held`);
  // the call of the function, actor factory or method; its reply.
  absl::Status ResolveArgs(const rpc::TaskSpec& spec, std::vector<Value>* held, internal::ArgViews* views);
  absl::StatusOr<internal::ReturnValues> Invoke(const rpc::TaskSpec& spec, const internal::ArgViews& views,
                                                RefCollector* returned_refs);
  absl::StatusOr<internal::ReturnValues> CreateActor(const rpc::TaskSpec& spec, const internal::ArgViews& views);
  // What the running task's code sees of it (CurrentTaskContext).
  TaskContext ContextOf(const rpc::TaskSpec& spec) const;
  // The reply's returns: one per declared return, each holding the refs in
  // `returned_refs`; or the failure (a count that differs is one).
  void SetResult(const rpc::TaskSpec& spec, absl::StatusOr<internal::ReturnValues> result, RefCollector* returned_refs,
                 rpc::PushTaskReply* reply);
  void SetReturn(const rpc::TaskSpec& spec, int index, std::string value, std::vector<ObjectRefInfo> refs,
                 rpc::PushTaskReply* reply);
  // Finishes `w` OK, and the retries of it that wait.
  void Complete(Work w);
  void StartPool(int threads);

  // Pushes of a task attempt (by PushTask or on a stream): the key of `req`,
  // or "" for pushes not deduplicated (actor calls, which have their own
  // sequence numbers).
  static std::string PushKey(Work w);
  // A retry of a push already seen (requires mu_): answered now (added to
  // `answered`) or when the first finishes. False for a new push.
  bool JoinSeenPush(Work w, std::vector<Work>* answered) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for work on `queue` (false: stopping).
  bool WaitFor(absl::CondVar* cv, std::deque<Work>* queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TaskHost* const host_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // stopping_, read without the lock between the tasks of a batch.
  std::atomic<bool> stop_requested_{false};
  absl::CondVar main_cv_;  // main_queue_ has work
  absl::CondVar pool_cv_;  // pool_queue_ has work
  std::deque<Work> main_queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Work> pool_queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CallerState> callers_ ABSL_GUARDED_BY(mu_);
  // By PushKey: pushes running (their waiting retries), and the replies of
  // finished ones (oldest first in finished_order_).
  std::map<std::string, std::vector<Work>> running_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, rpc::PushTaskReply> finished_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_order_ ABSL_GUARDED_BY(mu_);
  // Cancel flags of the running tasks, by task id; ids cancelled while
  // not found here (a push about to run), oldest first, at most
  // kRememberedReplies.
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> running_flags_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> cancelled_early_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pool_;                 // the actor's threads (main thread only)
  int max_concurrency_ ABSL_GUARDED_BY(mu_) = 1;  // set at actor creation

  // Set once by the actor creation task (main thread), then read-only.
  std::shared_ptr<void> actor_;
  std::string actor_class_;
  std::map<std::string, double> actor_resources_;
  std::atomic<bool> holds_actor_{false};  // actor_ is set (read by gRPC threads)
};

}  // namespace manta::core
