// Fakes for the submitters' unit tests: the host (raylets, transport, task
// events) as records the test answers, and an io loop on its own thread.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/loop_thread.h"
#include "runtime/core_worker/submit_deps.h"

namespace manta::core::testing {

inline constexpr absl::Duration kWait = absl::Seconds(10);

// The address of worker `worker` (its id's bytes) on 10.0.0.1:`port`.
inline rpc::Address WorkerAddress(const std::string& worker, int port) {
  rpc::Address a;
  a.set_ip("10.0.0.1");
  a.set_port(port);
  a.set_worker_id(worker);
  return a;
}

class FakeSubmitHost : public SubmitHost {
 public:
  struct LeaseRequest {
    std::string raylet;
    rpc::RequestWorkerLeaseRequest req;
    std::function<void(const absl::Status&, rpc::RequestWorkerLeaseReply&&)> done;
  };
  ~FakeSubmitHost() override {
    for (PushCall* c : pushes) delete c;
  }

  void StartPushes(const std::vector<PushCall*>& calls) override {
    absl::MutexLock lock(&mu);
    for (PushCall* c : calls) pushes.push_back(c);
  }
  void RecordTaskEvent(const rpc::TaskSpec&, rpc::TaskEvent::State state, const rpc::ErrorInfo*, const rpc::Address*,
                       int, std::shared_ptr<const TaskEventBuffer::Resources>) override {
    absl::MutexLock lock(&mu);
    events.push_back(state);
  }
  void RequestWorkerLease(const std::string& raylet, rpc::RequestWorkerLeaseRequest req,
                          std::function<void(const absl::Status&, rpc::RequestWorkerLeaseReply&&)> done) override {
    absl::MutexLock lock(&mu);
    leases.push_back({raylet, std::move(req), std::move(done)});
  }
  // Recorded; the test answers (runs `done`).
  struct Cancel {
    std::string worker;
    std::string task_id;
    bool recursive = false;
    bool force = false;
    std::function<void()> done;
  };
  void CancelOnWorker(const std::string& worker, const std::string& task_id, bool recursive, bool force,
                      std::function<void()> done) override {
    absl::MutexLock lock(&mu);
    cancels.push_back({worker, task_id, recursive, force, std::move(done)});
  }
  // Taken back at once.
  void ReturnWorker(const std::string&, rpc::ReturnWorkerRequest req, std::function<void()> done) override {
    {
      absl::MutexLock lock(&mu);
      returned.push_back(std::move(req));
    }
    if (done) done();
  }

  // Waits until `pred` holds (evaluated under mu).
  bool Await(const std::function<bool()>& pred) {
    absl::MutexLock lock(&mu);
    auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pred(); };
    return mu.AwaitWithTimeout(absl::Condition(&cond), kWait);
  }
  size_t NumPushes() {
    absl::MutexLock lock(&mu);
    return pushes.size();
  }
  PushCall* Push(size_t i) {
    absl::MutexLock lock(&mu);
    return pushes.at(i);
  }

  absl::Mutex mu;
  std::vector<PushCall*> pushes ABSL_GUARDED_BY(mu);  // deleted with the host
  std::vector<LeaseRequest> leases ABSL_GUARDED_BY(mu);
  std::vector<rpc::ReturnWorkerRequest> returned ABSL_GUARDED_BY(mu);
  std::vector<rpc::TaskEvent::State> events ABSL_GUARDED_BY(mu);
  std::vector<Cancel> cancels ABSL_GUARDED_BY(mu);
};

// A reference counter's peers for a process that borrows nothing.
class NoPeers : public BorrowPeers {
 public:
  bool AddBorrower(const std::string&, const ObjectId&, const rpc::Address&) override { return false; }
  void RemoveBorrower(const std::string&, const ObjectId&, const std::string&, int) override {}
  void CheckWorker(const rpc::Address&, const std::string&, std::function<void(const absl::Status&, bool)>) override {}
  void RunAfter(absl::Duration, std::function<void()>) override {}
};

using ::manta::LoopThread;

}  // namespace manta::core::testing
