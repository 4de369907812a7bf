// Where the bundles of a placement group go: the one algorithm the GCS's
// scheduler runs, which the fake core worker runs too so that tests against
// the fake place groups as a cluster would.
//
//   std::vector<pg::NodeOption> nodes = ...;  // alive, not draining
//   pg::Choice c = pg::ChoosePlacement(pg::Strategy::kStrictSpread, wants, nodes, /*used=*/{});
//   if (c.placed) ... c.nodes[bundle_index] ...
//
// Nodes are tried least loaded first (stable: ties keep the given order).
//   STRICT_PACK: every bundle on one node (the node of bundles already
//     placed, when some are).
//   PACK: one node when one has room for all, else bundle by bundle,
//     preferring nodes the group already uses.
//   STRICT_SPREAD: a node each, none holding a bundle of the group, as a
//     bipartite matching (a greedy choice can miss one that exists).
//   SPREAD: bundle by bundle, preferring nodes the group does not use.
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/id.h"
#include "common/resources.h"

namespace manta::pg {

enum class Strategy { kPack, kSpread, kStrictPack, kStrictSpread };

// A bundle still to place.
struct BundleWant {
  int index = 0;  // in its group
  ResourceSet demand;
  std::string what;  // names the bundle in messages: "bundle 1 {TPU: 4}"
  int domain = 0;    // with a same-label rule: the bundles sharing a value
};

// A node a bundle may go to.
struct NodeOption {
  NodeId id;
  ResourceSet total;
  ResourceSet available;  // left now
  // [w]: whether the node's labels satisfy the selector of wants[w].
  std::vector<bool> matches;
  // With a same-label rule: the node's value of the label (empty: it has
  // none, and takes no bundle).
  std::string label_value;
};

struct Choice {
  bool placed = false;
  bool infeasible = false;      // when not placed: no placement ever, on these nodes
  std::string message;          // when not placed: why
  std::map<int, NodeId> nodes;  // when placed: bundle index -> node
};

// `used`: nodes holding bundles of the group already placed (a group that
// lost some to a dead node).
Choice ChoosePlacement(Strategy strategy, const std::vector<BundleWant>& wants, std::vector<NodeOption> nodes,
                       const absl::flat_hash_set<NodeId>& used);

// With a same-label rule: the wants of each domain (BundleWant::domain) on
// nodes of one label value, placed by `strategy` among those nodes, and no
// value used by two domains. `fixed`: the value of each domain with bundles
// already placed. Domains are decided in order, each on the first value
// (least loaded node first) with room for all of its bundles.
Choice ChoosePlacementByLabel(Strategy strategy, const std::vector<BundleWant>& wants, std::vector<NodeOption> nodes,
                              const absl::flat_hash_set<NodeId>& used, const std::map<int, std::string>& fixed);

// The share of a node in use: the mean over its nonzero resources of
// (total - available) / total.
double Load(const ResourceSet& total, const ResourceSet& available);

}  // namespace manta::pg
