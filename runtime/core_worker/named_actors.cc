// The CoreWorker's actor calls that only ask the GCS: named actors, kills.
#include "common/rpc/reply_cache.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
absl::StatusOr<ActorId> CoreWorkerImpl::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  rpc::GetNamedActorRequest req;
  req.set_name(name);
  req.set_ray_namespace(ray_namespace.empty() ? job_id_.Hex() : ray_namespace);
  auto reply = GcsCall<rpc::GetNamedActorReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetNamedActor(req, std::move(done)); });
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
  return GcsCall<rpc::KillActorReply>([req](gcs::GcsClient& gcs, auto done) { gcs.KillActor(req, std::move(done)); })
      .status();
}

}  // namespace manta::core
