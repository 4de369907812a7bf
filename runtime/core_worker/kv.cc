// The GCS's key-value store (GcsClusterState): blocking calls on the
// caller's thread, never the GCS client's loop, made again while the GCS is
// unreachable for up to `reconnect`. A put carries one request id on every
// attempt, so a retry after a lost reply is answered as the first was.
#include "common/rpc/reply_cache.h"
#include "runtime/core_worker/gcs_cluster_state.h"

namespace manta::core {

absl::StatusOr<bool> GcsClusterState::KvPut(const std::string& ns, const std::string& key, const std::string& value,
                                            bool overwrite) {
  rpc::KvPutRequest req;
  req.set_ns(ns);
  req.set_key(key);
  req.set_value(value);
  req.set_overwrite(overwrite);
  req.set_request_id(rpc::NewRequestId());
  auto reply = gcs_->Call<rpc::KvPutReply>([req](gcs::GcsClient& gcs, auto done) { gcs.KvPut(req, std::move(done)); },
                                           {absl::ZeroDuration(), reconnect_});
  if (!reply.ok()) return reply.status();
  return reply->added();
}

absl::StatusOr<std::optional<std::string>> GcsClusterState::KvGet(const std::string& ns, const std::string& key) {
  rpc::KvGetRequest req;
  req.set_ns(ns);
  req.set_key(key);
  auto reply = gcs_->Call<rpc::KvGetReply>([req](gcs::GcsClient& gcs, auto done) { gcs.KvGet(req, std::move(done)); },
                                           {absl::ZeroDuration(), reconnect_});
  if (!reply.ok()) return reply.status();
  if (!reply->found()) return std::optional<std::string>();
  return std::optional<std::string>(reply->value());
}

}  // namespace manta::core
