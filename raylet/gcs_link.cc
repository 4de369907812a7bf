#include "raylet/gcs_link.h"

#include <algorithm>
#include <functional>

#include "common/id.h"
#include "raylet/raylet_log.h"

namespace manta::raylet {

GcsLink::GcsLink(GcsLinkOptions options, EventLoop* loop, gcs::GcsClient* gcs, Host* host, Clock clock)
    : options_(std::move(options)), loop_(loop), gcs_(gcs), host_(host), clock_(std::move(clock)) {
  cluster_id_ = options_.cluster_id;
}

void GcsLink::Start() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  started_ = clock_();
  Register();
}

void GcsLink::Stop() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  stopped_ = true;
  liveness_timer_.reset();
  retry_timer_.reset();
  resubscribe_timer_.reset();
  report_retry_timer_.reset();
  stream_watchdog_.reset();
  refresh_timer_.reset();
  stream_.reset();
}

// ---------------------------------------------------------------- registration

void GcsLink::Register() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (registering_ || stopped_) return;
  registering_ = true;
  rpc::RegisterNodeRequest req;
  *req.mutable_node_info() = host_->NodeInfo();
  req.set_cluster_id(cluster_id_);
  gcs_->RegisterNode(req, [this](const absl::Status& s, rpc::RegisterNodeReply&& reply) {
    registering_ = false;
    OnRegisterReply(s, reply);
  });
}

void GcsLink::OnRegisterReply(const absl::Status& s, const rpc::RegisterNodeReply& reply) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (stopped_) return;
  const std::string refused = "the GCS at " + options_.gcs_address + " refused this node: ";
  if (!s.ok()) {
    switch (s.code()) {
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kDeadlineExceeded:
        return RetryRegistration(s);
      case absl::StatusCode::kFailedPrecondition:
        // Refused after having joined: this node was declared dead, or the
        // GCS now serves another cluster. Asked which, below.
        if (registered_) return RejoinUnlessForeign(std::string(s.message()));
        return host_->Exit(refused + std::string(s.message()));
      case absl::StatusCode::kUnauthenticated:
        return host_->Exit("the GCS at " + options_.gcs_address + " refused the cluster token (" +
                           std::string(s.message()) + ")");
      default:
        return host_->Exit(refused + std::string(s.message()));
    }
  }
  const bool first = !registered_;
  registered_ = true;
  last_report_ = clock_();  // as good as a report: no keepalive due yet
  cluster_id_ = reply.cluster_id();
  gcs_incarnation_ = reply.gcs_incarnation();
  Contact();
  Log()->info("registered with the GCS at {} cluster_id={}", options_.gcs_address, ToHex(cluster_id_));
  host_->OnRegistered(first);
  if (first) {
    liveness_timer_ = loop_->RunEvery(options_.liveness_period, [this] { CheckLiveness(); });
    Subscribe();
  }
}

void GcsLink::RetryRegistration(const absl::Status& s) {
  const absl::Duration limit = registered_ ? options_.reconnect_timeout : options_.connect_timeout;
  const absl::Time since = registered_ ? last_contact_ : started_;
  if (clock_() - since > limit) {
    return host_->Exit("cannot reach the GCS at " + options_.gcs_address + " (" + std::string(s.message()) + ")");
  }
  retry_timer_ = loop_->RunAfter(options_.retry_delay, [this] { Register(); });
}

void GcsLink::RejoinUnlessForeign(const std::string& refusal) {
  gcs_->GetClusterId([this, refusal](const absl::Status& s, rpc::GetClusterIdReply&& reply) {
    if (stopped_) return;
    const std::string why = "the GCS at " + options_.gcs_address + " refused this node: " + refusal;
    if (!s.ok()) return RetryRegistration(s);
    if (reply.cluster_id() != cluster_id_) {
      return host_->Exit(why + " (it now serves cluster " + ToHex(reply.cluster_id()) + ")");
    }
    host_->Rejoin(why);
  });
}

