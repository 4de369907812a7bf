// The dashboard page's sign-in sessions and the throttle on failed sign-ins.
//
// POST /api/login with the cluster token creates a session: a random id the
// page's HttpOnly cookie carries instead of the token, valid for `lifetime`
// from its creation; POST /api/logout revokes it at once. A peer whose
// sign-ins keep failing waits before it may try again: nothing after
// kFreeFailures failures, then 1 s, 2 s, 4 s, ... up to kMaxWait, reset by
// a success or by kForget of quiet.
//
// Thread-safe: the dashboard's accepting thread checks sessions and waits
// while its handlers create and revoke them.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace manta::dashboard {

// The cookie that carries a sign-in session's id.
inline constexpr char kSessionCookie[] = "manta_session";

// The session id in a Cookie header ("a=1; manta_session=<id>"), or "".
std::string SessionIdFromCookies(std::string_view cookie_header);

class SessionStore {
 public:
  static constexpr absl::Duration kLifetime = absl::Hours(12);
  static constexpr size_t kMaxSessions = 4096;

  explicit SessionStore(Clock clock = absl::Now, absl::Duration lifetime = kLifetime,
                        size_t max_sessions = kMaxSessions);

  // A new session's id (64 hex digits). Past max_sessions, the oldest ends.
  std::string Create();
  // Whether `id` names a live session.
  bool Valid(std::string_view id);
  // Ends the session `id` names, if any.
  void Revoke(std::string_view id);
  absl::Duration lifetime() const { return lifetime_; }

 private:
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock clock_;
  const absl::Duration lifetime_;
  const size_t max_sessions_;
  absl::Mutex mu_;
  // Oldest first; each id's position in by_id_.
  std::list<std::pair<std::string, absl::Time>> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::list<std::pair<std::string, absl::Time>>::iterator, std::less<>> by_id_
      ABSL_GUARDED_BY(mu_);
};

class LoginThrottle {
 public:
  static constexpr int kFreeFailures = 5;
  static constexpr absl::Duration kMaxWait = absl::Minutes(5);
  static constexpr absl::Duration kForget = absl::Minutes(15);
  static constexpr size_t kMaxPeers = 10000;

  explicit LoginThrottle(Clock clock = absl::Now) : clock_(std::move(clock)) {}

  // How long `peer` must wait before it may try again (zero: now).
  absl::Duration Wait(const std::string& peer);
  void Failed(const std::string& peer);
  void Succeeded(const std::string& peer);

 private:
  struct Record {
    int failures = 0;
    absl::Time last;
    absl::Time next_allowed;
  };
  const Clock clock_;
  absl::Mutex mu_;
  std::map<std::string, Record> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::dashboard
