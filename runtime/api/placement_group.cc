// The placement group API: a typed layer over the core worker's GCS calls.
#include "manta/placement_group.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "manta/errors.h"

namespace manta {
namespace {

// The core worker, or FailedPrecondition before Init.
absl::StatusOr<core::CoreWorker*> Core() {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) {
    return absl::FailedPreconditionError("manta::Init() has not been called (or manta::Shutdown() has)");
  }
  return core;
}

// Placement-group failures are not about a task's value: always a plain
// manta::Error carrying the status (never a TaskError subclass).
void ThrowIfFailed(const absl::Status& status) {
  if (!status.ok()) throw Error(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> v) {
  ThrowIfFailed(v.status());
  return *std::move(v);
}

absl::StatusOr<PlacementGroupId> ParseId(const PlacementGroup& group) {
  auto id = PlacementGroupId::FromBinary(group.ID());
  if (!id.ok()) return absl::InvalidArgumentError("not a placement group handle (use CreatePlacementGroup)");
  return *id;
}

absl::StatusOr<core::PlacementGroupData> Fetch(const PlacementGroup& group) {
  auto id = ParseId(group);
  if (!id.ok()) return id.status();
  auto core = Core();
  if (!core.ok()) return core.status();
  return (*core)->GetPlacementGroup(*id);
}

}  // namespace

PlacementStrategy ParsePlacementStrategy(const std::string& s) {
  if (s == "PACK") return PlacementStrategy::kPack;
  if (s == "SPREAD") return PlacementStrategy::kSpread;
  if (s == "STRICT_PACK") return PlacementStrategy::kStrictPack;
  if (s == "STRICT_SPREAD") return PlacementStrategy::kStrictSpread;
  throw Error(absl::InvalidArgumentError(
      absl::StrCat("unknown placement strategy '", s, "' (PACK, SPREAD, STRICT_PACK or STRICT_SPREAD)")));
}

std::string PlacementStrategyName(PlacementStrategy s) {
  switch (s) {
    case PlacementStrategy::kPack:
      return "PACK";
    case PlacementStrategy::kSpread:
      return "SPREAD";
    case PlacementStrategy::kStrictPack:
      return "STRICT_PACK";
    case PlacementStrategy::kStrictSpread:
      return "STRICT_SPREAD";
  }
  return "UNKNOWN";
}

std::string PlacementGroup::Hex() const { return ToHex(id_); }

bool PlacementGroup::Wait(absl::Duration timeout) const {
  PlacementGroupId id = ValueOrThrow(ParseId(*this));
  core::CoreWorker* core = ValueOrThrow(Core());
  core::PlacementGroupData data = ValueOrThrow(core->WaitPlacementGroupReady(id, timeout));
  if (data.state == PlacementGroupState::kRemoved) {
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "placement group ", id.Hex(), " was removed", data.state_message.empty() ? "" : ": ", data.state_message)));
  }
  return data.state == PlacementGroupState::kCreated;
}

PlacementGroupState PlacementGroup::State() const { return ValueOrThrow(Fetch(*this)).state; }

std::string PlacementGroup::StateMessage() const { return ValueOrThrow(Fetch(*this)).state_message; }

bool PlacementGroup::Infeasible() const { return ValueOrThrow(Fetch(*this)).infeasible; }

std::vector<BundleLocation> PlacementGroup::Bundles() const {
  core::PlacementGroupData data = ValueOrThrow(Fetch(*this));
  // One read of the node table for every bundle.
  std::vector<core::NodeData> nodes;
  bool placed = false;
  for (const auto& b : data.bundles) placed = placed || !b.node_id.IsNil();
  if (placed) nodes = ValueOrThrow(ValueOrThrow(Core())->GetAllNodes());
  std::vector<BundleLocation> out;
  out.reserve(data.bundles.size());
  for (const core::BundleData& b : data.bundles) {
    BundleLocation loc;
    loc.index = b.index;
    if (!b.node_id.IsNil()) {
      loc.node_id = b.node_id.Hex();
      for (const core::NodeData& n : nodes) {
        if (n.node_id != b.node_id) continue;
        loc.node_ip = n.ip;
        loc.node_labels = n.labels;
      }
    }
    out.push_back(std::move(loc));
  }
  return out;
}

absl::StatusOr<PlacementGroup> TryCreatePlacementGroup(const PlacementGroupOptions& options) {
  auto core = Core();
  if (!core.ok()) return core.status();
  core::PlacementGroupData spec;
  spec.id = PlacementGroupId::FromRandom();
  spec.name = options.name;
  spec.ray_namespace = options.ray_namespace;
  spec.strategy = options.strategy;
  spec.detached = options.detached;
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    core::BundleData b;
    b.index = static_cast<int>(i);
    b.resources = options.bundles[i].resources;
    b.label_selector = options.bundles[i].label_selector;
    spec.bundles.push_back(std::move(b));
  }
  auto created = (*core)->CreatePlacementGroup(spec);
  if (!created.ok()) {
    return absl::Status(created.status().code(), absl::StrCat("CreatePlacementGroup: ", created.status().message()));
  }
  return PlacementGroup(spec.id.Binary());
}

PlacementGroup CreatePlacementGroup(const PlacementGroupOptions& options) {
  return ValueOrThrow(TryCreatePlacementGroup(options));
}

absl::Status TryRemovePlacementGroup(const PlacementGroup& group) {
  auto id = ParseId(group);
  if (!id.ok()) return id.status();
  auto core = Core();
  if (!core.ok()) return core.status();
  absl::Status s = (*core)->RemovePlacementGroup(*id);
  if (absl::IsNotFound(s)) return absl::OkStatus();  // gone already
  return s;
}

void RemovePlacementGroup(const PlacementGroup& group) { ThrowIfFailed(TryRemovePlacementGroup(group)); }

absl::StatusOr<PlacementGroup> TryGetPlacementGroup(const std::string& name, const std::string& ray_namespace) {
  auto core = Core();
  if (!core.ok()) return core.status();
  auto data = (*core)->GetNamedPlacementGroup(name, ray_namespace);
  if (!data.ok()) return data.status();
  return PlacementGroup(data->id.Binary());
}

PlacementGroup GetPlacementGroup(const std::string& name, const std::string& ray_namespace) {
  return ValueOrThrow(TryGetPlacementGroup(name, ray_namespace));
}

}  // namespace manta
