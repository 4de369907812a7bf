// The process's current ClusterState (manta/internal/cluster_state.h).
#include <atomic>

#include "manta/internal/cluster_state.h"

namespace manta::core {
namespace {

std::atomic<ClusterState*> g_cluster_state{nullptr};

}  // namespace

ClusterState* ClusterState::Current() { return g_cluster_state.load(std::memory_order_acquire); }

ClusterState* SetCurrentClusterState(ClusterState* state) {
  return g_cluster_state.exchange(state, std::memory_order_acq_rel);
}

}  // namespace manta::core
