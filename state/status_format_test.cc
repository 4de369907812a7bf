#include "state/status_format.h"

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/placement_group_resources.h"
#include "gtest/gtest.h"
#include "state/test_times.h"

namespace manta::state {
namespace {

std::string Hex(char c) { return std::string(56, c); }

// Two v6e-16 slices (4 hosts each, 4 chips per host) and a CPU-only head.
ClusterView TwoSlices() {
  ClusterView view;
  NodeView head;
  head.node_id = Hex('a');
  head.node_ip = "127.0.0.1";
  head.is_head = true;
  head.start_time_ms = 1;
  view.nodes.push_back(head);
  view.usage.push_back({head.node_id,
                        {{"CPU", 2}, {"memory", 16.0 * (1 << 30)}, {"node:127.0.0.1", 1}},
                        {{"CPU", 2}, {"memory", 16.0 * (1 << 30)}, {"node:127.0.0.1", 1}}});
  int i = 0;
  for (const char* slice : {"tpu-group-0", "tpu-group-1"}) {
    for (int worker = 0; worker < 4; ++worker, ++i) {
      NodeView n;
      n.node_id = std::string(55, 'b') + static_cast<char>('0' + i);
      n.node_ip = "127.0.0.1";
      n.start_time_ms = 10 + i;
      view.nodes.push_back(n);
      std::map<std::string, double> r = {{"CPU", 1}, {"TPU", 4}, {"accelerator_type:TPU-V6E", 1}, {slice, 1}};
      if (worker == 0) r["TPU-v6e-16-head"] = 1;
      view.usage.push_back({n.node_id, r, r});
    }
  }
  return view;
}

TEST(StatusFormatTest, TwoV6eSlicesMatchRayLayout) {
  std::string out = FormatStatus(TwoSlices(), testing::RayExampleTime(), absl::UTCTimeZone());
  std::string header = "======== Cluster status: 2026-04-21 10:20:20.945431 ========";
  std::string sep(header.size(), '-');
  std::string expected = header + "\nNode status\n" + sep +
                         "\nActive:\n"
                         " 1 node_" +
                         Hex('a') + "\n";
  for (int i = 0; i < 8; ++i) absl::StrAppend(&expected, " 1 node_", std::string(55, 'b'), i, "\n");
  absl::StrAppend(&expected,
                  "Pending:\n"
                  " (no pending nodes)\n"
                  "Recent failures:\n"
                  " (no failures)\n"
                  "\n"
                  "Resources\n",
                  sep,
                  "\nUsage:\n"
                  " 0.0/10.0 CPU\n"
                  " 0.0/32.0 TPU\n"
                  " 0.0/2.0 TPU-v6e-16-head\n"
                  " 0.0/8.0 accelerator_type:TPU-V6E\n"
                  " 0B/16.00GiB memory\n"
                  " 0.0/4.0 tpu-group-0\n"
                  " 0.0/4.0 tpu-group-1\n"
                  "\n"
                  "Demands:\n"
                  " (no resource demands)\n");
  EXPECT_EQ(out, expected);
}

TEST(StatusFormatTest, ClusterWithoutAuthenticationGetsAWarningUnderTheHeader) {
  ClusterView view = TwoSlices();
  std::string header = "======== Cluster status: 2026-04-21 10:20:20.945431 ========\n";
  std::string plain = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_EQ(plain.find("WARNING"), std::string::npos) << plain;
  view.auth_disabled = true;
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_EQ(out.rfind(header + "WARNING: this cluster runs without authentication (--auth=none): anyone who can reach "
                               "its ports can run commands on its hosts.\nNode status\n",
                      0),
            0u)
      << out;
  EXPECT_EQ(out.substr(out.find("Node status")), plain.substr(plain.find("Node status")));
}

TEST(StatusFormatTest, UsedIsTotalMinusAvailableWithoutFloatNoise) {
  ClusterView view;
  view.usage.push_back({"n1", {{"CPU", 0.3}, {"memory", 4.0 * (1 << 30)}}, {{"CPU", 0.1}, {"memory", 1 << 30}}});
  view.usage.push_back({"n2", {{"CPU", 0.3}}, {{"CPU", 0.0}}});
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("\n 0.5/0.6 CPU\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n 3.00GiB/4.00GiB memory\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Active:\n (no active nodes)\n"), std::string::npos) << out;
}

TEST(StatusFormatTest, AClusterOfManyLargeHostsSumsWithoutOverflow) {
  // 2,000 hosts of 720 GiB: 1.5e15 bytes, past int64 in 1e-4 units.
  ClusterView view;
  for (int i = 0; i < 2000; ++i) {
    view.usage.push_back(
        {"n" + std::to_string(i), {{"memory", 720.0 * (1LL << 30)}}, {{"memory", 360.0 * (1LL << 30)}}});
  }
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("\n 703.12TiB/1406.25TiB memory\n"), std::string::npos) << out.substr(out.find("Usage:"));
  // The same as one folded sum, as the GCS sends it to `manta status`.
  ClusterView summary;
  summary.usage.push_back({"", {{"memory", 2000 * 720.0 * (1LL << 30)}}, {{"memory", 2000 * 360.0 * (1LL << 30)}}});
  EXPECT_NE(
      FormatStatus(summary, testing::RayExampleTime(), absl::UTCTimeZone()).find("\n 703.12TiB/1406.25TiB memory\n"),
      std::string::npos);
}

TEST(StatusFormatTest, UnexpectedDeathsAreRecentFailuresNewestFirst) {
  ClusterView view = TwoSlices();
  view.nodes[1].alive = false;
  view.nodes[1].end_time_ms = 100;
  view.nodes[2].alive = false;
  view.nodes[2].end_time_ms = 200;
  view.nodes[3].alive = false;
  view.nodes[3].death_expected = true;  // stopped cleanly: not a failure
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  std::string failures =
      absl::StrCat("Recent failures:\n node_", view.nodes[2].node_id, ": NodeTerminated (ip: 127.0.0.1)\n node_",
                   view.nodes[1].node_id, ": NodeTerminated (ip: 127.0.0.1)\n\nResources");
  EXPECT_NE(out.find(failures), std::string::npos) << out;
  EXPECT_EQ(out.find(" 1 node_" + view.nodes[1].node_id), std::string::npos);
  EXPECT_EQ(out.find("node_" + view.nodes[3].node_id), std::string::npos);
}

TEST(StatusFormatTest, FailuresAreCapped) {
  ClusterView view;
  for (int i = 0; i < 30; ++i) {
    NodeView n;
    n.node_id = absl::StrCat("dead", i);
    n.alive = false;
    n.end_time_ms = i;
    view.nodes.push_back(n);
  }
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "NodeTerminated")) ++lines;
  }
  EXPECT_EQ(lines, kMaxFailuresShown);
  EXPECT_NE(out.find(" node_dead29: NodeTerminated"), std::string::npos);
  EXPECT_EQ(out.find(" node_dead0: NodeTerminated"), std::string::npos);
}

TEST(StatusFormatTest, DemandsAsPythonDicts) {
  ClusterView view;
  view.demands.push_back({{{"CPU", 1}, {"TPU", 4}}, 3, 0});
  view.demands.push_back({{{"TPU", 64}}, 0, 1});
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("Demands:\n"
                     " {'CPU': 1.0, 'TPU': 4.0}: 3+ pending tasks/actors\n"
                     " {'TPU': 64.0}: 1+ pending tasks/actors (infeasible)\n"),
            std::string::npos)
      << out;
}

PlacementGroupId Group(char c) { return *PlacementGroupId::FromHex(std::string(PlacementGroupId::kSize * 2, c)); }

// Commits bundle `index` of `group` holding `bundle` on `node`, as the
// raylet does: the plain resources lose it from available, and the group
// names appear with all of it available.
void Commit(NodeUsage* node, const PlacementGroupId& group, int index, const std::map<std::string, double>& bundle) {
  ResourceSet set;
  for (const auto& [name, v] : bundle) {
    node->available[name] -= v;
    set.Set(name, *Quantity::FromDouble(v));
  }
  ResourceSet committed = pg::CommittedResources(set, group, index);
  for (const auto& [name, q] : committed.entries()) {
    node->total[name] += q.ToDouble();
    node->available[name] += q.ToDouble();
  }
}

// A task or actor in bundle `index` of `group` takes `demand` from it.
void RunInBundle(NodeUsage* node, const PlacementGroupId& group, int index,
                 const std::map<std::string, double>& demand) {
  ResourceSet set;
  for (const auto& [name, v] : demand) set.Set(name, *Quantity::FromDouble(v));
  for (int i : {index, -1}) {
    ResourceSet taken = pg::BundleDemand(set, group, i);
    for (const auto& [name, q] : taken.entries()) node->available[name] -= q.ToDouble();
  }
}

PlacementGroupView Pending(const std::string& strategy, const std::vector<std::map<std::string, double>>& bundles,
                           bool infeasible = false) {
  PlacementGroupView g;
  g.placement_group_id = "77ab";
  g.state = "PENDING";
  g.strategy = strategy;
  g.infeasible = infeasible;
  for (size_t i = 0; i < bundles.size(); ++i) {
    BundleView b;
    b.index = static_cast<int>(i);
    b.resources = bundles[i];
    g.bundles.push_back(b);
  }
  return g;
}

// Slice tpu-group-0 reserved by one STRICT_SPREAD group of 4 x {'TPU': 4},
// with one actor holding the chips of its bundle 0; two more such groups and
// two others waiting.
ClusterView SliceReserved() {
  ClusterView view = TwoSlices();
  for (int worker = 0; worker < 4; ++worker) Commit(&view.usage[1 + worker], Group('1'), worker, {{"TPU", 4}});
  RunInBundle(&view.usage[1], Group('1'), 0, {{"TPU", 4}});
  view.pending_placement_groups.push_back(
      Pending("STRICT_SPREAD", {{{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}}));
  view.pending_placement_groups.push_back(Pending("PACK", {{{"CPU", 1}}, {{"TPU", 8}}, {{"TPU", 8}}}, true));
  view.pending_placement_groups.push_back(
      Pending("STRICT_SPREAD", {{{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}}));
  view.pending_placement_groups.back().state = "RESCHEDULING";
  return view;
}

TEST(StatusFormatTest, PlacementGroupsLikeRayStatus) {
  std::string out = FormatStatus(SliceReserved(), testing::RayExampleTime(), absl::UTCTimeZone());
  std::string resources = out.substr(out.find("\nResources\n"));
  std::string sep(std::string("======== Cluster status: 2026-04-21 10:20:20.945431 ========").size(), '-');
  EXPECT_EQ(resources, "\nResources\n" + sep +
                           "\nUsage:\n"
                           " 0.0/10.0 CPU\n"
                           " 4.0/32.0 TPU (4.0 used of 16.0 reserved in placement groups)\n"
                           " 0.0/2.0 TPU-v6e-16-head\n"
                           " 0.0/8.0 accelerator_type:TPU-V6E\n"
                           " 0B/16.00GiB memory\n"
                           " 0.0/4.0 tpu-group-0\n"
                           " 0.0/4.0 tpu-group-1\n"
                           "\n"
                           "Demands:\n"
                           " {'TPU': 4.0} * 4 (STRICT_SPREAD): 2+ pending placement groups\n"
                           " {'CPU': 1.0} * 1, {'TPU': 8.0} * 2 (PACK): 1+ pending placement groups (infeasible)\n");
  EXPECT_EQ(out.find("_group_"), std::string::npos) << out;
}

// What the GCS answers `manta status` (GetClusterResources with
// totals_only): plain sums, and reservations folded by base name.
ClusterView Summarize(const ClusterView& full) {
  ClusterView summary = full;
  summary.usage.assign(1, NodeUsage{});
  for (const NodeUsage& node : full.usage) {
    for (auto [map, out, reserved] :
         {std::tuple(&node.total, &summary.usage[0].total, &summary.reserved.total),
          std::tuple(&node.available, &summary.usage[0].available, &summary.reserved.available)}) {
      for (const auto& [name, v] : *map) {
        pg::SummaryName s = pg::SummarizeName(name);
        if (s.kind == pg::SummaryName::kPlain) (*out)[s.name] += v;
        if (s.kind == pg::SummaryName::kReserved) (*reserved)[s.name] += v;
      }
    }
  }
  return summary;
}

TEST(StatusFormatTest, ASummaryFormatsAsTheFullView) {
  ClusterView full = SliceReserved();
  ClusterView summary = Summarize(full);
  EXPECT_EQ(summary.usage.size(), 1u);
  EXPECT_EQ(summary.reserved.total.at("TPU"), 16);
  EXPECT_EQ(summary.reserved.available.at("TPU"), 12);
  EXPECT_EQ(FormatStatus(summary, testing::RayExampleTime(), absl::UTCTimeZone()),
            FormatStatus(full, testing::RayExampleTime(), absl::UTCTimeZone()));
}

TEST(StatusFormatTest, UnfoldedTotalsFromAnOlderGcsFormatAsTheFullView) {
  // A GCS that predates GetClusterResourcesRequest.fold sums every name.
  ClusterView full = SliceReserved();
  ClusterView unfolded = full;
  unfolded.usage.assign(1, NodeUsage{});
  for (const NodeUsage& node : full.usage) {
    for (const auto& [name, v] : node.total) unfolded.usage[0].total[name] += v;
    for (const auto& [name, v] : node.available) unfolded.usage[0].available[name] += v;
  }
  EXPECT_EQ(FormatStatus(unfolded, testing::RayExampleTime(), absl::UTCTimeZone()),
            FormatStatus(full, testing::RayExampleTime(), absl::UTCTimeZone()));
}

TEST(StatusFormatTest, ReservedButIdleIsNotUsed) {
  // Ray's test_placement_group_status: 4 CPUs, a group of {'CPU': 1}.
  ClusterView view;
  view.usage.push_back({"n1", {{"CPU", 4}, {"memory", 4.0 * (1 << 30)}}, {{"CPU", 4}, {"memory", 4.0 * (1 << 30)}}});
  Commit(&view.usage[0], Group('2'), 0, {{"CPU", 1}, {"memory", 1 << 30}});
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("Usage:\n"
                     " 0.0/4.0 CPU (0.0 used of 1.0 reserved in placement groups)\n"
                     " 0B/4.00GiB memory (0B used of 1.00GiB reserved in placement groups)\n"
                     "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Demands:\n (no resource demands)\n"), std::string::npos) << out;

  // Two actors outside the group and one in it: 3.0/4.0 CPU, 1.0 of 1.0.
  view.usage[0].available["CPU"] -= 2;
  RunInBundle(&view.usage[0], Group('2'), 0, {{"CPU", 1}});
  out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("\n 3.0/4.0 CPU (1.0 used of 1.0 reserved in placement groups)\n"), std::string::npos) << out;
}

TEST(StatusFormatTest, ReservationsSumOverGroupsAndNodes) {
  ClusterView view;
  view.usage.push_back({"n1", {{"TPU", 4}}, {{"TPU", 4}}});
  view.usage.push_back({"n2", {{"TPU", 4}}, {{"TPU", 4}}});
  Commit(&view.usage[0], Group('1'), 0, {{"TPU", 2}});
  Commit(&view.usage[0], Group('2'), 0, {{"TPU", 1}});
  Commit(&view.usage[1], Group('2'), 1, {{"TPU", 4}});
  RunInBundle(&view.usage[1], Group('2'), 1, {{"TPU", 0.5}});
  view.usage[0].available["TPU"] -= 1;  // a task outside any group
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("Usage:\n 1.5/8.0 TPU (0.5 used of 7.0 reserved in placement groups)\n\n"), std::string::npos)
      << out;
}

TEST(StatusFormatTest, PendingGroupsFollowTaskDemands) {
  ClusterView view;
  view.demands.push_back({{{"CPU", 1}}, 2, 0});
  view.demands.push_back({{{"TPU", 64}}, 0, 1});
  view.pending_placement_groups.push_back(Pending("STRICT_SPREAD", {{{"TPU", 4}}, {{"TPU", 4}}}));
  view.pending_placement_groups.push_back(Pending("STRICT_SPREAD", {{{"TPU", 4}}, {{"TPU", 4}}}, true));
  view.pending_placement_groups.push_back(Pending("PACK", {{{"TPU", 4}}, {{"TPU", 4}}}));
  view.pending_placement_groups.push_back(Pending("STRICT_SPREAD", {{{"TPU", 4}}, {{"TPU", 4}}}));
  view.pending_placement_groups.push_back(Pending("SPREAD", {{{"TPU", 4}}, {{"CPU", 2}}, {{"TPU", 4}}}));
  std::string out = FormatStatus(view, testing::RayExampleTime(), absl::UTCTimeZone());
  EXPECT_NE(out.find("Demands:\n"
                     " {'CPU': 1.0}: 2+ pending tasks/actors\n"
                     " {'TPU': 64.0}: 1+ pending tasks/actors (infeasible)\n"
                     " {'TPU': 4.0} * 2 (STRICT_SPREAD): 2+ pending placement groups\n"
                     " {'TPU': 4.0} * 2 (STRICT_SPREAD): 1+ pending placement groups (infeasible)\n"
                     " {'TPU': 4.0} * 2 (PACK): 1+ pending placement groups\n"
                     " {'TPU': 4.0} * 2, {'CPU': 2.0} * 1 (SPREAD): 1+ pending placement groups\n"),
            std::string::npos)
      << out;
}

TEST(StatusFormatTest, CountBundleShapesKeepsBundleOrder) {
  std::vector<BundleView> bundles(4);
  bundles[0].resources = {{"TPU", 4}};
  bundles[1].resources = {{"CPU", 1}};
  bundles[2].resources = {{"TPU", 4}};
  bundles[3].resources = {{"TPU", 4.0001}};
  auto counts = CountBundleShapes(bundles);
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0].second, 2);
  EXPECT_EQ(counts[1].first, (std::map<std::string, double>{{"CPU", 1}}));
  EXPECT_EQ(counts[2].second, 1);
  EXPECT_TRUE(CountBundleShapes({}).empty());
}

TEST(StatusFormatTest, MemoryUnits) {
  EXPECT_EQ(FormatMemory(0), "0B");
  EXPECT_EQ(FormatMemory(1023), "1023B");
  EXPECT_EQ(FormatMemory(1536), "1.50KiB");
  EXPECT_EQ(FormatMemory(16.0 * (1 << 30)), "16.00GiB");
  EXPECT_EQ(FormatMemory(546.83 * (1 << 30)), "546.83GiB");
  EXPECT_EQ(FormatMemory(2.0 * 1099511627776.0), "2.00TiB");
}

TEST(StatusFormatTest, PythonReprQuotes) {
  EXPECT_EQ(PythonRepr("CPU"), "'CPU'");
  EXPECT_EQ(PythonRepr("it's"), "\"it's\"");
  EXPECT_EQ(FormatShape({}), "{}");
  EXPECT_EQ(FormatShape({{"custom", 0.5}}), "{'custom': 0.5}");
}

}  // namespace
}  // namespace manta::state
