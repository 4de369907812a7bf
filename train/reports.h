// The controller's side of Report: rounds of reports from every rank, and
// the checkpoints they commit. Pure (no runtime calls); the controller
// serializes access. Internal to train/.
//
//   ReportRounds rounds(/*world_size=*/4);
//   std::optional<RoundOutcome> done = rounds.Add(request);  // set by the last rank of the round
//   if (done && done->checkpoint) checkpoints.Commit(*done->checkpoint);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "train/protocol.h"

namespace manta::train {

// What a completed round says.
struct RoundOutcome {
  int64_t seq = 0;
  std::map<std::string, double> metrics;  // rank 0's
  // Rank 0's checkpoint when every rank reported one; empty otherwise.
  std::optional<Checkpoint> checkpoint;
  // Ranks that reported a checkpoint although not all did (it is dropped).
  int partial_checkpoints = 0;
};

// Reports of one attempt, by round. A rank's n-th report belongs to round
// n; a round completes when every rank reported in it.
class ReportRounds {
 public:
  explicit ReportRounds(int world_size) : world_size_(world_size) {}

  // InvalidArgument for a rank out of range, a round it already reported
  // in, or a round that completed (nothing changes). When the report
  // completes its round, `*completed` gets the outcome.
  absl::Status Add(const ReportRequest& r, std::optional<RoundOutcome>* completed);
  // Whether round `seq` has completed.
  bool Completed(int64_t seq) const { return seq <= last_completed_; }
  int world_size() const { return world_size_; }

 private:
  const int world_size_;
  int64_t last_completed_ = 0;
  // Pending rounds: reports by rank.
  std::map<int64_t, std::map<int, ReportRequest>> pending_;
};

// The committed checkpoints of a run, newest last. Committing one beyond
// `num_to_keep` deletes the oldest through `remove` (a directory remover,
// injected so tests need no disk).
class CheckpointManager {
 public:
  using Remover = std::function<void(const std::string& path)>;
  CheckpointManager(int num_to_keep, Remover remove) : num_to_keep_(num_to_keep), remove_(std::move(remove)) {}

  void Commit(const Checkpoint& c);
  std::optional<Checkpoint> Latest() const;
  const std::vector<Checkpoint>& committed() const { return committed_; }

 private:
  const int num_to_keep_;  // 0: all
  const Remover remove_;
  std::vector<Checkpoint> committed_;
};

}  // namespace manta::train
