#include "dashboard/gcs_job_store.h"

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"

namespace manta::dashboard {

class GcsJobStore::Impl {
 public:
  Impl(const std::string& address, std::string token, absl::Duration timeout)
      : address_(address),
        token_(std::move(token)),
        timeout_(timeout),
        channel_(rpc::MakeChannel(address)),
        kv_(rpc::InternalKvGcsService::NewStub(channel_)),
        nodes_(rpc::NodeInfoGcsService::NewStub(channel_)),
        groups_(rpc::PlacementGroupGcsService::NewStub(channel_)) {}

  absl::Status Error(const char* what, const grpc::Status& s) const {
    absl::Status status = rpc::ToAbslStatus(s);
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) status = absl::UnavailableError(s.error_message());
    return absl::Status(status.code(), absl::StrCat("GCS at ", address_, ": ", what, ": ", status.message()));
  }

  absl::StatusOr<bool> Put(const JobRecord& job, bool overwrite) {
    rpc::KvPutRequest req;
    req.set_ns(kJobNamespace);
    req.set_key(job.submission_id);
    req.set_value(ToStoredJson(job));
    req.set_overwrite(overwrite);
    rpc::KvPutReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = kv_->Put(&ctx, req, &reply);
    if (!s.ok()) return Error("storing job record", s);
    return reply.added();
  }

  absl::StatusOr<std::vector<JobRecord>> List() {
    rpc::KvKeysRequest keys_req;
    keys_req.set_ns(kJobNamespace);
    rpc::KvKeysReply keys;
    {
      grpc::ClientContext ctx;
      rpc::PrepareContext(&ctx, token_, timeout_);
      grpc::Status s = kv_->Keys(&ctx, keys_req, &keys);
      if (!s.ok()) return Error("listing job records", s);
    }
    std::vector<JobRecord> out;
    for (const std::string& key : keys.keys()) {
      rpc::KvGetRequest req;
      req.set_ns(kJobNamespace);
      req.set_key(key);
      rpc::KvGetReply reply;
      grpc::ClientContext ctx;
      rpc::PrepareContext(&ctx, token_, timeout_);
      grpc::Status s = kv_->Get(&ctx, req, &reply);
      if (!s.ok()) return Error("reading a job record", s);
      if (!reply.found()) continue;  // deleted meanwhile
      auto job = FromStoredJson(reply.value());
      if (!job.ok()) {
        Logger("dashboard")->warn("skipping job record key={}: {}", key, std::string(job.status().message()));
        continue;
      }
      out.push_back(std::move(*job));
    }
    return out;
  }

  absl::Status Delete(const std::string& id) {
    rpc::KvDelRequest req;
    req.set_ns(kJobNamespace);
    req.set_key(id);
    rpc::KvDelReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = kv_->Del(&ctx, req, &reply);
    if (!s.ok()) return Error("deleting a job record", s);
    return absl::OkStatus();
  }

  absl::StatusOr<HeadNode> GetHeadNode() {
    rpc::GetAllNodeInfoRequest req;
    req.set_filter_alive(true);
    rpc::GetAllNodeInfoReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = nodes_->GetAllNodeInfo(&ctx, req, &reply);
    if (!s.ok()) return Error("reading the node table", s);
    for (const rpc::NodeInfo& n : reply.nodes()) {
      if (!n.is_head() || n.state() != rpc::NodeInfo::ALIVE) continue;
      HeadNode head;
      head.node_ip = n.node_ip();
      head.resources_total = std::map<std::string, double>(n.resources_total().begin(), n.resources_total().end());
      return head;
    }
    return absl::NotFoundError("no alive head node is registered with the GCS");
  }

  // The job's reservation group, by its name; NotFound when there is none
  // or it was removed.
  absl::StatusOr<rpc::PlacementGroupInfo> FindReservation(const std::string& id) {
    rpc::GetPlacementGroupRequest req;
    req.set_name(EntrypointReservationName(id));
    req.set_ray_namespace(kEntrypointNamespace);
    rpc::GetPlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = groups_->GetPlacementGroup(&ctx, req, &reply);
    if (!s.ok()) return Error("reading an entrypoint reservation", s);
    if (reply.placement_group().state() == rpc::PlacementGroupInfo::REMOVED) {
      return absl::NotFoundError("the entrypoint reservation was removed");
    }
    return reply.placement_group();
  }

