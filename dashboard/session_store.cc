#include "dashboard/session_store.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/token.h"

namespace manta::dashboard {

std::string SessionIdFromCookies(std::string_view cookie_header) {
  for (absl::string_view part : absl::StrSplit(absl::string_view(cookie_header.data(), cookie_header.size()), ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kSessionCookie) && absl::ConsumePrefix(&part, "=")) return std::string(part);
  }
  return {};
}

SessionStore::SessionStore(Clock clock, absl::Duration lifetime, size_t max_sessions)
    : clock_(std::move(clock)), lifetime_(lifetime), max_sessions_(max_sessions) {}

void SessionStore::ExpireLocked(absl::Time now) {
  while (!order_.empty() && (order_.front().second + lifetime_ <= now || order_.size() > max_sessions_)) {
    by_id_.erase(order_.front().first);
    order_.pop_front();
  }
}

std::string SessionStore::Create() {
  std::string id = GenerateToken();
  absl::MutexLock lock(&mu_);
  absl::Time now = clock_();
  order_.emplace_back(id, now);
  by_id_[id] = std::prev(order_.end());
  ExpireLocked(now);
  return id;
}

bool SessionStore::Valid(std::string_view id) {
  if (id.empty()) return false;
  absl::MutexLock lock(&mu_);
  ExpireLocked(clock_());
  // The id is looked up, not compared byte by byte against a secret: a map
  // lookup's timing tells nothing of a random 256-bit id.
  return by_id_.find(id) != by_id_.end();
}

void SessionStore::Revoke(std::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  order_.erase(it->second);
  by_id_.erase(it);
}

absl::Duration LoginThrottle::Wait(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return absl::ZeroDuration();
  absl::Time now = clock_();
  if (now - it->second.last > kForget) {
    peers_.erase(it);
    return absl::ZeroDuration();
  }
  return std::max(absl::ZeroDuration(), it->second.next_allowed - now);
}

void LoginThrottle::Failed(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  absl::Time now = clock_();
  if (peers_.size() >= kMaxPeers && peers_.find(peer) == peers_.end()) {
    // Forget the quietest peer rather than grow without bound.
    auto oldest = std::min_element(peers_.begin(), peers_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
    peers_.erase(oldest);
  }
  Record& r = peers_[peer];
  if (now - r.last > kForget) r = Record{};
  ++r.failures;
  r.last = now;
  if (r.failures >= kFreeFailures) {
    int doublings = std::min(r.failures - kFreeFailures, 16);
    r.next_allowed = now + std::min(kMaxWait, absl::Seconds(1) * (int64_t{1} << doublings));
  }
}

void LoginThrottle::Succeeded(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  peers_.erase(peer);
}

}  // namespace manta::dashboard
