#include "common/rpc/rpc_chaos.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace manta::rpc {
namespace {

constexpr int64_t kMaxDelayMs = 60000;

// One entry, or a message saying why it does not parse.
bool ParseEntry(absl::string_view entry, RpcFaultRule* rule, std::string* why) {
  std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
  if (kv.size() != 2) {
    *why = "expected METHOD=MAX_FAILURES:REQUEST_PERCENT:REPLY_PERCENT[:MAX_DELAY_MS]";
    return false;
  }
  rule->method = std::string(absl::StripAsciiWhitespace(kv[0]));
  if (rule->method.empty()) {
    *why = "the method name is empty";
    return false;
  }
  for (char c : rule->method) {
    if (rule->method != "*" && !absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') {
      *why = "a method name is '*' or holds only letters, digits, '_' and '.'";
      return false;
    }
  }
  std::vector<absl::string_view> fields = absl::StrSplit(kv[1], ':');
  if (fields.size() != 3 && fields.size() != 4) {
    *why = absl::StrCat("expected 3 or 4 ':'-separated numbers after '=', got ", fields.size());
    return false;
  }
  int64_t n[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[i]), &n[i])) {
      *why = absl::StrCat("'", fields[i], "' is not an integer");
      return false;
    }
  }
  if (n[0] < -1) {
    *why = "MAX_FAILURES must be -1 (unlimited) or more";
    return false;
  }
  if (n[1] < 0 || n[1] > 100 || n[2] < 0 || n[2] > 100 || n[1] + n[2] > 100) {
    *why = "REQUEST_PERCENT and REPLY_PERCENT must be 0..100 and add up to at most 100";
    return false;
  }
  if (n[3] < 0 || n[3] > kMaxDelayMs) {
    *why = absl::StrCat("MAX_DELAY_MS must be 0..", kMaxDelayMs);
    return false;
  }
  rule->max_failures = n[0];
  rule->request_percent = static_cast<int>(n[1]);
  rule->reply_percent = static_cast<int>(n[2]);
  rule->max_delay_ms = n[3];
  return true;
}

// "/manta.rpc.NodeManagerService/RequestWorkerLease" -> ("NodeManagerService",
// "RequestWorkerLease").
std::pair<absl::string_view, absl::string_view> SplitMethod(absl::string_view full) {
  size_t slash = full.rfind('/');
  absl::string_view method = slash == absl::string_view::npos ? full : full.substr(slash + 1);
  absl::string_view service = slash == absl::string_view::npos ? absl::string_view() : full.substr(0, slash);
  if (size_t dot = service.rfind('.'); dot != absl::string_view::npos) service = service.substr(dot + 1);
  if (!service.empty() && service.front() == '/') service.remove_prefix(1);
  return {service, method};
}

RpcChaos* MakeProcessRpcChaos() {
  const char* spec = std::getenv(kRpcFailureEnv);
  if (spec == nullptr || *spec == '\0') return nullptr;
  std::vector<std::string> errors;
  std::vector<RpcFaultRule> rules = ParseRpcFaultSpec(spec, &errors);
  for (const std::string& e : errors) std::fprintf(stderr, "manta: %s: %s; entry ignored\n", kRpcFailureEnv, e.c_str());
  if (rules.empty()) return nullptr;
  uint64_t seed = std::random_device()();
  if (const char* s = std::getenv(kRpcFailureSeedEnv); s != nullptr && *s != '\0') {
    if (!absl::SimpleAtoi(s, &seed)) {
      std::fprintf(stderr, "manta: %s: '%s' is not an unsigned integer; using a random seed\n", kRpcFailureSeedEnv, s);
    }
  }
  Logger("rpc")->warn("RPC fault injection is on: {}={} seed={}", kRpcFailureEnv, spec, seed);
  return new RpcChaos(std::move(rules), seed);
}

}  // namespace

std::vector<RpcFaultRule> ParseRpcFaultSpec(absl::string_view spec, std::vector<std::string>* errors) {
  std::vector<RpcFaultRule> rules;
  for (absl::string_view entry : absl::StrSplit(spec, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) continue;
    RpcFaultRule rule;
    std::string why;
    if (!ParseEntry(entry, &rule, &why)) {
      errors->push_back(absl::StrCat("'", entry.substr(0, 200), "': ", why));
      continue;
    }
    for (auto it = rules.begin(); it != rules.end(); ++it) {
      if (it->method == rule.method) {
        rules.erase(it);
        break;
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

RpcChaos::RpcChaos(std::vector<RpcFaultRule> rules, uint64_t seed) : rules_(std::move(rules)), rng_(seed) {
  for (const RpcFaultRule& r : rules_) remaining_.push_back(r.max_failures);
}

int RpcChaos::Find(absl::string_view full_method) const {
  auto [service, method] = SplitMethod(full_method);
  int by_name = -1, any = -1;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const std::string& m = rules_[i].method;
    size_t dot = m.find('.');
    if (dot != std::string::npos) {
      if (absl::string_view(m).substr(0, dot) == service && absl::string_view(m).substr(dot + 1) == method) {
        return static_cast<int>(i);
      }
    } else if (m == method) {
      by_name = static_cast<int>(i);
    } else if (m == "*") {
      any = static_cast<int>(i);
    }
  }
  return by_name >= 0 ? by_name : any;
}

bool RpcChaos::Covers(absl::string_view full_method) const { return Find(full_method) >= 0; }

RpcFault RpcChaos::Decide(absl::string_view full_method) {
  RpcFault fault;
  int i = Find(full_method);
  if (i < 0) return fault;
  const RpcFaultRule& rule = rules_[static_cast<size_t>(i)];
  absl::MutexLock lock(&mu_);
  int64_t& remaining = remaining_[static_cast<size_t>(i)];
  if (remaining != 0) {
    int roll = std::uniform_int_distribution<int>(1, 100)(rng_);
    if (roll <= rule.request_percent) {
      fault.kind = RpcFault::kDropRequest;
    } else if (roll <= rule.request_percent + rule.reply_percent) {
      fault.kind = RpcFault::kDropReply;
    }
    if (fault.kind != RpcFault::kNone) {
      if (remaining > 0) --remaining;
      ++num_injected_;
      Logger("rpc")->warn("injected RPC failure: {} {} dropped", std::string(full_method),
                          fault.kind == RpcFault::kDropRequest ? "request" : "reply");
    }
  }
  if (fault.kind != RpcFault::kDropRequest && rule.max_delay_ms > 0) {
    fault.delay = absl::Milliseconds(std::uniform_int_distribution<int64_t>(0, rule.max_delay_ms)(rng_));
  }
  return fault;
}

std::string InjectedFailureMessage(absl::string_view full_method, RpcFault::Kind kind) {
  return absl::StrCat("connection lost (", full_method, ": ",
                      kind == RpcFault::kDropRequest ? "the request was dropped before it was sent"
                                                     : "the reply was dropped after the server handled the call",
                      ", by ", kRpcFailureEnv, ")");
}

int64_t RpcChaos::num_injected() const {
  absl::MutexLock lock(&mu_);
  return num_injected_;
}

RpcChaos* ProcessRpcChaos() {
  // Never freed: calls may be in flight while the process exits.
  static RpcChaos* const chaos = MakeProcessRpcChaos();
  return chaos;
}

}  // namespace manta::rpc
