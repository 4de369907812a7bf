#include "dashboard/gcs_job_store.h"

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/logging.h"
#include "common/package_name.h"
#include "common/rpc/reply_cache.h"
#include "common/status.h"
#include "gcs/client/sync_gcs_client.h"

namespace manta::dashboard {

namespace {
using gcs::GcsClient;
}  // namespace

class GcsJobStore::Impl {
 public:
  Impl(const std::string& address, std::string token, absl::Duration timeout)
      : address_(address), timeout_(timeout), gcs_(gcs::SyncGcsClient::Connect(address, std::move(token), timeout)) {}

  // One call, waited for; its error says what was being done.
  template <typename Reply>
  absl::StatusOr<Reply> Call(const char* what, gcs::SyncGcsClient::Start<Reply> start) {
    absl::StatusOr<Reply> reply = gcs_->Call<Reply>(std::move(start));
    if (reply.ok()) return reply;
    absl::Status status = reply.status();
    if (absl::IsDeadlineExceeded(status)) status = absl::UnavailableError(status.message());
    return absl::Status(status.code(), absl::StrCat("GCS at ", address_, ": ", what, ": ", status.message()));
  }

  absl::StatusOr<bool> Put(const JobRecord& job, bool overwrite) {
    rpc::KvPutRequest req;
    req.set_ns(kJobNamespace);
    req.set_key(job.submission_id);
    req.set_value(ToStoredJson(job));
    req.set_overwrite(overwrite);
    ASSIGN_OR_RETURN(rpc::KvPutReply reply, Call<rpc::KvPutReply>("storing job record", [req](GcsClient& c, auto done) {
                       c.KvPut(req, std::move(done));
                     }));
    return reply.added();
  }

  absl::StatusOr<std::vector<JobRecord>> List() {
    rpc::KvKeysRequest keys_req;
    keys_req.set_ns(kJobNamespace);
    ASSIGN_OR_RETURN(rpc::KvKeysReply keys,
                     Call<rpc::KvKeysReply>("listing job records", [keys_req](GcsClient& c, auto done) {
                       c.KvKeys(keys_req, std::move(done));
                     }));
    std::vector<JobRecord> out;
    for (const std::string& key : keys.keys()) {
      rpc::KvGetRequest req;
      req.set_ns(kJobNamespace);
      req.set_key(key);
      ASSIGN_OR_RETURN(rpc::KvGetReply reply,
                       Call<rpc::KvGetReply>("reading a job record",
                                             [req](GcsClient& c, auto done) { c.KvGet(req, std::move(done)); }));
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

  absl::Status PublishPackage(const std::string& name, const std::string& data) {
    // Asked first: the GCS hashes what it stores, once per package is enough.
    rpc::KvKeysRequest keys;
    keys.set_ns(kPackageKvNamespace);
    keys.set_prefix(name);
    ASSIGN_OR_RETURN(rpc::KvKeysReply there,
                     Call<rpc::KvKeysReply>("looking up a working_dir package",
                                            [keys](GcsClient& c, auto done) { c.KvKeys(keys, std::move(done)); }));
    for (const std::string& k : there.keys()) {
      if (k == name) return absl::OkStatus();
    }
    rpc::KvPutRequest req;
    req.set_ns(kPackageKvNamespace);
    req.set_key(name);
    req.set_value(data);
    req.set_overwrite(false);
    req.set_request_id(rpc::NewRequestId());
    return Call<rpc::KvPutReply>("publishing a working_dir package",
                                 [req](GcsClient& c, auto done) { c.KvPut(req, std::move(done)); })
        .status();
  }

  absl::Status Delete(const std::string& id) {
    rpc::KvDelRequest req;
    req.set_ns(kJobNamespace);
    req.set_key(id);
    return Call<rpc::KvDelReply>("deleting a job record",
                                 [req](GcsClient& c, auto done) { c.KvDel(req, std::move(done)); })
        .status();
  }

  absl::StatusOr<HeadNode> GetHeadNode() {
    rpc::GetAllNodeInfoRequest req;
    req.set_filter_alive(true);
    ASSIGN_OR_RETURN(rpc::GetAllNodeInfoReply reply,
                     Call<rpc::GetAllNodeInfoReply>("reading the node table", [req](GcsClient& c, auto done) {
                       c.GetAllNodeInfo(req, std::move(done));
                     }));
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
    ASSIGN_OR_RETURN(
        rpc::GetPlacementGroupReply reply,
        Call<rpc::GetPlacementGroupReply>("reading an entrypoint reservation", [req](GcsClient& c, auto done) {
          c.GetPlacementGroup(req, std::move(done));
        }));
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
    auto reply = Call<rpc::CreatePlacementGroupReply>("reserving entrypoint resources", [req](GcsClient& c, auto done) {
      c.CreatePlacementGroup(req, std::move(done));
    });
    // Created meanwhile by an earlier attempt whose reply was lost.
    if (absl::IsAlreadyExists(reply.status())) return ReserveOnHeadExisting(id);
    if (!reply.ok()) return reply.status();
    return reply->placement_group().state() == rpc::PlacementGroupInfo::CREATED;
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
    auto removed = Call<rpc::RemovePlacementGroupReply>(
        "releasing entrypoint resources",
        [req, timeout = timeout_](GcsClient& c, auto done) { c.RemovePlacementGroup(req, timeout, std::move(done)); });
    if (!removed.ok() && !absl::IsNotFound(removed.status())) return removed.status();
    return absl::OkStatus();
  }

 private:
  const std::string address_;
  const absl::Duration timeout_;
  std::unique_ptr<gcs::SyncGcsClient> gcs_;
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
absl::Status GcsJobStore::PublishPackage(const std::string& name, const std::string& data) {
  return impl_->PublishPackage(name, data);
}

}  // namespace manta::dashboard
