#include "cli/drain_node.h"

#include "absl/status/status.h"
#include "common/id.h"
#include "gcs/client/sync_gcs_client.h"
#include "state/gcs_reads.h"

namespace manta::cli {

absl::StatusOr<DrainNodeResult> DrainNode(const std::string& address, const std::string& token, absl::Duration timeout,
                                          const std::string& node_id_hex, const std::string& reason,
                                          int64_t deadline_ms) {
  auto id = FromHex(node_id_hex);
  if (!id.ok()) return absl::InvalidArgumentError("node id " + node_id_hex + " is not hexadecimal");
  rpc::DrainNodeRequest request;
  request.set_node_id(*id);
  request.set_reason(reason);
  request.set_deadline_ms(deadline_ms);
  auto client = gcs::SyncGcsClient::Connect(address, token, timeout);
  auto reply = client->Call<rpc::DrainNodeReply>(
      [request, timeout](gcs::GcsClient& c, auto done) { c.DrainNode(request, timeout, std::move(done)); });
  if (!reply.ok()) {
    // The GCS's own words for a request it refused (bad reason, unknown node).
    if (absl::IsInvalidArgument(reply.status()) || absl::IsNotFound(reply.status())) return reply.status();
    return state::GcsCallError(address, reply.status());
  }
  return DrainNodeResult{reply->accepted(), reply->rejection_reason()};
}

}  // namespace manta::cli
