// A metrics collector whose samples come from state that lives on an event
// loop (a daemon's tables): each scrape posts `collect` to the loop and
// waits for it, at most `timeout`; a loop that does not answer in time
// adds nothing to that scrape (the other families still render).
//
//   registry.AddCollector(OnLoop(loop, &registry, alive, [this](Exposition& out) { ... }));
//
// `alive` expires when the state goes away; a collection posted before
// that and run after it adds nothing.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/synchronization/notification.h"

#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/metrics/metrics.h"

namespace manta::metrics {

MetricsRegistry::Collector OnLoop(EventLoop* loop, const MetricsRegistry* registry, std::weak_ptr<void> alive,
                                  std::function<void(Exposition& out)> collect,
                                  absl::Duration timeout = absl::Seconds(2));

// For a collector that reads files off the loop: runs `get` on the loop and
// returns its value, or nullopt when the loop did not answer within
// `timeout` or `alive` had expired.
template <typename T>
std::optional<T> FromLoop(EventLoop* loop, std::weak_ptr<void> alive, std::function<T()> get,
                          absl::Duration timeout = absl::Seconds(2)) {
  struct Shared {
    absl::Notification done;
    std::optional<T> value;
  };
  auto shared = std::make_shared<Shared>();
  loop->Post([alive = std::move(alive), get = std::move(get), shared] {
    if (auto held = alive.lock()) shared->value = get();
    shared->done.Notify();
  });
  if (!shared->done.WaitForNotificationWithTimeout(timeout)) return std::nullopt;
  return std::move(shared->value);
}

}  // namespace manta::metrics
