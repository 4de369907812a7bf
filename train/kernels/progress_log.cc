#include "train/kernels/progress_log.h"

#include "absl/strings/str_format.h"

namespace manta::train {
namespace {
double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
}  // namespace

ProgressLog::ProgressLog(std::string what, int64_t total_bytes, Sink sink, Clock clock, absl::Duration quiet,
                         absl::Duration every)
    : what_(std::move(what)),
      total_(total_bytes),
      sink_(std::move(sink)),
      clock_(std::move(clock)),
      quiet_(quiet),
      every_(every),
      start_(clock_()),
      last_line_(start_) {}

std::string ProgressLog::Progress(absl::Time now) const {
  const int percent = total_ > 0 ? static_cast<int>(100 * done_ / total_) : 100;
  return absl::StrFormat("%s: %d%% (%.1f of %.1f MiB, %.1f s)", what_, percent, MiB(done_), MiB(total_),
                         absl::ToDoubleSeconds(now - start_));
}

void ProgressLog::Add(int64_t bytes) {
  done_ += bytes;
  const absl::Time now = clock_();
  if (now - start_ < quiet_ || now - last_line_ < every_ || done_ >= total_) return;
  sink_(Progress(now));
  last_line_ = now;
}

void ProgressLog::Done() {
  const absl::Time now = clock_();
  const absl::Duration took = now - start_;
  if (took < quiet_) return;
  const double seconds = absl::ToDoubleSeconds(took);
  sink_(absl::StrFormat("%s: done, %.1f MiB in %.1f s (%.1f MiB/s)", what_, MiB(done_), seconds, MiB(done_) / seconds));
}

}  // namespace manta::train
