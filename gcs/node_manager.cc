#include "gcs/node_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/resources.h"
#include "common/tpu.h"
#include "common/utf8.h"
#include "google/protobuf/util/message_differencer.h"

namespace manta::gcs {
namespace {

absl::Status ValidateLabel(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > 253) return absl::InvalidArgumentError("label key must be 1 to 253 characters");
  if (value.size() > 1024) return absl::InvalidArgumentError("label '" + key + "' value is too long");
  if (auto s = tpu::ValidateTpuLabel(key, value); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("label '", key, "': ", s.message()));
  }
  return absl::OkStatus();
}

// The earlier of two drain deadlines, where 0 means none (the latest).
int64_t EarlierDeadline(int64_t a, int64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

absl::Status ValidateDrainRequest(const rpc::DrainNodeRequest& request, int64_t now_ms) {
  if (!NodeId::FromBinary(request.node_id()).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_id must be ", NodeId::kSize, " bytes, got ", request.node_id().size()));
  }
  const std::string& reason = request.reason();
  if (reason.empty()) return absl::InvalidArgumentError("reason is required (e.g. \"preemption\")");
  if (reason.size() > NodeManager::kMaxDrainReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason is ", reason.size(), " bytes; at most ", NodeManager::kMaxDrainReasonBytes));
  }
  if (ValidUtf8(reason) != reason) return absl::InvalidArgumentError("reason is not valid UTF-8");
  int64_t deadline = request.deadline_ms();
  if (deadline < 0) return absl::InvalidArgumentError(absl::StrCat("deadline_ms ", deadline, " is negative"));
  if (deadline != 0 && deadline < now_ms - NodeManager::kDeadlineSlackMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("deadline_ms ", deadline, " is ", now_ms - deadline, " ms in the past (0: no deadline)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeInfo(const rpc::NodeInfo& info) {
  if (!NodeId::FromBinary(info.node_id()).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("node_id must be ", NodeId::kSize, " bytes"));
  }
  if (info.node_ip().empty() || info.node_ip().size() > 255) {
    return absl::InvalidArgumentError("node_ip must be 1 to 255 characters");
  }
  if (info.node_manager_port() <= 0 || info.node_manager_port() > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("node_manager_port ", info.node_manager_port(), " is invalid"));
  }
  if (info.node_name().size() > 255) return absl::InvalidArgumentError("node_name is too long");
  if (!rpc::NodeInfo::State_IsValid(info.state())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown node state ", info.state()));
  }
  if (info.resources_total_size() > 1024) return absl::InvalidArgumentError("too many resources");
  std::map<std::string, double> resources(info.resources_total().begin(), info.resources_total().end());
  if (auto r = ResourceSet::FromMap(resources); !r.ok()) return r.status();
  if (info.labels_size() > 256) return absl::InvalidArgumentError("too many labels");
  if (info.drain_reason().size() > NodeManager::kMaxDrainReasonBytes) {
    return absl::InvalidArgumentError("drain_reason is too long");
  }
  if (info.drain_deadline_ms() < 0) return absl::InvalidArgumentError("drain_deadline_ms is negative");
  for (const auto& [k, v] : info.labels()) {
    if (auto s = ValidateLabel(k, v); !s.ok()) return s;
  }
  return absl::OkStatus();
}

NodeManager::NodeManager(Store* store, Publisher* publisher, ClusterId cluster_id, std::string incarnation,
                         RayletClientPool* raylets)
    : store_(store),
      publisher_(publisher),
      cluster_id_(cluster_id),
      incarnation_(std::move(incarnation)),
      raylets_(raylets) {}

absl::Status NodeManager::Initialize() {
  MANTA_CHECK_THREAD(thread_);
  auto rows = store_->ReadAll(kTable);
  if (!rows.ok()) return rows.status();
  std::vector<rpc::NodeInfo> dead;
  for (auto& [key, value] : *rows) {
    rpc::NodeInfo info;
    auto id = NodeId::FromBinary(key);
    // The listeners and the other managers take the entry's node_id as valid.
    if (!id.ok() || !info.ParseFromString(value) || info.node_id() != key) {
      Logger("gcs")->warn("skipping a corrupt node row in the store");
      continue;
    }
    if (info.state() == rpc::NodeInfo::ALIVE) {
      alive_[*id] = info;
    } else {
      dead.push_back(info);
    }
  }
  std::sort(dead.begin(), dead.end(),
            [](const rpc::NodeInfo& a, const rpc::NodeInfo& b) { return a.end_time_ms() < b.end_time_ms(); });
  for (auto& info : dead) {
    NodeId id = *NodeId::FromBinary(info.node_id());
    dead_order_.push_back(id);
    dead_[id] = std::move(info);
  }
  Logger("gcs")->info("recovered {} alive and {} dead nodes", alive_.size(), dead_.size());
  for (const auto& [id, info] : alive_) {
    for (auto& l : added_listeners_) l(info);
  }
  return absl::OkStatus();
}

void NodeManager::HandleGetClusterId(const rpc::GetClusterIdRequest&, rpc::GetClusterIdReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  reply->set_cluster_id(cluster_id_.Binary());
  reply->set_gcs_incarnation(incarnation_);
  done(absl::OkStatus());
}

void NodeManager::HandleRegisterNode(const rpc::RegisterNodeRequest& request, rpc::RegisterNodeReply* reply,
                                     rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  const rpc::NodeInfo& in = request.node_info();
  if (auto s = ValidateNodeInfo(in); !s.ok()) return done(s);
  if (!request.cluster_id().empty() && request.cluster_id() != cluster_id_.Binary()) {
    return done(absl::FailedPreconditionError(absl::StrCat("the node belongs to cluster ", ToHex(request.cluster_id()),
                                                           " but this GCS serves cluster ", cluster_id_.Hex())));
  }
  NodeId id = *NodeId::FromBinary(in.node_id());
  if (dead_.contains(id)) {
    return done(absl::FailedPreconditionError("node " + id.Hex() + " was marked dead; start a new raylet"));
  }
  reply->set_cluster_id(cluster_id_.Binary());
  reply->set_gcs_incarnation(incarnation_);
  if (auto r = registered_.find(id); r != registered_.end() && alive_.contains(id) &&
                                     google::protobuf::util::MessageDifferencer::Equals(r->second, in)) {
    // The same registration again, to this GCS: a retry whose reply was lost.
    return done(absl::OkStatus());
  }
  registered_[id] = in;
  rpc::NodeInfo info = in;
  info.set_state(rpc::NodeInfo::ALIVE);
  info.clear_end_time_ms();
  info.clear_death_reason();
  info.clear_death_expected();
  auto existing = alive_.find(id);
  bool reregister = existing != alive_.end();
  info.set_start_time_ms(reregister ? existing->second.start_time_ms() : NowUnixMs());
  // A drain outlives re-registration (e.g. after a GCS restart), whatever
  // the raylet says of itself.
  if (reregister && existing->second.draining()) {
    info.set_draining(true);
    info.set_drain_reason(existing->second.drain_reason());
    info.set_drain_deadline_ms(EarlierDeadline(existing->second.drain_deadline_ms(), in.drain_deadline_ms()));
  } else if (!in.draining()) {
    info.clear_drain_reason();
    info.clear_drain_deadline_ms();
  }
  alive_[id] = info;
  Logger("gcs")->info("{} node_id={} address={}:{} head={}", reregister ? "node re-registered" : "node registered",
                      id.Hex(), info.node_ip(), info.node_manager_port(), info.is_head());
  // Reply only once the entry is durable; tell everyone else at once.
  Persist(info, std::move(done));
  PublishNode(info);
  for (auto& l : added_listeners_) l(info);
}

void NodeManager::HandleUnregisterNode(const rpc::UnregisterNodeRequest& request, rpc::UnregisterNodeReply*,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(request.node_id());
  if (!id.ok()) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("node_id must be ", NodeId::kSize, " bytes, got ", request.node_id().size())));
  }
  if (!alive_.contains(*id)) {
    // Already dead or never known: unregistering twice is not an error.
    return done(absl::OkStatus());
  }
  std::string reason = request.reason().empty() ? "unregistered" : request.reason().substr(0, 1024);
  MarkNodeDead(*id, "ExpectedTermination: " + reason, /*expected=*/true);
  done(absl::OkStatus());
}

