// Node events (GcsClusterState): a thread per watch long-polls the GCS's
// NODE_INFO channel and hands each change to the watcher.
#include <algorithm>
#include <limits>
#include <thread>

#include "runtime/core_worker/gcs_cluster_state.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

// How long the GCS may hold one poll; Unwatch cancels a held poll at once.
constexpr int32_t kNodePollWaitMs = 10000;
// The call's own timeout on top of the hold, and the loop's hop.
constexpr absl::Duration kPollSlack = absl::Seconds(15);

NodeEvent::Kind KindOf(const NodeData& d) {
  if (!d.alive) return NodeEvent::kDead;
  return d.draining ? NodeEvent::kDraining : NodeEvent::kAlive;
}

}  // namespace

struct GcsClusterState::NodeWatch {
  std::function<void(const NodeEvent&)> on_event;
  std::thread thread;
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::shared_ptr<gcs::SyncGcsClient::Pending<rpc::PollReply>> held ABSL_GUARDED_BY(mu);  // the poll in flight
  int64_t sequence = 0;                                                                   // the poll thread's
  std::string incarnation;
};

GcsClusterState::~GcsClusterState() {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&watch_mu_);
    for (const auto& [id, w] : node_watches_) ids.push_back(id);
  }
  for (int64_t id : ids) UnwatchNodes(id);
}

absl::StatusOr<int64_t> GcsClusterState::WatchNodes(std::function<void(const NodeEvent&)> on_event) {
  auto watch = std::make_shared<NodeWatch>();
  watch->on_event = std::move(on_event);
  // Where the channel stands now: only what comes after is this watch's.
  rpc::PollRequest first;
  first.add_channels(rpc::PubMessage::NODE_INFO);
  first.set_max_wait_ms(0);
  first.set_after_sequence(std::numeric_limits<int64_t>::max());
  auto start =
      gcs_->Call<rpc::PollReply>([first](gcs::GcsClient& gcs, auto done) { gcs.Poll(first, std::move(done)); });
  if (!start.ok()) return start.status();
  watch->sequence = start->last_sequence();
  watch->incarnation = start->gcs_incarnation();
  int64_t id;
  {
    absl::MutexLock lock(&watch_mu_);
    id = next_watch_++;
    node_watches_[id] = watch;
  }
  watch->thread = std::thread([this, w = watch.get()] { PollNodes(w); });
  return id;
}

void GcsClusterState::PollNodes(NodeWatch* w) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    rpc::PollRequest req;
    req.add_channels(rpc::PubMessage::NODE_INFO);
    req.set_after_sequence(w->sequence);
    req.set_gcs_incarnation(w->incarnation);
    req.set_max_wait_ms(kNodePollWaitMs);
    std::shared_ptr<gcs::SyncGcsClient::Pending<rpc::PollReply>> poll;
    {
      absl::MutexLock lock(&w->mu);
      if (w->stopping) return;
      poll = w->held =
          gcs_->Begin<rpc::PollReply>([req](gcs::GcsClient& gcs, auto done) { gcs.Poll(req, std::move(done)); });
    }
    absl::StatusOr<rpc::PollReply> polled = poll->Wait(absl::Milliseconds(kNodePollWaitMs) + kPollSlack);
    {
      absl::MutexLock lock(&w->mu);
      w->held = nullptr;
      if (w->stopping) return;
    }
    if (!polled.ok()) {  // the GCS is away: try again, a little later each time
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
      continue;
    }
    backoff = absl::Milliseconds(100);
    const rpc::PollReply& reply = *polled;
    const absl::Time now = absl::Now();
    const bool restarted = reply.gcs_incarnation() != w->incarnation;
    w->incarnation = reply.gcs_incarnation();
    w->sequence = reply.last_sequence();
    if (reply.gap() || restarted) {
      // Events were lost: the table as it stands, one event per node.
      auto nodes = core_->GetAllNodes();
      if (nodes.ok()) {
        for (const NodeData& n : *nodes) w->on_event(NodeEvent{KindOf(n), n, now});
      }
      continue;
    }
    for (const auto& m : reply.messages()) {
      if (!m.has_node_info()) continue;
      NodeData d = NodeDataFromProto(m.node_info());
      w->on_event(NodeEvent{KindOf(d), std::move(d), now});
    }
  }
}

void GcsClusterState::UnwatchNodes(int64_t id) {
  std::shared_ptr<NodeWatch> w;
  {
    absl::MutexLock lock(&watch_mu_);
    auto it = node_watches_.find(id);
    if (it == node_watches_.end()) return;
    w = it->second;
    node_watches_.erase(it);
  }
  {
    absl::MutexLock lock(&w->mu);
    w->stopping = true;
    if (w->held != nullptr) w->held->Cancel();
  }
  if (w->thread.joinable() && w->thread.get_id() != std::this_thread::get_id()) w->thread.join();
  if (w->thread.joinable()) w->thread.detach();  // unwatched from its own callback
}

}  // namespace manta::core