void GcsLink::OnHealthCheck(const std::string& gcs_incarnation) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Contact();
  if (registered_ && !gcs_incarnation.empty() && gcs_incarnation != gcs_incarnation_) {
    Log()->info("the GCS restarted; registering again");
    Register();
  }
}

// ---------------------------------------------------------------- reports

void GcsLink::SendReport(std::function<void()> done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!registered_ || stopped_) return done();
  std::optional<rpc::ReportResourcesRequest> report = host_->Report();
  if (!report) return done();
  last_report_ = clock_();
  gcs_->ReportResources(*report, [this, done](const absl::Status& s, rpc::ReportResourcesReply&& reply) {
    done();
    if (stopped_) return;
    if (s.ok()) {
      Contact();
      if (!reply.known_node()) Register();
    } else {
      // Try again: the GCS must not keep a stale view of this node.
      Log()->warn("resource report failed: {}", s.ToString());
      report_retry_timer_ = loop_->RunAfter(options_.retry_delay, [this] { host_->RequestReport(); });
    }
  });
}

// ---------------------------------------------------------------- node events

void GcsLink::Subscribe() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (stopped_) return;
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.add_channels(rpc::PubMessage::NODE_RESOURCES);
  req.add_channels(rpc::PubMessage::WORKER);
  req.set_after_sequence(events_sequence_);
  req.set_gcs_incarnation(events_incarnation_);
  req.set_max_wait_ms(options_.events_wait_ms);
  req.set_subscriber_node_id(options_.node_id);
  stream_.reset();
  stream_ = gcs_->Subscribe(
      req, [this](rpc::PollReply&& reply) { OnNodeEvents(std::move(reply)); },
      [this](const absl::Status& s) { OnStreamEnd(s); });
  ArmWatchdog();
}

void GcsLink::ArmWatchdog() {
  // The GCS writes at least every wait: a longer silence is a stream lost on
  // a connection that never said so.
  const int wait_ms = options_.events_wait_ms > 0 ? std::min(options_.events_wait_ms, 30000) : 30000;
  const absl::Duration limit = Spread(absl::Milliseconds(wait_ms) + absl::Seconds(10));
  stream_watchdog_ = loop_->RunAfter(limit, [this, limit] {
    Log()->warn("no node events from the GCS for {}; subscribing again", absl::FormatDuration(limit));
    Subscribe();
  });
}

absl::Duration GcsLink::Spread(absl::Duration d) const {
  const double share = static_cast<double>(std::hash<std::string>{}(options_.node_id) % 1000) / 2000.0;
  return d + d * share;
}

void GcsLink::OnStreamEnd(const absl::Status& s) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (stopped_) return;
  stream_.reset();
  stream_watchdog_.reset();
  resubscribe_timer_ = loop_->RunAfter(Spread(absl::Seconds(1)), [this] { Subscribe(); });
  if (!s.ok()) Log()->debug("node events stream ended: {}", s.ToString());
}

void GcsLink::OnNodeEvents(rpc::PollReply&& reply) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (stopped_) return;
  Contact();
  ArmWatchdog();
  if (registered_ && reply.gcs_incarnation() != gcs_incarnation_) {
    Log()->info("the GCS restarted; registering again");
    Register();
  }
  SendKeepaliveIfDue();
  events_incarnation_ = reply.gcs_incarnation();
  events_sequence_ = reply.last_sequence();
  if (refreshing_) {
    // Worker deaths are not in the node table being read: applied now,
    // lest they go with replies it replaces, and what they freed used (the
    // view is still the one before the re-read).
    bool changed = false;
    for (const auto& m : reply.messages()) {
      if (m.has_worker_death()) changed |= host_->OnWorkerDeath(m.worker_death());
    }
    if (changed) host_->OnClusterChanged();
    held_replies_.push_back(std::move(reply));
    return;
  }
  bool changed = false;
  if (!Apply(reply, &changed)) return;
  if (reply.gap()) return RefreshNodes();
  if (changed) host_->OnClusterChanged();
}

