// What a run of fixed size (controller.cc) and an elastic run (elastic.cc,
// elastic_plan.cc) share: the length of one reservation try and the lines
// both print. The lines are Ray Train's, byte for byte: users and tests look
// for them. Internal to train/.
//
//   LogReservingSlices(*log, 2, "4x4");
//   auto slice = HeldSlice::Reserve(spec.scaling, kReserveTry);
#pragma once

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "spdlog/logger.h"
#include "train/scaling.h"

namespace manta::train {

// How long one reservation try waits for slices it saw free (a fixed-size
// run's start and an elastic run's growth both try in these steps).
constexpr absl::Duration kReserveTry = absl::Seconds(5);

// "Using SlicePlacementGroup utility to reserve 2 slice(s) with topology '4x4'..."
inline void LogReservingSlices(spdlog::logger& log, int slices, const std::string& topology) {
  log.info("Using SlicePlacementGroup utility to reserve {} slice(s) with topology '{}'...", slices, topology);
}

// "Attempting to start training worker group of size 8 with the following
// resources: [{'TPU': 4}] * 8"
inline void LogStartingGroup(spdlog::logger& log, int size, const std::map<std::string, double>& resources) {
  log.info("Attempting to start training worker group of size {} with the following resources: [{}] * {}", size,
           PythonDict(resources), size);
}

// A start of workers that failed; it is tried again and does not count
// against max_failures.
inline void LogRetryingLaunch(spdlog::logger& log, absl::string_view failure) {
  log.error(
      "Retrying the launch of the training worker group. The previous launch attempt encountered the "
      "following failure:\n{}",
      std::string(failure));
}

// How the message of a run that ran out of restarts begins: "Training
// failed after 3 attempt(s) (2 failure(s); FailureConfig(max_failures=1)). "
inline std::string TrainingFailedPrefix(int attempts, int failures, int max_failures) {
  return absl::StrCat("Training failed after ", attempts, " attempt(s) (", failures,
                      " failure(s); FailureConfig(max_failures=", max_failures, ")). ");
}

}  // namespace manta::train
