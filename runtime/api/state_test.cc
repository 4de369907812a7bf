// The state API (nodes, runtime context, training-run records) through the
// FakeCoreWorker.
#include "manta/state.h"

#include "gtest/gtest.h"
#include "manta/api.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta_state_test {

using manta::core::FakeCoreWorker;
namespace state = manta::state;

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override { core_ = FakeCoreWorker::Install(); }
  void TearDown() override { FakeCoreWorker::Uninstall(); }
  FakeCoreWorker* core_ = nullptr;
};

state::TrainRun MakeRun(const std::string& id, int64_t version, state::TrainRunState s) {
  state::TrainRun r;
  r.run_id = id;
  r.name = "run";
  r.version = version;
  r.state = s;
  r.start_time_ms = 1000 + version;
  return r;
}

TEST_F(StateTest, NodesAndRuntimeContext) {
  manta::core::NodeData n;
  n.ip = "10.0.0.7";
  n.alive = true;
  n.resources_total = {{"CPU", 4}};
  core_->AddNode(n);
  std::vector<manta::NodeInfo> nodes = manta::Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].ip, "10.0.0.7");
  EXPECT_EQ(nodes[0].resources_total.at("CPU"), 4);
  manta::RuntimeContext here = manta::GetRuntimeContext();
  EXPECT_EQ(here.job_id, core_->job_id().Hex());
  EXPECT_EQ(here.node_ip, "127.0.0.1");
  EXPECT_GT(here.pid, 0);
}

TEST_F(StateTest, NodeWatchSeesArrivalDrainAndDeathUntilDestroyed) {
  std::vector<std::pair<manta::NodeEvent::Kind, std::string>> seen;
  auto watch = manta::WatchNodes([&](const manta::NodeEvent& e) { seen.emplace_back(e.kind, e.node.drain_reason); });
  manta::core::NodeData n;
  n.ip = "10.0.0.9";
  manta::NodeId id = core_->AddNode(n);
  core_->DrainNode(id, "preemption", 123);
  core_->KillNode(id);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].first, manta::NodeEvent::kAlive);
  EXPECT_EQ(seen[1], std::make_pair(manta::NodeEvent::kDraining, std::string("preemption")));
  EXPECT_EQ(seen[2].first, manta::NodeEvent::kDead);
  EXPECT_TRUE(manta::Nodes()[0].draining);
  watch.reset();
  core_->AddNode(n);
  EXPECT_EQ(seen.size(), 3u) << "no calls once the watch is gone";
}

TEST_F(StateTest, ReportsAreVersionedAndFreezeOnceTerminal) {
  const std::string id(32, 'a');
  state::ReportTrainRun(MakeRun(id, 1, state::TrainRunState::kRunning),
                        {{.time_ms = 1, .step = 0, .metrics = {{"loss", 5}}}});
  state::ReportTrainRun(MakeRun(id, 3, state::TrainRunState::kRunning),
                        {{.time_ms = 2, .step = 1, .metrics = {{"loss", 4}}}});
  state::ReportTrainRun(MakeRun(id, 2, state::TrainRunState::kErrored));  // older: ignored
  auto runs = state::ListTrainRuns(/*with_metrics=*/true);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, state::TrainRunState::kRunning);
  ASSERT_EQ(runs[0].metrics.size(), 2u);
  EXPECT_EQ(runs[0].metrics[1].metrics.at("loss"), 4);
  EXPECT_TRUE(state::ListTrainRuns()[0].metrics.empty()) << "metrics only when asked for";

  state::ReportTrainRun(MakeRun(id, 4, state::TrainRunState::kFinished));
  state::ReportTrainRun(MakeRun(id, 5, state::TrainRunState::kRunning));  // after the end: ignored
  EXPECT_EQ(state::ListTrainRuns()[0].state, state::TrainRunState::kFinished);
  EXPECT_EQ(state::TrainRunStateName(state::TrainRunState::kRescheduling), "RESCHEDULING");
  EXPECT_TRUE(state::IsTerminal(state::TrainRunState::kAborted));
  EXPECT_FALSE(state::IsTerminal(state::TrainRunState::kRestarting));

  EXPECT_EQ(state::TryReportTrainRun(MakeRun("short", 1, state::TrainRunState::kRunning)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StateTest, ListKeepsTheNewest) {
  for (int i = 0; i < 3; ++i) {
    state::ReportTrainRun(MakeRun(std::string(31, 'b') + std::to_string(i), 1 + i, state::TrainRunState::kRunning));
  }
  auto runs = state::ListTrainRuns(false, 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id.back(), '1');
  EXPECT_EQ(runs[1].run_id.back(), '2');
}

}  // namespace manta_state_test
