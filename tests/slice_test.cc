// TPU slices and placement groups through the C++ API, on two simulated
// v6e-16 slices (8 raylets): tasks and actors in bundles, racing clients,
// a slice with a dead host, and the multislice example.
#include <signal.h>

#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/placement_group_resources.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

std::vector<std::string> LinesWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(l, prefix)) out.emplace_back(l);
  }
  return out;
}

class SliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MANTA_ASSERT_OK(cluster_.StartHead());
    ASSERT_TRUE(cluster_.AddTpuSlice("tpu-group-0", "v6e-16", "4x4").ok());
    ASSERT_TRUE(cluster_.AddTpuSlice("tpu-group-1", "v6e-16", "4x4").ok());
    ASSERT_TRUE(Cluster::WaitFor([&] { return cluster_.CountNodes(rpc::NodeInfo::ALIVE) == 9; }, absl::Seconds(20)));
  }
  void TearDown() override {
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_.ResourcesFull(); }, absl::Seconds(15)))
        << "resources were not all returned";
    cluster_.Shutdown();
  }
  Cluster cluster_;
};

TEST_F(SliceTest, TasksAndActorsRunInTheirBundles) {
  CommandResult r = cluster_.RunProgram("slice_driver", {"group_tasks"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A task holding all four chips of a host sees the whole host.
  std::set<std::string> workers;
  for (const auto& line : LinesWith(r.out, "TASK ")) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 5u) << line;
    EXPECT_EQ(f[2], "-") << line;            // no TPU_VISIBLE_CHIPS
    EXPECT_EQ(f[4], "tpu-group-0") << line;  // the group's slice only
    workers.insert(f[1]);
  }
  EXPECT_EQ(workers.size(), 4u) << r.out;
  // Two chips of the bundle's host.
  EXPECT_TRUE(absl::StrContains(r.out, "ACTOR 0,1\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "OK actor died")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "does not exist or was removed")) << r.out;
}

TEST_F(SliceTest, RacingClientsNeverShareASlice) {
  // 3 clients for 2 slices: 40 rounds each hand every slice over ~60 times.
  const int kRounds = 40;
  std::vector<CommandResult> results(3);
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&, c] {
      results[c] = cluster_.RunProgram("slice_driver", {"race", std::to_string(kRounds)}, absl::Seconds(300));
    });
  }
  for (auto& t : clients) t.join();
  struct Hold {
    int64_t from, to;
    int client;
  };
  std::map<std::string, std::vector<Hold>> by_slice;
  for (int c = 0; c < 3; ++c) {
    ASSERT_EQ(results[c].exit_code, 0) << results[c].out << results[c].err;
    auto holds = LinesWith(results[c].out, "HOLD ");
    ASSERT_EQ(holds.size(), static_cast<size_t>(kRounds));
    for (const auto& line : holds) {
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 4));
      ASSERT_EQ(f.size(), 5u) << line;
      by_slice[f[1]].push_back({std::stoll(f[2]), std::stoll(f[3]), c});
      // Every host of the slice ran the client's task, on that slice.
      std::vector<std::string> hosts = absl::StrSplit(f[4], ';', absl::SkipEmpty());
      std::set<std::string> workers;
      for (const auto& h : hosts) {
        EXPECT_TRUE(absl::EndsWith(h, " " + f[1])) << line;
        workers.insert(h.substr(0, h.find(' ')));
      }
      EXPECT_EQ(workers.size(), 4u) << line;
    }
  }
  EXPECT_EQ(by_slice.size(), 2u);
  for (auto& [slice, holds] : by_slice) {
    std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) { return a.from < b.from; });
    for (size_t i = 1; i < holds.size(); ++i) {
      EXPECT_GE(holds[i].from, holds[i - 1].to) << "slice " << slice << " held by clients " << holds[i - 1].client
                                                << " and " << holds[i].client << " at once";
    }
  }
}

TEST_F(SliceTest, AReservationWaitsLongerThanOneCallForASliceToFree) {
  // The reservation's create waits for its group at the GCS: a slice freed
  // 12 s later (past a GCS call's 10 s timeout) is still taken.
  CommandResult r = cluster_.RunProgram("slice_driver", {"wait_long"}, absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto waited = LinesWith(r.out, "WAITED ");
  ASSERT_EQ(waited.size(), 1u) << r.out;
  std::vector<std::string> f = absl::StrSplit(waited[0], ' ');
  ASSERT_EQ(f.size(), 3u) << waited[0];
  EXPECT_GE(std::stod(f[1]), 11) << waited[0];  // it did wait for the release
}

TEST_F(SliceTest, ASliceWithADeadHostIsNeverChosen) {
  // Raylets 1-4 are tpu-group-0's hosts: kill its worker 2.
  MANTA_ASSERT_OK(cluster_.KillRaylet(3, SIGKILL));
  ASSERT_TRUE(Cluster::WaitFor([&] { return cluster_.CountNodes(rpc::NodeInfo::ALIVE) == 8; }, absl::Seconds(10)));
  for (int i = 0; i < 3; ++i) {
    CommandResult r = cluster_.RunProgram("slice_driver", {"reserve_one"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "SLICE tpu-group-1\n")) << r.out;
    auto hosts = LinesWith(r.out, "HOST ");
    EXPECT_EQ(hosts.size(), 4u) << r.out;
    for (const auto& h : hosts) EXPECT_TRUE(absl::EndsWith(h, " - tpu-group-1")) << h;  // no MEGASCALE for one slice
  }
}

TEST_F(SliceTest, MultisliceExample) {
  CommandResult two = cluster_.RunProgram("example_tpu_multislice", {"2"});
  ASSERT_EQ(two.exit_code, 0) << two.out << two.err;
  EXPECT_TRUE(absl::StrContains(two.out, "32 devices across 2 slices")) << two.out;
  CommandResult one = cluster_.RunProgram("example_tpu_multislice", {"1"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_TRUE(absl::StrContains(one.out, "16 devices across 1 slice")) << one.out;
}

}  // namespace
}  // namespace manta::testing
