#include "raylet/bundle_manager.h"

#include <climits>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/label_selector.h"
#include "raylet/raylet_log.h"

namespace manta::raylet {
namespace {

absl::StatusOr<PlacementGroupId> ParseGroup(const std::string& binary) {
  auto group = PlacementGroupId::FromBinary(binary);
  if (!group.ok()) return absl::InvalidArgumentError(absl::StrCat("placement_group_id: ", group.status().message()));
  if (group->IsNil()) return absl::InvalidArgumentError("placement_group_id is nil");
  return *group;
}

absl::Status CheckIndices(const google::protobuf::RepeatedField<int32_t>& indices) {
  for (int index : indices) {
    if (index < 0) return absl::InvalidArgumentError(absl::StrCat("bundle index ", index, " is negative"));
  }
  return absl::OkStatus();
}

}  // namespace

BundleManager::BundleManager(BundleManagerOptions options, LocalResourceManager* local, LeaseManager* leases)
    : options_(std::move(options)), local_(local), leases_(leases) {}

void BundleManager::HandlePrepareBundles(const rpc::PrepareBundlesRequest& request, rpc::PrepareBundlesReply* reply,
                                         rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (request.bundles().empty()) return done(absl::InvalidArgumentError("no bundles to prepare"));
  std::vector<BundleSpec> specs;
  std::string mismatch;
  for (const rpc::Bundle& b : request.bundles()) {
    auto group = ParseGroup(b.placement_group_id());
    if (!group.ok()) return done(group.status());
    if (!specs.empty() && *group != specs[0].group) {
      return done(absl::InvalidArgumentError("the bundles belong to more than one placement group"));
    }
    std::string what = absl::StrCat("bundle ", b.index(), " of placement group ", group->Hex());
    if (!b.node_id().empty() && b.node_id() != options_.node_id.Binary()) {
      return done(absl::FailedPreconditionError(
          absl::StrCat(what, " is for node ", ToHex(b.node_id()), ", not this node ", options_.node_id.Hex())));
    }
    auto resources = ResourceSet::FromPairs(b.resources());
    if (!resources.ok()) {
      return done(absl::InvalidArgumentError(absl::StrCat(what, ": ", resources.status().message())));
    }
    auto selector =
        LabelSelector::Parse(std::map<std::string, std::string>(b.label_selector().begin(), b.label_selector().end()));
    if (!selector.ok()) return done(absl::InvalidArgumentError(absl::StrCat(what, ": ", selector.status().message())));
    if (mismatch.empty() && !selector->Matches(options_.labels)) {
      mismatch = what + ": this node's labels do not match its label selector";
    }
    specs.push_back({*group, b.index(), std::move(*resources)});
  }
  // Bad input is refused before a label mismatch is reported.
  if (auto s = local_->ValidateBundles(specs); !s.ok()) return done(s);
  if (leases_->draining()) {
    // Bundles already held here stay; nothing new is reserved.
    bool all_held = true;
    for (const BundleSpec& b : specs) all_held &= local_->bundles().count({b.group, b.index}) > 0;
    if (!all_held) {
      reply->set_success(false);
      reply->set_message("node " + options_.node_id.Hex() + " is draining");
      Log()->info("refused placement_group_id={}: the node is draining", specs[0].group.Hex());
      return done(absl::OkStatus());
    }
  }
  absl::Status s = mismatch.empty() ? local_->PrepareBundles(specs) : absl::OkStatus();
  if (!s.ok() && s.code() != absl::StatusCode::kResourceExhausted) return done(s);
  if (mismatch.empty() && s.ok()) {
    reply->set_success(true);
    if (request.commit()) {
      std::vector<int> indices;
      for (const BundleSpec& b : specs) indices.push_back(b.index);
      absl::Status committed = local_->CommitBundles(specs[0].group, indices);
      if (!committed.ok()) return done(committed);  // cannot happen: just prepared
      reply->set_committed(true);
      leases_->OnLocalResourcesChanged();
    }
  } else {
    reply->set_success(false);
    reply->set_message(mismatch.empty() ? std::string(s.message()) : mismatch);
    Log()->info("cannot prepare placement_group_id={}: {}", specs[0].group.Hex(), reply->message());
  }
  done(absl::OkStatus());
}

void BundleManager::HandleCommitBundles(const rpc::CommitBundlesRequest& request, rpc::CommitBundlesReply*,
                                        rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto group = ParseGroup(request.placement_group_id());
  if (!group.ok()) return done(group.status());
  if (auto s = CheckIndices(request.indices()); !s.ok()) return done(s);
  absl::Status s = local_->CommitBundles(*group, std::vector<int>(request.indices().begin(), request.indices().end()));
  if (s.ok()) leases_->OnLocalResourcesChanged();  // leases waiting for the group may run now
  done(s);
}

void BundleManager::HandleCancelBundles(const rpc::CancelBundlesRequest& request, rpc::CancelBundlesReply*,
                                        rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto group = ParseGroup(request.placement_group_id());
  if (!group.ok()) return done(group.status());
  if (auto s = CheckIndices(request.indices()); !s.ok()) return done(s);
  std::set<int> wanted(request.indices().begin(), request.indices().end());
  std::vector<BundleKey> keys;
  const auto& held = local_->bundles();
  for (auto it = held.lower_bound({*group, INT_MIN}); it != held.end() && it->first.first == *group; ++it) {
    if (wanted.empty() || wanted.count(it->first.second) > 0) keys.push_back(it->first);
  }
  Return(keys);
  done(absl::OkStatus());
}

void BundleManager::HandleReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& request,
                                               rpc::ReleaseUnusedBundlesReply*, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  std::set<BundleKey> in_use;
  for (const rpc::Bundle& b : request.bundles_in_use()) {
    auto group = ParseGroup(b.placement_group_id());
    if (!group.ok()) return done(group.status());
    if (b.index() < 0) {
      return done(absl::InvalidArgumentError(absl::StrCat("bundle index ", b.index(), " is negative")));
    }
    in_use.insert({*group, b.index()});
  }
  std::vector<BundleKey> unused;
  for (const auto& [key, bundle] : local_->bundles()) {
    if (in_use.count(key) == 0) unused.push_back(key);
  }
  Return(unused);
  done(absl::OkStatus());
}

void BundleManager::Return(const std::vector<BundleKey>& keys) {
  if (keys.empty()) return;
  // Keys come ordered by group (from the ordered map): one pass per group.
  for (size_t begin = 0; begin < keys.size();) {
    const PlacementGroupId group = keys[begin].first;
    size_t end = begin;
    std::set<int> returned;
    while (end < keys.size() && keys[end].first == group) returned.insert(keys[end++].second);
    size_t held = 0;
    const auto& all = local_->bundles();
    for (auto it = all.lower_bound({group, INT_MIN}); it != all.end() && it->first.first == group; ++it) ++held;
    bool whole_group = returned.size() == held;
    Log()->info("returning bundles placement_group_id={} count={}{}", group.Hex(), returned.size(),
                whole_group ? " (all held here)" : "");
    leases_->EndLeasesInGroup(
        group, [&](int index) { return index < 0 ? whole_group : returned.count(index) > 0; },
        "placement group " + group.Hex() + " was removed");
    begin = end;
  }
  local_->ReturnBundles(keys);
  leases_->OnLocalResourcesChanged();
}

}  // namespace manta::raylet
