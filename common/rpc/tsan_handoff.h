// The order gRPC gives, told to ThreadSanitizer. Debian's gRPC is not built
// with TSan, so when its thread runs a call's completion, TSan does not see
// that everything done before the call was started came first, and reports
// the completion's reads of what the caller wrote. In a TSan build
// (scripts/sanitize.sh tsan defines MANTA_TSAN) a call's start releases and
// its completion acquires one address; elsewhere these are nothing.
//
//   MANTA_GRPC_HANDOFF_BEFORE();  stub->async()->Method(ctx, req, reply, [..](grpc::Status s) {
//     MANTA_GRPC_HANDOFF_AFTER();  ... });
//
// One address for every call: a completion is ordered after the start of
// every call before it, a little more order than gRPC promises.
#pragma once

#if defined(MANTA_TSAN)
#include <sanitizer/tsan_interface.h>

namespace manta::rpc::tsan {
inline char grpc_handoff;
}  // namespace manta::rpc::tsan

#define MANTA_GRPC_HANDOFF_BEFORE() __tsan_release(&::manta::rpc::tsan::grpc_handoff)
#define MANTA_GRPC_HANDOFF_AFTER() __tsan_acquire(&::manta::rpc::tsan::grpc_handoff)
#else
#define MANTA_GRPC_HANDOFF_BEFORE() ((void)0)
#define MANTA_GRPC_HANDOFF_AFTER() ((void)0)
#endif