void GcsLink::SendKeepaliveIfDue() {
  if (!registered_ || keepalive_in_flight_ || clock_() - last_report_ < options_.keepalive) return;
  keepalive_in_flight_ = true;
  last_report_ = clock_();
  // Only a sign of life: the GCS takes no view or demand from it.
  rpc::ReportResourcesRequest report;
  report.mutable_resources()->set_node_id(options_.node_id);
  report.set_keepalive(true);
  gcs_->ReportResources(report, [this](const absl::Status& s, rpc::ReportResourcesReply&& reply) {
    keepalive_in_flight_ = false;
    if (stopped_ || !s.ok()) return;
    Contact();
    if (!reply.known_node()) Register();
  });
}

bool GcsLink::Apply(const rpc::PollReply& reply, bool* changed) {
  for (const auto& m : reply.messages()) {
    if (m.has_node_info()) *changed |= host_->OnNodeInfo(m.node_info());
    if (m.has_node_resources()) *changed |= host_->OnNodeResources(m.node_resources());
    if (m.has_worker_death()) *changed |= host_->OnWorkerDeath(m.worker_death());
    if (stopped_) return false;  // the node learned it is dead
  }
  return true;
}

void GcsLink::RefreshNodes() {
  refreshing_ = true;
  // What arrived so far is older than the table about to be read.
  held_replies_.clear();
  auto retry = [this] {
    refresh_timer_ = loop_->RunAfter(Spread(refresh_retry_), [this] { RefreshNodes(); });
    refresh_retry_ = std::min(refresh_retry_ * 2, absl::Seconds(16));
  };
  gcs_->GetAllNodeInfo({}, [this, retry](const absl::Status& s, rpc::GetAllNodeInfoReply&& nodes) {
    if (stopped_) return;
    if (!s.ok()) return retry();
    gcs_->GetClusterResources(
        rpc::GetClusterResourcesRequest(),
        [this, retry, nodes = std::move(nodes)](const absl::Status& s, rpc::GetClusterResourcesReply&& resources) {
          if (stopped_) return;
          if (!s.ok()) return retry();
          refresh_retry_ = absl::Seconds(1);
          host_->OnNodesReset();
          for (const auto& n : nodes.nodes()) host_->OnNodeInfo(n);
          for (const auto& r : resources.nodes()) host_->OnNodeResources(r);
          FinishRefresh();
        });
  });
}

void GcsLink::FinishRefresh() {
  refreshing_ = false;
  std::vector<rpc::PollReply> held = std::move(held_replies_);
  held_replies_.clear();
  bool changed = true;  // the reset
  for (const rpc::PollReply& reply : held) {
    if (!Apply(reply, &changed)) return;
    if (reply.gap()) {
      host_->OnClusterChanged();
      return RefreshNodes();  // whatever came after is read with the table
    }
  }
  host_->OnClusterChanged();
}

// ---------------------------------------------------------------- liveness

void GcsLink::CheckLiveness() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  const absl::Duration quiet = clock_() - last_contact_;
  if (quiet > options_.reconnect_timeout) {
    return host_->Exit("the GCS at " + options_.gcs_address + " has been unreachable for " +
                       absl::FormatDuration(absl::Trunc(quiet, absl::Seconds(1))));
  }
  if (quiet < options_.quiet_before_ping || pinging_) return;
  pinging_ = true;
  gcs_->GetClusterId([this](const absl::Status& s, rpc::GetClusterIdReply&& reply) {
    pinging_ = false;
    if (stopped_ || !s.ok()) return;
    Contact();
    if (reply.cluster_id() != cluster_id_) {
      return host_->Exit("the GCS at " + options_.gcs_address + " now serves another cluster (" +
                         ToHex(reply.cluster_id()) + ")");
    }
    // Health checks stopped coming although the GCS answers: it may have
    // declared this node dead (e.g. it was paused or cut off). Registering
    // again is idempotent and is refused for a dead node, which makes this
    // raylet rejoin as a new one.
    Register();
  });
}

}  // namespace manta::raylet
