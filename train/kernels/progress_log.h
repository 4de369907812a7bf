// ProgressLog: what a long byte-moving operation (a checkpoint's save or
// restore) tells its log. Nothing when it ends within `quiet`; past that, a
// line at most every `every`, and a closing line:
//
//   checkpoint save at step 400 (tensor 0, fsdp 1): 40% (410.0 of 1024.0 MiB, 1.2 s)
//   checkpoint save at step 400 (tensor 0, fsdp 1): done, 1024.0 MiB in 2.5 s (409.6 MiB/s)
//
//   ProgressLog log("checkpoint save at step 400", total_bytes, [](const std::string& l) { logger->info(l); });
//   ... log.Add(bytes) as each part is written ...
//   log.Done();
//
// One thread uses an instance.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace manta::train {

class ProgressLog {
 public:
  using Sink = std::function<void(const std::string& line)>;

  ProgressLog(
      std::string what, int64_t total_bytes, Sink sink, Clock clock = [] { return absl::Now(); },
      absl::Duration quiet = absl::Seconds(1), absl::Duration every = absl::Seconds(1));

  // `bytes` more are done.
  void Add(int64_t bytes);
  // The closing line, when the operation took longer than `quiet`.
  void Done();

 private:
  std::string Progress(absl::Time now) const;

  const std::string what_;
  const int64_t total_;
  const Sink sink_;
  const Clock clock_;
  const absl::Duration quiet_, every_;
  const absl::Time start_;
  absl::Time last_line_;
  int64_t done_ = 0;
};

}  // namespace manta::train