namespace {

// `info` without its maps (labels, resources).
void CopyBrief(const rpc::NodeInfo& info, rpc::NodeInfo* out) {
  out->set_node_id(info.node_id());
  out->set_node_ip(info.node_ip());
  out->set_node_name(info.node_name());
  out->set_is_head(info.is_head());
  out->set_state(info.state());
  out->set_start_time_ms(info.start_time_ms());
  out->set_end_time_ms(info.end_time_ms());
  out->set_death_reason(info.death_reason());
  out->set_death_expected(info.death_expected());
  out->set_pid(info.pid());
  out->set_draining(info.draining());
  out->set_drain_reason(info.drain_reason());
  out->set_drain_deadline_ms(info.drain_deadline_ms());
}

}  // namespace

void NodeManager::HandleGetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, rpc::GetAllNodeInfoReply* reply,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto add = [&](const rpc::NodeInfo& info) {
    if (request.brief()) {
      CopyBrief(info, reply->add_nodes());
    } else {
      *reply->add_nodes() = info;
    }
  };
  for (const auto& [id, info] : alive_) add(info);
  if (!request.filter_alive()) {
    for (const auto& id : dead_order_) add(dead_.at(id));
  }
  done(absl::OkStatus());
}

void NodeManager::ForEachNode(const std::function<void(const rpc::NodeInfo&)>& visit) const {
  MANTA_CHECK_THREAD(thread_);
  for (const auto& [id, info] : alive_) visit(info);
  for (const auto& [id, info] : dead_) visit(info);
}

void NodeManager::HandleDrainNode(const rpc::DrainNodeRequest& request, rpc::DrainNodeReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateDrainRequest(request, NowUnixMs()); !s.ok()) return done(s);
  NodeId id = *NodeId::FromBinary(request.node_id());
  if (auto d = dead_.find(id); d != dead_.end()) {
    reply->set_accepted(false);
    reply->set_rejection_reason(absl::StrCat("node ", id.Hex(), " is already dead (", d->second.death_reason(), ")"));
    return done(absl::OkStatus());
  }
  auto it = alive_.find(id);
  if (it == alive_.end()) return done(absl::NotFoundError("no node " + id.Hex() + " in the cluster"));
  rpc::NodeInfo& info = it->second;
  int64_t deadline = request.deadline_ms();
  if (info.draining()) deadline = EarlierDeadline(info.drain_deadline_ms(), deadline);
  reply->set_accepted(true);
  if (info.draining() && info.drain_reason() == request.reason() && info.drain_deadline_ms() == deadline) {
    // Nothing new (a retry whose reply was lost): already persisted and told.
    return done(absl::OkStatus());
  }
  info.set_draining(true);
  info.set_drain_reason(request.reason());
  info.set_drain_deadline_ms(deadline);
  Logger("gcs")->info("node draining node_id={} reason={} deadline_ms={}", id.Hex(), request.reason(), deadline);
  const rpc::NodeInfo published = info;  // listeners may change the table
  Persist(published, std::move(done));
  PublishNode(published);
  for (auto& l : draining_listeners_) l(published);
  SendDrainRaylet(published);
}

void NodeManager::SendDrainRaylet(const rpc::NodeInfo& info) {
  if (raylets_ == nullptr) return;
  NodeId id = *NodeId::FromBinary(info.node_id());
  rpc::DrainRayletRequest request;
  request.set_reason(info.drain_reason());
  request.set_deadline_ms(info.drain_deadline_ms());
  // Best effort: a raylet that misses it still sees its own NodeInfo, with
  // draining set, on the NODE_INFO channel.
  raylets_->DrainRaylet(id, RayletAddress(info), request, [id](const absl::Status& s, rpc::DrainRayletReply&&) {
    if (!s.ok()) Logger("gcs")->warn("DrainRaylet to node_id={} failed: {}", id.Hex(), s.ToString());
  });
}

void NodeManager::MarkNodeDead(const NodeId& node, const std::string& reason, bool expected) {
  MANTA_CHECK_THREAD(thread_);
  auto it = alive_.find(node);
  if (it == alive_.end()) return;
  rpc::NodeInfo info = std::move(it->second);
  alive_.erase(it);
  registered_.erase(node);
  info.set_state(rpc::NodeInfo::DEAD);
  info.set_end_time_ms(NowUnixMs());
  info.set_death_reason(reason);
  info.set_death_expected(expected);
  Logger("gcs")->log(expected ? spdlog::level::info : spdlog::level::warn,
                     "node dead node_id={} address={}:{} reason={}", node.Hex(), info.node_ip(),
                     info.node_manager_port(), reason);
  dead_[node] = info;
  dead_order_.push_back(node);
  Persist(info, nullptr);
  PublishNode(info);
  for (auto& l : dead_listeners_) l(info);
  TrimDeadNodes();
}

const rpc::NodeInfo* NodeManager::GetAliveNode(const NodeId& node) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = alive_.find(node);
  return it == alive_.end() ? nullptr : &it->second;
}

void NodeManager::Persist(const rpc::NodeInfo& info, rpc::Done done) {
  store_->Put(kTable, info.node_id(), info.SerializeAsString(), std::move(done));
}

void NodeManager::PublishNode(const rpc::NodeInfo& info) {
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::NODE_INFO);
  *msg.mutable_node_info() = info;
  publisher_->Publish(std::move(msg));
}

void NodeManager::TrimDeadNodes() {
  while (dead_order_.size() > kMaxDeadNodes) {
    NodeId oldest = dead_order_.front();
    dead_order_.pop_front();
    dead_.erase(oldest);
    store_->Delete(kTable, oldest.Binary(), nullptr);
  }
}

}  // namespace manta::gcs
