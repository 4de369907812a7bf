// The gRPC side of RPC fault injection (see rpc_chaos.h): a client
// interceptor that applies an RpcChaos to every unary call it covers.
//
//   auto factories = std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>();
//   factories.push_back(MakeRpcChaosInterceptorFactory(chaos));
//   grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args, std::move(factories));
//
// A dropped request is hijacked before anything is sent and finishes
// UNAVAILABLE; a dropped reply lets the call run to its end on the server and
// replaces the status the caller sees with UNAVAILABLE. A delayed call is
// held on a timer thread of this file's own before it is sent. Each
// injected failure is logged ("injected RPC failure: METHOD request|reply
// dropped") on the "rpc" logger, at warning level so that it shows in
// every process.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <memory>

#include "common/rpc/rpc_chaos.h"

namespace manta::rpc {

// `chaos` must outlive every channel made with the factory.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeRpcChaosInterceptorFactory(RpcChaos* chaos);

}  // namespace manta::rpc
