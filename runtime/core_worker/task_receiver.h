// TaskReceiver: the worker side of tasks. Owns the queue of pushed tasks,
// the per-caller ordering of actor calls, the actor instance, and the
// threads that run user code: the process's main thread, plus a pool when
// the actor allows concurrent calls.
//
// Thread-safety: Enqueue from gRPC threads; RunMainLoop on the main thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proto/core_worker.grpc.pb.h"
#include "runtime/core_worker/push_stream.h"

namespace manta::core {

class CoreWorkerImpl;

class TaskReceiver {
 public:
  explicit TaskReceiver(CoreWorkerImpl* cw) : cw_(cw) {}

  // Takes a pushed task, from a PushTask call (`reactor`) or a PushTasks
  // stream (`streamed`), which is finished when it has run.
  void Enqueue(const rpc::PushTaskRequest* req, rpc::PushTaskReply* reply, grpc::ServerUnaryReactor* reactor,
               PushTasksReactor::Push* streamed = nullptr);
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
  void Dispatch(Work w, Wake* wake);  // requires mu_
  void Execute(const Work& w);
  void StartPool(int threads);

  CoreWorkerImpl* const cw_;
  std::mutex mu_;
  std::condition_variable main_cv_;  // main_queue_ has work
  std::condition_variable pool_cv_;  // pool_queue_ has work
  std::deque<Work> main_queue_;     // guarded by mu_
  std::deque<Work> pool_queue_;     // guarded by mu_
  std::map<std::string, CallerState> callers_;  // guarded by mu_
  std::vector<std::thread> pool_;
  int max_concurrency_ = 1;         // guarded by mu_; set at actor creation

  // Set once by the actor creation task (main thread), then read-only.
  std::shared_ptr<void> actor_;
  std::string actor_class_;
};

}  // namespace manta::core
