#include "gcs/resource_manager.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/placement_group_resources.h"
#include "common/resources.h"
#include "google/protobuf/util/message_differencer.h"

namespace manta::gcs {
namespace {

absl::Status ValidateResourceMap(const google::protobuf::Map<std::string, double>& m, const char* what) {
  if (m.size() > 1024) return absl::InvalidArgumentError(absl::StrCat(what, ": too many resources"));
  for (const auto& [name, value] : m) {
    if (auto s = ResourceSet::ValidateName(name); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
    }
    if (auto q = Quantity::FromDouble(value); !q.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": resource '", name, "': ", q.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ResourceManager::ResourceManager(const NodeManager* nodes, Publisher* publisher, RunAfter run_after)
    : nodes_(nodes), publisher_(publisher), run_after_(std::move(run_after)) {}

void ResourceManager::OnNodeAdded(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  NodeId id = *NodeId::FromBinary(info.node_id());
  Entry& e = view_[id];
  if (e.resources.node_id().empty()) {
    e.resources.set_node_id(info.node_id());
    *e.resources.mutable_available() = info.resources_total();
  }
  *e.resources.mutable_total() = info.resources_total();
}

void ResourceManager::OnNodeDead(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  view_.erase(*NodeId::FromBinary(info.node_id()));
}

void ResourceManager::HandleReportResources(const rpc::ReportResourcesRequest& request,
                                            rpc::ReportResourcesReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(request.resources().node_id());
  if (!id.ok()) {
    return done(absl::InvalidArgumentError(absl::StrCat("resources.node_id must be ", NodeId::kSize, " bytes, got ",
                                                        request.resources().node_id().size())));
  }
  if (auto s = ValidateResourceMap(request.resources().total(), "total"); !s.ok()) return done(s);
  if (auto s = ValidateResourceMap(request.resources().available(), "available"); !s.ok()) return done(s);
  if (request.demands_size() > 10000) return done(absl::InvalidArgumentError("too many demands"));
  for (const auto& d : request.demands()) {
    if (auto s = ValidateResourceMap(d.shape(), "demand"); !s.ok()) return done(s);
    if (d.num_ready_requests_queued() < 0 || d.num_infeasible_requests_queued() < 0) {
      return done(absl::InvalidArgumentError("a demand's queued request count is negative"));
    }
  }
  auto it = view_.find(*id);
  if (nodes_->GetAliveNode(*id) == nullptr || it == view_.end()) {
    reply->set_known_node(false);
    return done(absl::OkStatus());
  }
  reply->set_known_node(true);
  if (request.keepalive()) return done(absl::OkStatus());
  // Reports come one at a time: the demands are always the newest.
  Entry& e = it->second;
  e.demands.assign(request.demands().begin(), request.demands().end());
  Take(e, request.resources());
  PublishIfNew(e);
  done(absl::OkStatus());
}

bool ResourceManager::Apply(const rpc::NodeResources& resources) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(resources.node_id());
  if (!id.ok()) return false;
  auto it = view_.find(*id);
  if (it == view_.end() || nodes_->GetAliveNode(*id) == nullptr) return false;
  if (!ValidateResourceMap(resources.total(), "total").ok() ||
      !ValidateResourceMap(resources.available(), "available").ok()) {
    return false;
  }
  if (!Take(it->second, resources)) return false;
  if (!it->second.published) {
    applied_.push_back(*id);
    if (publish_timer_ == nullptr) publish_timer_ = run_after_(kPublishApplied, [this] { PublishApplied(); });
  }
  return true;
}

void ResourceManager::PublishApplied() {
  MANTA_CHECK_THREAD(thread_);
  auto fired = std::move(publish_timer_);
  std::vector<NodeId> nodes;
  nodes.swap(applied_);
  for (const NodeId& node : nodes) {
    auto it = view_.find(node);  // gone if the node died meanwhile
    if (it != view_.end()) PublishIfNew(it->second);
  }
}

bool ResourceManager::Take(Entry& e, const rpc::NodeResources& r) {
  if (r.version() < e.resources.version()) return false;
  // The same report again (a retry whose reply was lost): nothing new.
  if (r.version() == e.resources.version() && google::protobuf::util::MessageDifferencer::Equals(r, e.resources)) {
    return false;
  }
  e.resources = r;
  e.published = false;
  return true;
}

void ResourceManager::PublishIfNew(Entry& e) {
  if (e.published) return;
  e.published = true;
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::NODE_RESOURCES);
  msg.set_key(e.resources.node_id());  // a poll reply keeps only a node's newest
  *msg.mutable_node_resources() = e.resources;
  publisher_->Publish(std::move(msg));
}

namespace {

// The folded sums of a totals_only reply (see GetClusterResourcesRequest).
struct TotalsSum {
  struct Pair {
    double total = 0;
    double available = 0;
  };
  absl::flat_hash_map<std::string, Pair> plain, reserved;

  bool fold = true;

  void Add(const std::string& name, double q, double Pair::*field) {
    if (!fold) {
      plain[name].*field += q;
      return;
    }
    pg::SummaryName s = pg::SummarizeName(name);
    if (s.kind == pg::SummaryName::kPlain) plain[s.name].*field += q;
    if (s.kind == pg::SummaryName::kReserved) reserved[s.name].*field += q;
  }
  static void Fill(const absl::flat_hash_map<std::string, Pair>& sums, rpc::NodeResources* out) {
    for (const auto& [name, p] : sums) {
      (*out->mutable_total())[name] = p.total;
      (*out->mutable_available())[name] = p.available;
    }
  }
};

}  // namespace

void ResourceManager::HandleGetClusterResources(const rpc::GetClusterResourcesRequest& request,
                                                rpc::GetClusterResourcesReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  // Merge identical demand shapes from different nodes.
  std::map<std::map<std::string, double>, rpc::ResourceDemand> merged;
  TotalsSum sum;
  sum.fold = request.fold();
  for (const auto& [id, e] : view_) {
    if (request.totals_only()) {
      for (const auto& [name, q] : e.resources.total()) sum.Add(name, q, &TotalsSum::Pair::total);
      for (const auto& [name, q] : e.resources.available()) sum.Add(name, q, &TotalsSum::Pair::available);
    } else {
      *reply->add_nodes() = e.resources;
    }
    for (const auto& d : e.demands) {
      std::map<std::string, double> key(d.shape().begin(), d.shape().end());
      rpc::ResourceDemand& m = merged[key];
      if (m.shape().empty()) *m.mutable_shape() = d.shape();
      m.set_num_ready_requests_queued(m.num_ready_requests_queued() + d.num_ready_requests_queued());
      m.set_num_infeasible_requests_queued(m.num_infeasible_requests_queued() + d.num_infeasible_requests_queued());
    }
  }
  for (auto& [k, d] : merged) *reply->add_demands() = std::move(d);
  if (request.totals_only()) {
    sum.Fill(sum.plain, reply->mutable_totals());
    if (sum.fold) sum.Fill(sum.reserved, reply->mutable_reserved());
  }
  done(absl::OkStatus());
}

const rpc::NodeResources* ResourceManager::Get(const NodeId& node) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = view_.find(node);
  return it == view_.end() ? nullptr : &it->second.resources;
}

}  // namespace manta::gcs
