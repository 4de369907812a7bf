#include "gcs/raylet_client.h"

#include "absl/container/flat_hash_map.h"
#include "common/rpc/client_call.h"
#include "proto/node_manager.grpc.pb.h"

namespace manta::gcs {
namespace {

// Leases for actors use grant_or_reject, so the raylet answers at once.
constexpr absl::Duration kLeaseTimeout = absl::Seconds(30);
constexpr absl::Duration kRayletCallTimeout = absl::Seconds(10);

// Every raylet method the GCS calls is idempotent (a lease by its id, a
// bundle by group and index), so a call whose connection broke is made again;
// calls that give something back for longer (a miss leaks it).
rpc::RetryPolicy Retry() { return rpc::RetryPolicy{}; }
rpc::RetryPolicy RetryLonger() { return rpc::RetryPolicy::Patient(); }

class GrpcRayletClientPool : public RayletClientPool {
 public:
  GrpcRayletClientPool(EventLoop* loop, std::string token, std::function<void(const NodeId&)> unreachable,
                       std::function<void(const NodeId&)> answered)
      : loop_(loop), token_(std::move(token)), unreachable_(std::move(unreachable)), answered_(std::move(answered)) {}

#define MANTA_RAYLET_CALL(Method, timeout, policy)                                                 \
  void Method(const NodeId& node, const std::string& address, const rpc::Method##Request& request, \
              Callback<rpc::Method##Reply> cb) override {                                          \
    rpc::RetryingUnaryCall<rpc::Method##Reply>(                                                    \
        loop_, token_, timeout, Watched(policy, node), request,                                    \
        [stub = Stub(node, address)](auto* ctx, auto* req, auto* reply, auto done) {               \
          stub->async()->Method(ctx, req, reply, std::move(done));                                 \
        },                                                                                         \
        Answered<rpc::Method##Reply>(node, std::move(cb)));                                        \
  }
  MANTA_RAYLET_CALL(RequestWorkerLease, kLeaseTimeout, Retry())
  MANTA_RAYLET_CALL(ReturnWorker, kRayletCallTimeout, RetryLonger())
  MANTA_RAYLET_CALL(KillJobWorkers, kRayletCallTimeout, RetryLonger())
  MANTA_RAYLET_CALL(PrepareBundles, kRayletCallTimeout, Retry())
  MANTA_RAYLET_CALL(CommitBundles, kRayletCallTimeout, Retry())
  MANTA_RAYLET_CALL(CancelBundles, kRayletCallTimeout, RetryLonger())
  MANTA_RAYLET_CALL(ReleaseUnusedBundles, kRayletCallTimeout, Retry())
  MANTA_RAYLET_CALL(DrainRaylet, kRayletCallTimeout, Retry())
#undef MANTA_RAYLET_CALL

  void Forget(const NodeId& node) override {
    MANTA_CHECK_THREAD(loop_->thread_checker());
    stubs_.erase(node);
  }

 private:
  // `cb`, after telling answered_ of a successful reply.
  template <typename Reply>
  Callback<Reply> Answered(const NodeId& node, Callback<Reply> cb) const {
    if (!answered_) return cb;
    return [fn = answered_, node, cb = std::move(cb)](const absl::Status& s, Reply&& reply) {
      if (s.ok()) fn(node);
      cb(s, std::move(reply));
    };
  }

  // `policy`, telling unreachable_ of each retried failure to reach `node`.
  rpc::RetryPolicy Watched(rpc::RetryPolicy policy, const NodeId& node) const {
    if (unreachable_) policy.on_retry = [fn = unreachable_, node](const absl::Status&) { fn(node); };
    return policy;
  }

  // A call in flight keeps the stub alive through this reference.
  std::shared_ptr<rpc::NodeManagerService::Stub> Stub(const NodeId& node, const std::string& address) {
    MANTA_CHECK_THREAD(loop_->thread_checker());
    auto& entry = stubs_[node];
    if (!entry.stub || entry.address != address) {
      entry.address = address;
      entry.stub = rpc::NodeManagerService::NewStub(rpc::MakeChannel(address));
    }
    return entry.stub;
  }

  struct Entry {
    std::string address;
    std::shared_ptr<rpc::NodeManagerService::Stub> stub;
  };

  EventLoop* const loop_;
  const std::string token_;
  const std::function<void(const NodeId&)> unreachable_;
  const std::function<void(const NodeId&)> answered_;
  absl::flat_hash_map<NodeId, Entry> stubs_;
};

}  // namespace

std::unique_ptr<RayletClientPool> MakeGrpcRayletClientPool(EventLoop* loop, std::string token,
                                                           std::function<void(const NodeId&)> unreachable,
                                                           std::function<void(const NodeId&)> answered) {
  return std::make_unique<GrpcRayletClientPool>(loop, std::move(token), std::move(unreachable), std::move(answered));
}

}  // namespace manta::gcs
