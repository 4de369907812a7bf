// ChipPublisher: tells the host's raylet what the TPU chips of this
// process do. A DeviceActivity (kernels/train.h) that publishes each local
// device's steps on the stats page of the chip it runs on
// (common/metrics/tpu_chips.h): local device i is the i-th chip of
// TPU_VISIBLE_CHIPS, or chip i when the process holds all of its host's
// chips (the variable is then unset, as on Ray). Internal to train/.
//
//   std::unique_ptr<ChipPublisher> chips = ChipPublisher::FromEnvironment(context.chips);
//   options.activity = chips.get();   // null: nothing is published
//
// Thread-safe for distinct devices: each device's thread writes its own page.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/metrics/tpu_chips.h"
#include "train/kernels/train.h"

namespace manta::train {

class ChipPublisher : public DeviceActivity {
 public:
  // The publisher of the `chips` chips this worker holds, in the stats
  // directory the raylet gave it (MANTA_STATS_DIR); null without chips or
  // a directory, or when no page can be opened (the training runs,
  // unpublished).
  static std::unique_ptr<ChipPublisher> FromEnvironment(int chips);
  // The same for `chips` in `stats_dir`.
  static std::unique_ptr<ChipPublisher> Open(const std::string& stats_dir, const std::vector<int>& chips);

  void StepBegan(int local_device) override;
  void StepEnded(int local_device, double transfer_seconds, int64_t bytes_held) override;

 private:
  explicit ChipPublisher(std::vector<std::unique_ptr<metrics::ChipActivity>> chips) : chips_(std::move(chips)) {}
  // By local device; devices past the visible chips publish nothing.
  const std::vector<std::unique_ptr<metrics::ChipActivity>> chips_;
};

}  // namespace manta::train
