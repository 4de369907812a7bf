#include "common/metrics/loop_collector.h"

#include <string>

#include "absl/synchronization/notification.h"

namespace manta::metrics {

MetricsRegistry::Collector OnLoop(EventLoop* loop, const MetricsRegistry* registry, std::weak_ptr<void> alive,
                                  std::function<void(Exposition& out)> collect, absl::Duration timeout) {
  return [loop, registry, alive = std::move(alive), collect = std::move(collect), timeout](Exposition& out) {
    // Shared with the loop's side, which may run after this scrape gave up.
    struct Collected {
      absl::Notification done;
      std::string text;
    };
    auto collected = std::make_shared<Collected>();
    loop->Post([registry, alive, collect, collected] {
      if (auto held = alive.lock()) {
        Exposition mine(&registry->constant_labels());
        collect(mine);
        collected->text = mine.Take();
      }
      collected->done.Notify();
    });
    if (collected->done.WaitForNotificationWithTimeout(timeout)) out.Append(collected->text);
  };
}

}  // namespace manta::metrics
