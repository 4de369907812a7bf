// The raylet's lease and bundle handlers, as its NodeManagerService
// dispatches to them after the token check, driven by a sequence of
// requests (fuzz/handler_sequence.h) on a node of 4 CPUs and 4 TPU chips
// whose worker pool starts a worker for every lease. After the sequence no
// quantity is negative and nothing is available beyond the node's total.
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/handler_sequence.h"
#include "raylet/bundle_manager.h"
#include "raylet/fake_worker_pool.h"
#include "raylet/lease_manager.h"

namespace manta::raylet {
namespace {

ResourceSet NodeTotal() { return *ResourceSet::FromMap({{"CPU", 4}, {"TPU", 4}, {"memory", 1e9}}); }

// fuzz::Replies comes first, so it is destroyed after the managers.
class Target : private fuzz::Replies {
 public:
  Target()
      : local_(NodeTotal(), 4),
        view_(self_),
        leases_({self_, "10.0.0.1", {{"zone", "a"}}}, &local_, &view_, &pool_),
        bundles_({self_, {}}, &local_, &leases_) {}

  void Run(std::string_view input) {
    fuzz::Replies* r = this;
    const std::vector<fuzz::Call> calls = {
        fuzz::Bind(&leases_, &LeaseManager::HandleRequestWorkerLease, r),  // 0
        fuzz::Bind(&leases_, &LeaseManager::HandleReturnWorker, r),
        fuzz::Bind(&leases_, &LeaseManager::HandleCancelWorkerLease, r),
        fuzz::Bind(&leases_, &LeaseManager::HandleKillJobWorkers, r),
        fuzz::Bind(&bundles_, &BundleManager::HandlePrepareBundles, r),  // 4
        fuzz::Bind(&bundles_, &BundleManager::HandleCommitBundles, r),
        fuzz::Bind(&bundles_, &BundleManager::HandleCancelBundles, r),
        fuzz::Bind(&bundles_, &BundleManager::HandleReleaseUnusedBundles, r),
    };
    fuzz::RunRecords(input, calls, [] {});
    const auto total = local_.total().ToMap(), available = local_.available().ToMap();
    for (const auto& [name, q] : total) FUZZ_CHECK(q >= 0);
    for (const auto& [name, q] : available) {
      FUZZ_CHECK(q >= 0);
      auto it = total.find(name);
      FUZZ_CHECK(it != total.end() && q <= it->second);
    }
  }

 private:
  NodeId self_ = NodeId::FromRandom();
  LocalResourceManager local_;
  ClusterView view_;
  FakeWorkerPool pool_;
  LeaseManager leases_;
  BundleManager bundles_;
};

}  // namespace
}  // namespace manta::raylet

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  manta::fuzz::SilenceLogs();
  manta::raylet::Target target;
  target.Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
