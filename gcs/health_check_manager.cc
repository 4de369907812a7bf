#include "gcs/health_check_manager.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace manta::gcs {

HealthCheckManager::HealthCheckManager(HealthCheckClient* client, HealthCheckOptions options, DeathCallback on_dead,
                                       Clock clock)
    : client_(client), options_(options), on_dead_(std::move(on_dead)), clock_(std::move(clock)) {}

void HealthCheckManager::AddNode(const NodeId& node, const std::string& address) {
  MANTA_CHECK_THREAD(thread_);
  NodeState& state = nodes_[node];
  state = NodeState{};
  state.address = address;
  state.generation = next_generation_++;
  // The first routine check is one period after joining.
  state.last_sent = clock_();
  state.last_answer = state.last_sent;
}

void HealthCheckManager::RemoveNode(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  if (nodes_.erase(node) > 0) client_->Forget(node);
}

void HealthCheckManager::Suspect(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.suspect = true;
  if (!it->second.in_flight) Send(node, it->second);
}

void HealthCheckManager::PollStarted(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  ++it->second.polls_held;
  it->second.unpolled_since = absl::InfiniteFuture();
  // The raylet's loop sent it: as good a sign of life as an answered check.
  it->second.last_answer = std::max(it->second.last_answer, clock_());
}

void HealthCheckManager::Alive(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) it->second.last_answer = std::max(it->second.last_answer, clock_());
}

void HealthCheckManager::PollAnswered(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.polls_held == 0) return;
  if (--it->second.polls_held == 0) it->second.unpolled_since = clock_();
}

void HealthCheckManager::Tick() {
  MANTA_CHECK_THREAD(thread_);
  absl::Time now = clock_();
  std::vector<NodeId> due;
  for (auto& [id, state] : nodes_) {
    if (now - state.unpolled_since >= options_.repoll_timeout) {
      // Watched again from its next answer.
      state.unpolled_since = absl::InfiniteFuture();
      state.suspect = true;
    }
    if (state.in_flight) continue;
    absl::Duration period = state.suspect ? options_.suspect_period : options_.period;
    if (now - state.last_sent >= period) due.push_back(id);
  }
  for (const NodeId& id : due) Send(id, nodes_.at(id));
}

void HealthCheckManager::Send(const NodeId& node, NodeState& state) {
  state.in_flight = true;
  state.last_sent = clock_();
  uint64_t generation = state.generation;
  client_->Check(node, state.address, options_.timeout,
                 [this, node, generation](const absl::Status& s) { OnResult(node, generation, s); });
}

void HealthCheckManager::OnResult(const NodeId& node, uint64_t generation, const absl::Status& status) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.generation != generation) return;
  NodeState& state = it->second;
  state.in_flight = false;
  const absl::Time now = clock_();
  if (status.ok()) {
    state.failures = 0;
    state.timed_out = false;
    state.suspect = false;
    state.last_answer = now;
    return;
  }
  ++state.failures;
  state.timed_out |= status.code() == absl::StatusCode::kDeadlineExceeded;
  Logger("gcs")->debug("health check failed node_id={} failures={} status={}", node.Hex(), state.failures,
                       status.ToString());
  if (state.failures < options_.failure_threshold) return;
  const absl::Duration silent = now - state.last_answer;
  if (state.timed_out && silent < options_.unresponsive_timeout) {
    if (state.failures == options_.failure_threshold) {
      Logger("gcs")->warn("node_id={} has not answered for {:.1f} s; declared dead after {:.0f} s unless it answers",
                          node.Hex(), absl::ToDoubleSeconds(silent),
                          absl::ToDoubleSeconds(options_.unresponsive_timeout));
    }
    return;  // slow, perhaps not gone: keep checking
  }
  std::string reason =
      absl::StrCat("health check failed ", state.failures, " times in a row (last: ", status.message(), ")");
  if (state.timed_out)
    absl::StrAppend(&reason, "; no answer for ", absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100))));
  nodes_.erase(it);
  client_->Forget(node);
  on_dead_(node, reason);
}

}  // namespace manta::gcs
