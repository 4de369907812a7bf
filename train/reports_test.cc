// Report rounds and committed checkpoints, without a cluster.
#include "train/reports.h"

#include "gtest/gtest.h"

namespace manta::train {
namespace {

ReportRequest Rep(int rank, int64_t seq, double loss, std::optional<std::string> checkpoint = std::nullopt) {
  ReportRequest r;
  r.attempt_id = "a";
  r.rank = rank;
  r.seq = seq;
  r.metrics = {{"loss", loss}};
  if (checkpoint) r.checkpoint = Checkpoint{*checkpoint};
  return r;
}

TEST(ReportRoundsTest, ARoundCompletesWithItsLastRankAndCarriesRankZerosMetrics) {
  ReportRounds rounds(3);
  std::optional<RoundOutcome> done;
  ASSERT_TRUE(rounds.Add(Rep(2, 1, 2.0), &done).ok());
  EXPECT_FALSE(done.has_value());
  ASSERT_TRUE(rounds.Add(Rep(0, 1, 0.5), &done).ok());
  EXPECT_FALSE(done.has_value());
  EXPECT_FALSE(rounds.Completed(1));
  ASSERT_TRUE(rounds.Add(Rep(1, 1, 1.0), &done).ok());
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->seq, 1);
  EXPECT_EQ(done->metrics.at("loss"), 0.5);
  EXPECT_FALSE(done->checkpoint.has_value());
  EXPECT_TRUE(rounds.Completed(1));
  EXPECT_FALSE(rounds.Completed(2));
}

TEST(ReportRoundsTest, ACheckpointCountsOnlyWhenEveryRankReportedOne) {
  ReportRounds rounds(2);
  std::optional<RoundOutcome> done;
  ASSERT_TRUE(rounds.Add(Rep(0, 1, 1, "/c/10"), &done).ok());
  ASSERT_TRUE(rounds.Add(Rep(1, 1, 1, "/c/10-rank1"), &done).ok());
  ASSERT_TRUE(done.has_value());
  ASSERT_TRUE(done->checkpoint.has_value());
  EXPECT_EQ(done->checkpoint->path, "/c/10") << "rank 0's path wins";

  ASSERT_TRUE(rounds.Add(Rep(0, 2, 1, "/c/20"), &done).ok());
  ASSERT_TRUE(rounds.Add(Rep(1, 2, 1), &done).ok());
  ASSERT_TRUE(done.has_value());
  EXPECT_FALSE(done->checkpoint.has_value()) << "a half-reported checkpoint is dropped";
  EXPECT_EQ(done->partial_checkpoints, 1);
}

TEST(ReportRoundsTest, BadReportsChangeNothing) {
  ReportRounds rounds(2);
  std::optional<RoundOutcome> done;
  EXPECT_EQ(rounds.Add(Rep(2, 1, 0), &done).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rounds.Add(Rep(-1, 1, 0), &done).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(rounds.Add(Rep(0, 1, 0), &done).ok());
  EXPECT_EQ(rounds.Add(Rep(0, 1, 0), &done).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(rounds.Add(Rep(1, 1, 0), &done).ok());
  EXPECT_TRUE(done.has_value());
  EXPECT_EQ(rounds.Add(Rep(1, 1, 0), &done).code(), absl::StatusCode::kInvalidArgument) << "a completed round";
  EXPECT_FALSE(done.has_value());
}

TEST(CheckpointManagerTest, KeepsTheNewestAndDeletesTheRest) {
  std::vector<std::string> removed;
  CheckpointManager m(2, [&](const std::string& p) { removed.push_back(p); });
  EXPECT_FALSE(m.Latest().has_value());
  for (const char* p : {"/c/10", "/c/20", "/c/20", "/c/30", "/c/40"}) m.Commit(Checkpoint{p});
  EXPECT_EQ(m.Latest()->path, "/c/40");
  EXPECT_EQ(removed, (std::vector<std::string>{"/c/10", "/c/20"}));
  ASSERT_EQ(m.committed().size(), 2u);

  std::vector<std::string> none;
  CheckpointManager all(0, [&](const std::string& p) { none.push_back(p); });
  for (const char* p : {"/a", "/b", "/c"}) all.Commit(Checkpoint{p});
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(all.committed().size(), 3u);
}

}  // namespace
}  // namespace manta::train
