// What the task and actor submitters share: the host they push, lease and
// report through (the core worker over gRPC; fakes in tests), the failing
// of a task, and the resolution of arguments this process owns.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "proto/node_manager.pb.h"
#include "runtime/core_worker/memory_store.h"
#include "runtime/core_worker/push_call.h"
#include "runtime/core_worker/reference_counter.h"
#include "runtime/core_worker/task_event_buffer.h"

namespace manta::core {

class SubmitHost {
 public:
  virtual ~SubmitHost() = default;
  // Starts pushes made under a submitter's lock, once it is released; each
  // is settled with its submitter when it ends.
  virtual void StartPushes(const std::vector<PushCall*>& calls) = 0;
  // A state change of a task, for `manta list tasks` (see
  // CoreWorkerImpl::RecordTaskEvent).
  virtual void RecordTaskEvent(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
                               const rpc::Address* worker = nullptr, int pid = 0,
                               std::shared_ptr<const TaskEventBuffer::Resources> resources = nullptr) = 0;
  // Asks the raylet at `raylet` ("ip:port") for a worker lease. `done` runs
  // on the io loop, never inline. Made again while the connection breaks
  // (idempotent by lease id).
  virtual void RequestWorkerLease(const std::string& raylet, rpc::RequestWorkerLeaseRequest req,
                                  std::function<void(const absl::Status&, rpc::RequestWorkerLeaseReply&&)> done) = 0;
  // Returns a lease, or a lease id that may have been granted (retried
  // patiently). `done` (optional) runs on the io loop once the raylet
  // answered or the retries gave up.
  virtual void ReturnWorker(const std::string& raylet, rpc::ReturnWorkerRequest req,
                            std::function<void()> done = nullptr) = 0;
  // Asks the worker at `worker` ("ip:port") to cancel task `task_id`
  // (binary), which it holds, with the tasks it submitted when `recursive`
  // (`force`: the caller kills the worker next; see rpc::CancelTaskRequest).
  // Best effort: `done` (optional) runs on the io loop, never inline, once
  // the worker answered or the retries gave up.
  virtual void CancelOnWorker(const std::string& worker, const std::string& task_id, bool recursive, bool force,
                              std::function<void()> done = nullptr) = 0;
};

struct SubmitDeps {
  MemoryStore* store;
  ReferenceCounter* refs;
  EventLoop* loop;
  SubmitHost* host;
  // What decisions read time from (lease idleness, pipelining); timers and
  // blocking waits keep real time.
  Clock clock = absl::Now;

  // The task ends with an error: its FAILED event, its return failed, its
  // held arguments released.
  void FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message) const;
};

// Arguments this process owns are waited for before a task or actor call
// is pushed; small ones are inlined, so the worker needs no round trip back
// to the owner.
class DependencyResolver {
 public:
  DependencyResolver(MemoryStore* store, EventLoop* loop) : store_(store), loop_(loop) {}
  // This process's worker id; set before the resolver is used.
  void set_self(const std::string& worker_id) { self_ = worker_id; }

  bool IsOwnedRefArg(const rpc::TaskArg& arg) const;
  bool HasOwnedRefArgs(const rpc::TaskSpec& spec) const;
  // Calls `then` (on the loop, or at once when nothing is owned) with `spec`
  // once its owned arguments are ready (OK), or with the first one's error.
  using Then = std::function<void(rpc::TaskSpec spec, const absl::Status& failed)>;
  void Resolve(rpc::TaskSpec spec, Then then);

 private:
  MemoryStore* const store_;
  EventLoop* const loop_;
  std::string self_;
};

}  // namespace manta::core
