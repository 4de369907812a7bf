#include "train/reports.h"

#include "absl/strings/str_cat.h"

namespace manta::train {

absl::Status ReportRounds::Add(const ReportRequest& r, std::optional<RoundOutcome>* completed) {
  completed->reset();
  if (r.rank < 0 || r.rank >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("report from rank ", r.rank, " of a group of ", world_size_));
  }
  if (r.seq <= last_completed_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", r.rank, " reported in round ", r.seq, ", which has completed"));
  }
  auto& round = pending_[r.seq];
  if (!round.emplace(r.rank, r).second) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", r.rank, " reported twice in round ", r.seq));
  }
  if (static_cast<int>(round.size()) < world_size_) return absl::OkStatus();
  RoundOutcome out;
  out.seq = r.seq;
  out.metrics = round.at(0).metrics;
  int with_checkpoint = 0;
  for (const auto& [rank, report] : round) with_checkpoint += report.checkpoint.has_value() ? 1 : 0;
  if (with_checkpoint == world_size_) {
    out.checkpoint = round.at(0).checkpoint;
  } else {
    out.partial_checkpoints = with_checkpoint;
  }
  // Rounds complete in order: a rank reports round n + 1 only after round n
  // returned to it, so every earlier round has completed.
  pending_.erase(r.seq);
  last_completed_ = std::max(last_completed_, r.seq);
  *completed = std::move(out);
  return absl::OkStatus();
}

void CheckpointManager::Commit(const Checkpoint& c) {
  if (!committed_.empty() && committed_.back().path == c.path) return;
  committed_.push_back(c);
  if (num_to_keep_ <= 0) return;
  while (static_cast<int>(committed_.size()) > num_to_keep_) {
    const std::string doomed = committed_.front().path;
    committed_.erase(committed_.begin());
    bool still_kept = false;
    for (const Checkpoint& k : committed_) still_kept = still_kept || k.path == doomed;
    if (!still_kept && remove_) remove_(doomed);
  }
}

std::optional<Checkpoint> CheckpointManager::Latest() const {
  if (committed_.empty()) return std::nullopt;
  return committed_.back();
}

}  // namespace manta::train
