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
#include "proto/core_worker.grpc.pb.h"
#include "runtime/core_worker/memory_store.h"
#include "runtime/core_worker/push_stream.h"

namespace manta::core {

class CoreWorkerImpl;

class TaskReceiver {
 public:
  static constexpr size_t kRememberedReplies = 64;

  explicit TaskReceiver(CoreWorkerImpl* cw) : cw_(cw) {}

  // Takes a pushed task, from a PushTask call (`reactor`) or a PushTasks
  // stream (`streamed`), which is finished when it has run.
  void Enqueue(const rpc::PushTaskRequest* req, rpc::PushTaskReply* reply, grpc::ServerUnaryReactor* reactor,
               PushTasksReactor::Push* streamed = nullptr);
  // Whether this worker's actor was created: it then runs only its calls.
  bool holds_actor() const { return holds_actor_.load(std::memory_order_acquire); }
  [[noreturn]] void RunMainLoop();
  // Replies are already sent: exit the process shortly.
  void ExitSoon(int code);

 private:
  struct Work {
    const rpc::PushTaskRequest* req;
    rpc::PushTaskReply* reply;
    grpc::ServerUnaryReactor* reactor;  // or
    PushTasksReactor::Push* streamed;
    // Tells the caller the push is over (`reply` goes with status OK).
    void Finish(const grpc::Status& status) const {
      if (streamed != nullptr) {
        streamed->Finish(status);
      } else {
        reactor->Finish(status);
      }
    }
  };
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
  void Execute(const Work& w);
  // Execute's steps: the arguments' values (inline, or fetched into `held`);
  // the call of the function, actor factory or method; its reply.
  absl::Status ResolveArgs(const rpc::TaskSpec& spec, std::vector<Value>* held, internal::ArgViews* views);
  absl::StatusOr<std::string> Invoke(const rpc::TaskSpec& spec, const internal::ArgViews& views,
                                     RefCollector* returned_refs);
  absl::StatusOr<std::string> CreateActor(const rpc::TaskSpec& spec, const internal::ArgViews& views);
  void SetResult(const rpc::TaskSpec& spec, absl::StatusOr<std::string> result, RefCollector* returned_refs,
                 rpc::PushTaskReply* reply);
  // Finishes `w` OK, and the retries of it that wait.
  void Complete(const Work& w);
  void StartPool(int threads);

  // Pushes of a task attempt (by PushTask or on a stream): the key of `req`,
  // or "" for pushes not deduplicated (actor calls, which have their own
  // sequence numbers).
  static std::string PushKey(const Work& w);
  // A retry of a push already seen (requires mu_): answered now (added to
  // `answered`) or when the first finishes. False for a new push.
  bool JoinSeenPush(const Work& w, std::vector<Work>* answered) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CoreWorkerImpl* const cw_;
  absl::Mutex mu_;
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
  std::vector<std::thread> pool_;  // the actor's threads (main thread only)
  int max_concurrency_ ABSL_GUARDED_BY(mu_) = 1;  // set at actor creation

  // Set once by the actor creation task (main thread), then read-only.
  std::shared_ptr<void> actor_;
  std::string actor_class_;
  std::atomic<bool> holds_actor_{false};  // actor_ is set (read by gRPC threads)
};

}  // namespace manta::core
