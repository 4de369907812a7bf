// RPC fault injection for tests, like Ray's RAY_testing_rpc_failure.
//
// A process started with MANTA_testing_rpc_failure set fails some of its
// outgoing unary calls on purpose, as a lossy network would:
//
//   MANTA_testing_rpc_failure="RequestWorkerLease=3:25:25,CommitBundles=-1:0:50:20"
//
// Grammar: a comma-separated list of entries
//
//   METHOD=MAX_FAILURES:REQUEST_PERCENT:REPLY_PERCENT[:MAX_DELAY_MS]
//
//   METHOD          a short gRPC method name ("RequestWorkerLease"), one
//                   qualified by its service ("CoreWorkerService.KillActor";
//                   KillActor exists on two services), or "*" for every
//                   unary method. The most specific entry applies.
//   MAX_FAILURES    how many calls the entry may fail in this process, in
//                   all; -1 for no limit.
//   REQUEST_PERCENT chance (0..100) that a call is dropped before it is sent:
//                   the server never sees it.
//   REPLY_PERCENT   chance (0..100) that a call is sent, runs on the server,
//                   and its reply is dropped. REQUEST_PERCENT + REPLY_PERCENT
//                   is at most 100.
//   MAX_DELAY_MS    optional (0..60000): every call of the method that is
//                   sent waits a uniformly random 0..MAX_DELAY_MS first (its
//                   deadline keeps running), so calls overtake each other.
//
// Either failure reaches the caller as UNAVAILABLE, exactly like a broken
// connection, so the caller's ordinary retry logic is what gets tested; a
// dropped reply is how a test proves a handler idempotent. Streaming calls
// are never touched, with one exception: a normal task's push on a worker's
// PushTasks stream counts as a PushTask call, whose request or reply the
// core worker drops by these rules (MAX_DELAY_MS does not apply to it). MANTA_testing_rpc_failure_seed (an unsigned integer)
// fixes the random choices; otherwise the seed is random and logged.
//
// The variable is read once per process, when the first channel is made
// (rpc::MakeChannel). An entry that does not parse is reported on stderr and
// ignored; the others apply. Unset (the normal case), channels are made
// without the interceptor and calls pay nothing.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace manta::rpc {

inline constexpr char kRpcFailureEnv[] = "MANTA_testing_rpc_failure";
inline constexpr char kRpcFailureSeedEnv[] = "MANTA_testing_rpc_failure_seed";

// One parsed entry of MANTA_testing_rpc_failure.
struct RpcFaultRule {
  std::string method;        // "Method", "Service.Method" or "*"
  int64_t max_failures = 0;  // -1: unlimited
  int request_percent = 0;
  int reply_percent = 0;
  int64_t max_delay_ms = 0;
};

// Parses `spec` (the grammar above). Returns the entries that parse, in
// order; for each one that does not, appends a line saying why to `errors`.
// A later entry for the same method replaces an earlier one.
std::vector<RpcFaultRule> ParseRpcFaultSpec(absl::string_view spec, std::vector<std::string>* errors);

// What happens to one call.
struct RpcFault {
  enum Kind { kNone, kDropRequest, kDropReply };
  Kind kind = kNone;
  absl::Duration delay;  // before the request is sent (never for kDropRequest)
};

// Decides the fate of calls by the rules. Thread-safe.
class RpcChaos {
 public:
  RpcChaos(std::vector<RpcFaultRule> rules, uint64_t seed);

  // Whether some rule names `full_method` ("/manta.rpc.Service/Method").
  bool Covers(absl::string_view full_method) const;
  // Draws the fate of one call of `full_method`; a failure is logged
  // ("injected RPC failure: METHOD request|reply dropped").
  RpcFault Decide(absl::string_view full_method);
  // Calls failed so far.
  int64_t num_injected() const;

 private:
  // The index of the rule for `full_method` ("Service.Method", else
  // "Method", else "*"); -1 when none.
  int Find(absl::string_view full_method) const;

  // Constant after construction.
  const std::vector<RpcFaultRule> rules_;

  mutable absl::Mutex mu_;
  std::vector<int64_t> remaining_ ABSL_GUARDED_BY(mu_);  // per rule; -1: unlimited
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  int64_t num_injected_ ABSL_GUARDED_BY(mu_) = 0;
};

// What a call of `full_method` that `kind` failed tells its caller, with
// status UNAVAILABLE: "connection lost (METHOD: the request was dropped ...)".
std::string InjectedFailureMessage(absl::string_view full_method, RpcFault::Kind kind);

// This process's fault injection, from the environment on first use; null
// when MANTA_testing_rpc_failure is unset or holds no valid entry.
RpcChaos* ProcessRpcChaos();

}  // namespace manta::rpc
