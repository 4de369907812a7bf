// A snapshot of the cluster as the GCS reports it, in plain types, so that
// formatting code and its tests need neither gRPC nor protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace manta::state {

// One entry of the GCS node table.
struct NodeView {
  std::string node_id;  // hex
  std::string node_ip;
  std::string node_name;
  bool is_head = false;
  bool alive = true;
  std::map<std::string, double> resources_total;
  std::map<std::string, std::string> labels;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;  // 0 while alive
  std::string death_reason;
  bool death_expected = false;  // a clean unregister, not a failure
  int pid = 0;
  bool draining = false;  // alive but going away (manta drain-node)
  std::string drain_reason;
  int64_t drain_deadline_ms = 0;  // unix epoch; 0: none
};

// Total and available resources of one alive node.
struct NodeUsage {
  std::string node_id;  // hex
  std::map<std::string, double> total;
  std::map<std::string, double> available;
};

// A resource shape waiting for a node.
struct DemandView {
  std::map<std::string, double> shape;
  int64_t num_ready = 0;
  int64_t num_infeasible = 0;
};

// One bundle of a placement group.
struct BundleView {
  int index = 0;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  std::string node_id;  // hex; empty while the bundle has no node
};

// One entry of the GCS placement-group table.
struct PlacementGroupView {
  std::string placement_group_id;  // hex
  std::string name;                // empty: anonymous
  std::string ray_namespace;
  std::string creator_job_id;       // hex
  std::string strategy;             // PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
  std::string state;                // PENDING, PREPARED, CREATED, REMOVED, RESCHEDULING
  std::vector<BundleView> bundles;  // in index order
  bool detached = false;
  std::string state_message;  // why the group is not CREATED
  bool infeasible = false;    // no alive node could ever hold it
  int64_t create_time_ms = 0;
  int64_t ready_time_ms = 0;
  int64_t remove_time_ms = 0;
  int num_reschedules = 0;
};

struct ClusterView {
  std::vector<NodeView> nodes;  // alive and dead
  // Alive nodes only. Besides the plain resources, `total` and `available`
  // hold the placement-group names of committed bundles (CPU_group_<hex>,
  // CPU_group_<i>_<hex>, bundle_group_<hex>, ...); a plain resource's
  // `available` excludes what bundles reserve of it.
  std::vector<NodeUsage> usage;
  // A summary (what `manta status` asks for) instead holds one `usage`
  // entry with the plain sums over the alive nodes, and here what committed
  // bundles reserve, by base name (CPU: every CPU_group_<pg> summed).
  NodeUsage reserved;
  std::vector<DemandView> demands;
  std::vector<PlacementGroupView> pending_placement_groups;  // PENDING or RESCHEDULING
  // The GCS answers calls that carry no token (a cluster started with
  // --auth=none).
  bool auth_disabled = false;
};

}  // namespace manta::state
