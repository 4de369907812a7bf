// `manta stop`: stops every daemon that `manta start` started on this host
// under a temp dir, like `ray stop`.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace manta::cli {

struct StopOptions {
  std::string temp_dir;
  bool force = false;  // SIGKILL at once
  absl::Duration grace = absl::Seconds(10);
};

// Reads the pid files of every session under the temp dir, skips (and
// removes) those whose process is gone or now runs another program, sends
// SIGINT to the raylets (so that none drains first), waits, then SIGTERM to
// the GCS servers, and SIGKILLs the process groups of whatever outlives
// `grace`. Prints how many processes it
// stopped. Error only if a process survives SIGKILL.
absl::Status RunStop(const StopOptions& options, std::ostream& out);

}  // namespace manta::cli
