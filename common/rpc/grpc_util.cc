#include "common/rpc/grpc_util.h"

#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <chrono>

#include "common/rpc/rpc_chaos_interceptor.h"
#include "common/token.h"

namespace manta::rpc {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status ToAbslStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

namespace {

// gRPC 1.51 without a background poller runs callback-API completions on
// the threads of one process-wide completion queue, counted by the channels
// (and servers) that use it. When the last such channel is destroyed on one
// of those threads (a completion dropping the last reference to its client,
// as at shutdown), gRPC shuts the queue down, joins that thread from itself
// and frees the queue under it: a double free, then a crash. One channel
// that is never destroyed, made to take the queue by one call, keeps the
// count above zero for the life of the process.
struct CallbackQueueAnchor {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer reply;
};

// Where the anchor lives. Volatile: a pointer only written could be
// optimized away, and then leak checkers (LeakSanitizer) would see the
// anchor as lost rather than kept on purpose.
CallbackQueueAnchor* volatile anchor_root = nullptr;

void AnchorCallbackQueue() {
  static const bool anchored = [] {
    auto* a = new CallbackQueueAnchor();
    // Never connected: the call fails at once on its past deadline.
    a->channel = grpc::CreateChannel("unix:/nonexistent/manta-callback-anchor", grpc::InsecureChannelCredentials());
    a->stub = std::make_unique<grpc::GenericStub>(a->channel);
    a->context.set_deadline(std::chrono::system_clock::now());
    grpc::Slice empty("");
    a->request = grpc::ByteBuffer(&empty, 1);  // a default ByteBuffer is no message at all
    a->stub->UnaryCall(&a->context, "/manta.Anchor/None", grpc::StubOptions(), &a->request, &a->reply,
                       [](grpc::Status) {});
    anchor_root = a;
    return true;
  }();
  (void)anchored;
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target) {
  AnchorCallbackQueue();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // The shortest time a connection attempt is given: a peer stalled for a
  // moment (SIGSTOP, a long pause) still completes the HTTP/2 handshake.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 3000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Each client gets its own connection; channels to one target are not
  // shared across unrelated clients in the process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Nothing reads channelz, and it registers every channel and counts every
  // call: a GCS opens a channel to each actor's worker.
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
  // Tests only (MANTA_testing_rpc_failure): calls through the channel may be
  // failed on purpose. Unset, this is the one check fault injection costs.
  if (RpcChaos* chaos = ProcessRpcChaos()) {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(MakeRpcChaosInterceptorFactory(chaos));
    return grpc::experimental::CreateCustomChannelWithInterceptors(target, grpc::InsecureChannelCredentials(), args,
                                                                   std::move(interceptors));
  }
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

void PrepareContext(grpc::ClientContext* ctx, const std::string& token, absl::Duration timeout) {
  // InfiniteDuration: no deadline (no timer on either side, no grpc-timeout
  // header). A finite wait too long for the clock waits a year.
  if (timeout != absl::InfiniteDuration()) {
    timeout = std::clamp(timeout, absl::ZeroDuration(), absl::Hours(24 * 365));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
  }
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
}

grpc::Status CheckAuth(const grpc::ServerContextBase& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing cluster token");
  }
  std::string_view header(it->second.data(), it->second.size());
  if (!TokenMatches(TokenFromAuthorization(header), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong cluster token");
  }
  return grpc::Status::OK;
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder->SetMaxSendMessageSize(kMaxMessageBytes);
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);  // see MakeChannel
}

}  // namespace manta::rpc
