#include "train/chip_publisher.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/tpu.h"

namespace manta::train {

std::unique_ptr<ChipPublisher> ChipPublisher::FromEnvironment(int chips) {
  const char* dir = std::getenv("MANTA_STATS_DIR");
  if (dir == nullptr || *dir == '\0' || chips <= 0) return nullptr;
  std::vector<int> ids;
  if (const char* visible = std::getenv(tpu::kEnvVisibleChips); visible != nullptr) {
    for (absl::string_view id : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
      int chip = -1;
      if (!absl::SimpleAtoi(id, &chip) || chip < 0) return nullptr;
      ids.push_back(chip);
    }
  } else {
    for (int i = 0; i < chips; ++i) ids.push_back(i);  // the whole host's
  }
  return Open(dir, ids);
}

std::unique_ptr<ChipPublisher> ChipPublisher::Open(const std::string& stats_dir, const std::vector<int>& chips) {
  std::vector<std::unique_ptr<metrics::ChipActivity>> pages;
  for (int chip : chips) {
    auto page = metrics::ChipActivity::Open(stats_dir, chip);
    if (!page.ok()) {
      std::fprintf(stderr, "the chips' activity is not published: %s\n", page.status().ToString().c_str());
      return nullptr;
    }
    pages.push_back(std::move(*page));
  }
  if (pages.empty()) return nullptr;
  return std::unique_ptr<ChipPublisher>(new ChipPublisher(std::move(pages)));
}

void ChipPublisher::StepBegan(int local_device) {
  if (local_device >= 0 && local_device < static_cast<int>(chips_.size())) chips_[local_device]->StepBegan();
}

void ChipPublisher::StepEnded(int local_device, double transfer_seconds, int64_t bytes_held) {
  if (local_device >= 0 && local_device < static_cast<int>(chips_.size())) {
    chips_[local_device]->StepEnded(transfer_seconds, bytes_held);
  }
}

}  // namespace manta::train
