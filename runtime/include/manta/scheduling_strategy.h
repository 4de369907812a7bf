// Scheduling strategies for tasks and actors, as Ray's:
//
//   manta::Task(Work).SetSchedulingStrategy(manta::SpreadStrategy()).Remote();
//   manta::Task(Work).SetSchedulingStrategy(manta::NodeAffinity(node_id)).Remote();
//
// SPREAD places each task on the next node (round robin) with room now;
// NODE_AFFINITY runs it on the node (hard: only there, failing with
// InfeasibleError when the node is dead or unknown; soft: there when it has
// room, else anywhere). See core::SchedulingStrategy.
#pragma once

#include "common/id.h"
#include "manta/internal/core_worker.h"

namespace manta {

inline core::SchedulingStrategy SpreadStrategy() {
  core::SchedulingStrategy s;
  s.kind = core::SchedulingStrategy::Kind::kSpread;
  return s;
}

inline core::SchedulingStrategy NodeAffinity(const NodeId& node, bool soft = false) {
  core::SchedulingStrategy s;
  s.kind = core::SchedulingStrategy::Kind::kNodeAffinity;
  s.node_id = node;
  s.soft = soft;
  return s;
}

}  // namespace manta
