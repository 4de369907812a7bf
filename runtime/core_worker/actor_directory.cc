// The actors' side of the GCS for the core worker: the ActorSubmitter's
// directory over gRPC, and the CoreWorker calls that only ask the GCS
// (named actors, kills).
#include "common/rpc/client_call.h"
#include "common/rpc/reply_cache.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
}  // namespace

class CoreWorkerImpl::ActorDirectoryImpl final : public ActorDirectory {
 public:
  explicit ActorDirectoryImpl(CoreWorkerImpl* cw) : cw_(cw) {}

  void RegisterActor(rpc::RegisterActorRequest req,
                     std::function<void(const absl::Status&, rpc::RegisterActorReply&&)> done) override {
    // Idempotent by actor id: made again if the connection breaks (giving
    // up fails the actor).
    rpc::RetryingUnaryCall<rpc::RegisterActorReply>(
        &cw_->loop_, cw_->options_.token, kRpcTimeout, rpc::RetryPolicy::Patient(), std::move(req),
        [stub = cw_->gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->RegisterActor(ctx, r, reply, std::move(cb));
        },
        std::move(done));
  }

  void GetActorInfo(const ActorId& id,
                    std::function<void(const absl::Status&, rpc::GetActorInfoReply&&)> done) override {
    rpc::GetActorInfoRequest req;
    req.set_actor_id(id.Binary());
    rpc::UnaryCall<rpc::GetActorInfoReply>(
        &cw_->loop_, cw_->options_.token, kRpcTimeout, std::move(req),
        [stub = cw_->gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->GetActorInfo(ctx, r, reply, std::move(cb));
        },
        std::move(done));
  }

  void Poll(rpc::PollRequest req, std::function<void(const absl::Status&, rpc::PollReply&&)> done) override {
    const absl::Duration timeout = absl::Milliseconds(req.max_wait_ms()) + kRpcTimeout;
    rpc::UnaryCall<rpc::PollReply>(
        &cw_->loop_, cw_->options_.token, timeout, std::move(req),
        [stub = cw_->gcs_pubsub_.get()](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->Poll(ctx, r, reply, std::move(cb));
        },
        std::move(done));
  }

 private:
  CoreWorkerImpl* const cw_;
};

std::unique_ptr<ActorDirectory> CoreWorkerImpl::MakeActorDirectory() {
  return std::make_unique<ActorDirectoryImpl>(this);
}

absl::StatusOr<ActorId> CoreWorkerImpl::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  rpc::GetNamedActorRequest req;
  req.set_name(name);
  req.set_ray_namespace(ray_namespace.empty() ? job_id_.Hex() : ray_namespace);
  auto reply = GcsCall<rpc::GetNamedActorReply>(
      options_.token, [&](auto* ctx, auto* r) { return gcs_actors_->GetNamedActor(ctx, req, r); });
  if (!reply.ok()) return reply.status();
  auto id = ActorId::FromBinary(reply->actor().actor_id());
  if (!id.ok()) return absl::NotFoundError("no actor named '" + name + "'");
  return *id;
}

absl::Status CoreWorkerImpl::KillActor(const ActorId& actor, bool no_restart) {
  rpc::KillActorRequest req;
  req.set_actor_id(actor.Binary());
  req.set_no_restart(no_restart);
  // The same on every retry: a retried kill with restart restarts once.
  req.set_request_id(rpc::NewRequestId());
  return GcsCall<rpc::KillActorReply>(options_.token,
                                       [&](auto* ctx, auto* r) { return gcs_actors_->KillActor(ctx, req, r); })
      .status();
}

}  // namespace manta::core
