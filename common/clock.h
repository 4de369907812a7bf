// Clock: time as the code that decides things reads it — absl::Now in a
// daemon, a ManualClock in a test that wants to move time without waiting.
// Blocking waits (condition variables, timers) keep real time.
//
//   HealthCheckManager manager(client, options, on_dead, clock.AsClock());
#pragma once

#include <cstdint>
#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace manta {

using Clock = std::function<absl::Time()>;

// Milliseconds since the Unix epoch, now (the unit of every *_ms field).
inline int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// A clock that moves only when told. Thread-safe; must outlive what reads it.
class ManualClock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  Clock AsClock() const {
    return [this] { return Now(); };
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta
