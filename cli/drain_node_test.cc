// `manta drain-node`'s arguments and message, how a draining node reads in
// `manta list nodes` and `manta status`, and `manta start --drain-grace-s`.
#include "cli/drain_node.h"

#include "absl/strings/match.h"
#include "cli/node_flags.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "state/list_format.h"
#include "state/status_format.h"

namespace manta::cli {
namespace {

using state::ClusterView;
using state::FormatNodeList;
using state::FormatNodeListJson;
using state::FormatStatus;
using state::NodeView;

NodeView Node(const std::string& id, bool alive = true) {
  NodeView n;
  n.node_id = id;
  n.node_ip = "127.0.0.1";
  n.alive = alive;
  return n;
}

// 2026-04-21 10:20:50 UTC.
constexpr int64_t kDeadlineMs = 1776766850000;

NodeView Draining(const std::string& id, int64_t deadline_ms = kDeadlineMs) {
  NodeView n = Node(id);
  n.draining = true;
  n.drain_reason = "preemption";
  n.drain_deadline_ms = deadline_ms;
  n.start_time_ms = 5;
  return n;
}

TEST(DrainNodeTest, DeadlineIsADuration) {
  EXPECT_EQ(*ParseDrainDeadline("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDrainDeadline("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDrainDeadline("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDrainDeadline("0"), absl::ZeroDuration());
  for (const char* bad : {"", "30", "soon", "-5s", "inf", "8d", "1000h"}) {
    auto d = ParseDrainDeadline(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(d.status().message(), "--deadline")) << d.status();
  }
}

TEST(DrainNodeTest, NodeIdIsAFullIdOrAUniquePrefix) {
  std::vector<NodeView> nodes = {Node("6b430bd4aa" + std::string(46, '0')), Node("6b430bd4bb" + std::string(46, '1')),
                                 Node("7c11ffee" + std::string(48, '2'), /*alive=*/false)};
  auto full = ResolveNodeId(nodes, nodes[1].node_id);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->node_id, nodes[1].node_id);
  auto prefix = ResolveNodeId(nodes, "7C11FFEE");  // either case; a dead node is still found
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->node_id, nodes[2].node_id);

  auto ambiguous = ResolveNodeId(nodes, "6b430bd4");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ambiguous.status().message(), "ambiguous")) << ambiguous.status();
  EXPECT_TRUE(absl::StrContains(ambiguous.status().message(), nodes[0].node_id + " (ALIVE)"));
  EXPECT_TRUE(absl::StrContains(ambiguous.status().message(), nodes[1].node_id + " (ALIVE)"));

  EXPECT_EQ(ResolveNodeId(nodes, "6b430bd").status().code(), absl::StatusCode::kInvalidArgument);  // too short
  EXPECT_EQ(ResolveNodeId(nodes, "6b430bdx").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveNodeId(nodes, "deadbeef").status().code(), absl::StatusCode::kNotFound);
}

TEST(DrainNodeTest, AcceptedMessage) {
  std::string id = "6b430bd4" + std::string(48, 'a');
  EXPECT_EQ(FormatDrainAccepted(id, "preemption", absl::Seconds(30)),
            "Node 6b430bd4... is draining (reason: preemption, deadline in 30s)");
  EXPECT_EQ(FormatDrainAccepted(id, "idle", absl::ZeroDuration()),
            "Node 6b430bd4... is draining (reason: idle, no deadline)");
  EXPECT_EQ(FormatDrainAccepted(id, "maintenance", absl::Minutes(2)),
            "Node 6b430bd4... is draining (reason: maintenance, deadline in 2m)");
}

TEST(DrainNodeTest, ListNodesShowsTheDrainAsStateMessage) {
  std::vector<NodeView> nodes = {Draining(std::string(56, 'a')), Draining(std::string(56, 'b'), 0)};
  nodes[1].drain_reason = "idle";
  std::string out = FormatNodeList(nodes, absl::FromUnixMillis(kDeadlineMs - 30000), absl::UTCTimeZone());
  EXPECT_TRUE(absl::StrContains(out, "ALIVE  draining: preemption (deadline 2026-04-21 10:20:50)")) << out;
  EXPECT_TRUE(absl::StrContains(out, "ALIVE  draining: idle ")) << out;
  auto json = nlohmann::json::parse(FormatNodeListJson({Node(std::string(56, 'c'))}));
  EXPECT_EQ(json[0]["state_message"], "");
}

TEST(DrainNodeTest, StatusListsDrainingNodesApartFromActive) {
  ClusterView view;
  NodeView head = Node(std::string(56, 'a'));
  head.is_head = true;
  view.nodes = {head, Draining(std::string(56, 'b'))};
  std::string out = FormatStatus(view, absl::FromUnixMillis(kDeadlineMs), absl::UTCTimeZone());
  EXPECT_TRUE(absl::StrContains(out,
                                "Active:\n"
                                " 1 node_" +
                                    std::string(56, 'a') +
                                    "\n"
                                    "Draining:\n"
                                    " 1 node_" +
                                    std::string(56, 'b') +
                                    ": draining: preemption (deadline 2026-04-21 10:20:50)\n"
                                    "Pending:\n"))
      << out;
  // Without draining nodes the layout is as before: no Draining block.
  view.nodes = {head};
  EXPECT_FALSE(absl::StrContains(FormatStatus(view, absl::Now(), absl::UTCTimeZone()), "Draining"));
}

TEST(DrainNodeTest, StartPassesTheDrainGraceToTheRaylet) {
  NodeFlags f;
  f.drain_grace_s = "30";
  auto args = RayletResourceArgs(f);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, std::vector<std::string>{"--drain_grace_s=30"});
  for (const char* bad : {"-1", "1.5", "ten", "86401"}) {
    f.drain_grace_s = bad;
    auto r = RayletResourceArgs(f);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "--drain-grace-s")) << r.status();
  }
}

}  // namespace
}  // namespace manta::cli
