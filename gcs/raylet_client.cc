#include "gcs/raylet_client.h"

#include "absl/container/flat_hash_map.h"
#include "common/rpc/client_call.h"
#include "proto/node_manager.grpc.pb.h"

namespace manta::gcs {
namespace {

// Leases for actors use grant_or_reject, so the raylet answers at once.
constexpr absl::Duration kLeaseTimeout = absl::Seconds(30);
constexpr absl::Duration kCallTimeout = absl::Seconds(10);

class GrpcRayletClientPool : public RayletClientPool {
 public:
  GrpcRayletClientPool(EventLoop* loop, std::string token) : loop_(loop), token_(std::move(token)) {}

  void RequestWorkerLease(const NodeId& node, const std::string& address,
                          const rpc::RequestWorkerLeaseRequest& request,
                          Callback<rpc::RequestWorkerLeaseReply> cb) override {
    rpc::UnaryCall<rpc::RequestWorkerLeaseReply>(
        loop_, token_, kLeaseTimeout, request,
        [stub = Stub(node, address)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->RequestWorkerLease(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void ReturnWorker(const NodeId& node, const std::string& address, const rpc::ReturnWorkerRequest& request,
                    Callback<rpc::ReturnWorkerReply> cb) override {
    rpc::UnaryCall<rpc::ReturnWorkerReply>(
        loop_, token_, kCallTimeout, request,
        [stub = Stub(node, address)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->ReturnWorker(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void KillJobWorkers(const NodeId& node, const std::string& address, const rpc::KillJobWorkersRequest& request,
                      Callback<rpc::KillJobWorkersReply> cb) override {
    rpc::UnaryCall<rpc::KillJobWorkersReply>(
        loop_, token_, kCallTimeout, request,
        [stub = Stub(node, address)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->KillJobWorkers(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

#define MANTA_RAYLET_CALL(Method)                                                                           \
  void Method(const NodeId& node, const std::string& address, const rpc::Method##Request& request,           \
              Callback<rpc::Method##Reply> cb) override {                                                    \
    rpc::UnaryCall<rpc::Method##Reply>(                                                                      \
        loop_, token_, kCallTimeout, request,                                                                \
        [stub = Stub(node, address)](auto* ctx, auto* req, auto* reply, auto done) {                         \
          stub->async()->Method(ctx, req, reply, std::move(done));                                           \
        },                                                                                                   \
        std::move(cb));                                                                                      \
  }
  MANTA_RAYLET_CALL(PrepareBundles)
  MANTA_RAYLET_CALL(CommitBundles)
  MANTA_RAYLET_CALL(CancelBundles)
  MANTA_RAYLET_CALL(ReleaseUnusedBundles)
  MANTA_RAYLET_CALL(DrainRaylet)
#undef MANTA_RAYLET_CALL

  void Forget(const NodeId& node) override { stubs_.erase(node); }

 private:
  // A call in flight keeps the stub alive through this reference.
  std::shared_ptr<rpc::NodeManagerService::Stub> Stub(const NodeId& node, const std::string& address) {
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
  absl::flat_hash_map<NodeId, Entry> stubs_;
};

}  // namespace

std::unique_ptr<RayletClientPool> MakeGrpcRayletClientPool(EventLoop* loop, std::string token) {
  return std::make_unique<GrpcRayletClientPool>(loop, std::move(token));
}

}  // namespace manta::gcs