  absl::StatusOr<bool> ReserveOnHead(const std::string& id, const std::map<std::string, double>& demand) {
    auto found = FindReservation(id);
    if (found.ok()) return found->state() == rpc::PlacementGroupInfo::CREATED;
    if (!absl::IsNotFound(found.status())) return found.status();
    rpc::CreatePlacementGroupRequest req;
    rpc::PlacementGroupInfo* spec = req.mutable_spec();
    spec->set_placement_group_id(PlacementGroupId::FromRandom().Binary());
    spec->set_name(EntrypointReservationName(id));
    spec->set_ray_namespace(kEntrypointNamespace);
    spec->set_strategy(rpc::PlacementGroupInfo::STRICT_PACK);
    spec->set_detached(true);  // the dashboard is not a job; it removes the group itself
    rpc::Bundle* bundle = spec->add_bundles();
    bundle->set_index(0);
    for (const auto& [name, quantity] : demand) (*bundle->mutable_resources())[name] = quantity;
    (*bundle->mutable_resources())[kHeadNodeResource] = 0.0001;  // on the head node only
    rpc::CreatePlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = groups_->CreatePlacementGroup(&ctx, req, &reply);
    // Created meanwhile by an earlier attempt whose reply was lost.
    if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return ReserveOnHeadExisting(id);
    if (!s.ok()) return Error("reserving entrypoint resources", s);
    return reply.placement_group().state() == rpc::PlacementGroupInfo::CREATED;
  }

  absl::StatusOr<bool> ReserveOnHeadExisting(const std::string& id) {
    ASSIGN_OR_RETURN(rpc::PlacementGroupInfo group, FindReservation(id));
    return group.state() == rpc::PlacementGroupInfo::CREATED;
  }

  absl::Status ReleaseOnHead(const std::string& id) {
    auto found = FindReservation(id);
    if (absl::IsNotFound(found.status())) return absl::OkStatus();
    if (!found.ok()) return found.status();
    rpc::RemovePlacementGroupRequest req;
    req.set_placement_group_id(found->placement_group_id());
    rpc::RemovePlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token_, timeout_);
    grpc::Status s = groups_->RemovePlacementGroup(&ctx, req, &reply);
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) return Error("releasing entrypoint resources", s);
    return absl::OkStatus();
  }

 private:
  const std::string address_;
  const std::string token_;
  const absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::InternalKvGcsService::Stub> kv_;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes_;
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> groups_;
};

GcsJobStore::GcsJobStore(const std::string& gcs_address, std::string token, absl::Duration timeout)
    : impl_(std::make_unique<Impl>(gcs_address, std::move(token), timeout)) {}
GcsJobStore::~GcsJobStore() = default;

absl::Status GcsJobStore::Put(const JobRecord& job) { return impl_->Put(job, true).status(); }

absl::Status GcsJobStore::Create(const JobRecord& job) {
  auto added = impl_->Put(job, false);
  if (!added.ok()) return added.status();
  if (!*added) return absl::AlreadyExistsError(absl::StrCat("job ", job.submission_id, " already exists"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobRecord>> GcsJobStore::List() { return impl_->List(); }
absl::Status GcsJobStore::Delete(const std::string& id) { return impl_->Delete(id); }
absl::StatusOr<HeadNode> GcsJobStore::GetHeadNode() { return impl_->GetHeadNode(); }
absl::StatusOr<bool> GcsJobStore::ReserveOnHead(const std::string& id, const std::map<std::string, double>& demand) {
  return impl_->ReserveOnHead(id, demand);
}
absl::Status GcsJobStore::ReleaseOnHead(const std::string& id) { return impl_->ReleaseOnHead(id); }

}  // namespace manta::dashboard
