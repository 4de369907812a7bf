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

#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/metrics/metrics.h"

namespace manta::metrics {

MetricsRegistry::Collector OnLoop(EventLoop* loop, const MetricsRegistry* registry, std::weak_ptr<void> alive,
                                  std::function<void(Exposition& out)> collect,
                                  absl::Duration timeout = absl::Seconds(2));

}  // namespace manta::metrics
