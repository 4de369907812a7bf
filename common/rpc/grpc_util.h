// gRPC plumbing shared by every server and client. Include only from .cc
// files that talk gRPC; gRPC headers are slow to compile.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/common.pb.h"

namespace manta::rpc {

// The largest message a Manta server or client accepts by default.
constexpr int kMaxMessageBytes = 64 << 20;

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status ToAbslStatus(const grpc::Status& s);

// A channel to `target` ("host:port" or "unix:/path") with Manta's limits and
// a short reconnect backoff, so a restarted peer is reached again quickly.
// With MANTA_testing_rpc_failure set, its calls are subject to fault
// injection (rpc_chaos.h).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target);

// Sets the deadline (none for absl::InfiniteDuration()) and the token header
// on a client call.
void PrepareContext(grpc::ClientContext* ctx, const std::string& token, absl::Duration timeout);

// Checks the "authorization" header against `token` (empty: auth is off).
// UNAUTHENTICATED when it is missing or wrong. (A ConnectionGate has
// checked the first request of each connection before gRPC read it; every
// handler still checks each request.)
grpc::Status CheckAuth(const grpc::ServerContextBase& ctx, const std::string& token);

// Options for a server: message limits and keepalive settings.
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// "ip:port" of a node's raylet.
inline std::string RayletAddress(const NodeInfo& node) {
  return node.node_ip() + ":" + std::to_string(node.node_manager_port());
}

}  // namespace manta::rpc
