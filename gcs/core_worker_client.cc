#include "gcs/core_worker_client.h"

#include "absl/container/flat_hash_map.h"
#include "common/rpc/client_call.h"
#include "proto/core_worker.grpc.pb.h"

namespace manta::gcs {
namespace {

constexpr absl::Duration kWorkerCallTimeout = absl::Seconds(5);
// Stubs kept for workers that were never forgotten (their actors died while
// the GCS was down): past this many, the cache starts over.
constexpr size_t kMaxCachedStubs = 10000;

// A call whose connection broke is made again: a worker runs a pushed
// creation task once and answers a resend with its first reply; killing and
// exiting are idempotent. A creation given up on costs the actor a restart,
// so it is tried longer.
rpc::RetryPolicy RetryWorkerCall() { return rpc::RetryPolicy{}; }

class GrpcCoreWorkerClientPool : public CoreWorkerClientPool {
 public:
  GrpcCoreWorkerClientPool(EventLoop* loop, std::string token) : loop_(loop), token_(std::move(token)) {}

  void PushTask(const rpc::Address& worker, const rpc::PushTaskRequest& request, absl::Duration timeout,
                Callback<rpc::PushTaskReply> cb) override {
    rpc::RetryingUnaryCall<rpc::PushTaskReply>(
        loop_, token_, timeout, rpc::RetryPolicy::Patient(), request,
        [stub = Stub(worker)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->PushTask(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void KillActor(const rpc::Address& worker, const rpc::KillActorOnWorkerRequest& request,
                 Callback<rpc::KillActorOnWorkerReply> cb) override {
    rpc::RetryingUnaryCall<rpc::KillActorOnWorkerReply>(
        loop_, token_, kWorkerCallTimeout, RetryWorkerCall(), request,
        [stub = Stub(worker)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->KillActor(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void Exit(const rpc::Address& worker, const rpc::ExitRequest& request, Callback<rpc::ExitReply> cb) override {
    rpc::RetryingUnaryCall<rpc::ExitReply>(
        loop_, token_, kWorkerCallTimeout, RetryWorkerCall(), request,
        [stub = Stub(worker)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->Exit(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void CheckWorker(const rpc::Address& worker, Callback<rpc::CheckWorkerReply> cb) override {
    rpc::CheckWorkerRequest request;
    request.set_worker_id(worker.worker_id());
    rpc::RetryingUnaryCall<rpc::CheckWorkerReply>(
        loop_, token_, kWorkerCallTimeout, RetryWorkerCall(), std::move(request),
        [stub = Stub(worker)](auto* ctx, auto* req, auto* reply, auto done) {
          stub->async()->CheckWorker(ctx, req, reply, std::move(done));
        },
        std::move(cb));
  }

  void Forget(const std::string& worker_id) override {
    MANTA_CHECK_THREAD(loop_->thread_checker());
    stubs_.erase(worker_id);
  }

 private:
  std::shared_ptr<rpc::CoreWorkerService::Stub> Stub(const rpc::Address& worker) {
    MANTA_CHECK_THREAD(loop_->thread_checker());
    std::string target = worker.ip() + ":" + std::to_string(worker.port());
    if (stubs_.size() >= kMaxCachedStubs) stubs_.clear();
    auto& entry = stubs_[worker.worker_id()];
    if (!entry.stub || entry.target != target) {
      entry.target = target;
      entry.stub = rpc::CoreWorkerService::NewStub(rpc::MakeChannel(target));
    }
    return entry.stub;
  }

  struct Entry {
    std::string target;
    std::shared_ptr<rpc::CoreWorkerService::Stub> stub;
  };

  EventLoop* const loop_;
  const std::string token_;
  absl::flat_hash_map<std::string, Entry> stubs_;
};

}  // namespace

std::unique_ptr<CoreWorkerClientPool> MakeGrpcCoreWorkerClientPool(EventLoop* loop, std::string token) {
  return std::make_unique<GrpcCoreWorkerClientPool>(loop, std::move(token));
}

}  // namespace manta::gcs
