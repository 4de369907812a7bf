#include "raylet/drain_state.h"

#include <algorithm>

namespace manta::raylet {

bool DrainState::Start(const std::string& reason, int64_t deadline_ms) {
  MANTA_CHECK_THREAD(thread_);
  bool started = !draining_;
  if (started) {
    deadline_ms_ = deadline_ms;
  } else if (deadline_ms != 0) {
    deadline_ms_ = deadline_ms_ == 0 ? deadline_ms : std::min(deadline_ms_, deadline_ms);
  }
  draining_ = true;
  reason_ = reason;
  return started;
}

DrainState::Action DrainState::Decide(int64_t now_ms, const NodeLoad& load) const {
  MANTA_CHECK_THREAD(thread_);
  if (!draining_) return Action::kStay;
  if (load.leased_workers == 0 && load.bundles == 0) return Action::kIdle;
  if (deadline_ms_ != 0 && now_ms >= deadline_ms_) return Action::kDeadline;
  return Action::kStay;
}

}  // namespace manta::raylet
