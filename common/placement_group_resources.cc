#include "common/placement_group_resources.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace manta::pg {
namespace {

constexpr char kInfix[] = "_group_";

}  // namespace

std::string WildcardName(const std::string& base, const PlacementGroupId& group) {
  return absl::StrCat(base, kInfix, group.Hex());
}

std::string IndexedName(const std::string& base, int index, const PlacementGroupId& group) {
  return absl::StrCat(base, kInfix, index, "_", group.Hex());
}

ResourceSet BundleDemand(const ResourceSet& demand, const PlacementGroupId& group, int index) {
  ResourceSet out;
  for (const auto& [name, q] : demand.entries()) {
    out.Set(index < 0 ? WildcardName(name, group) : IndexedName(name, index, group), q);
  }
  out.Set(index < 0 ? WildcardName(kBundleMarker, group) : IndexedName(kBundleMarker, index, group),
          Quantity::FromUnits(kMarkerUnitsPerTask));
  return out;
}

ResourceSet CommittedResources(const ResourceSet& bundle, const PlacementGroupId& group, int index) {
  ResourceSet out;
  for (const auto& [name, q] : bundle.entries()) {
    out.Set(WildcardName(name, group), q);
    out.Set(IndexedName(name, index, group), q);
  }
  out.Set(WildcardName(kBundleMarker, group), Quantity::FromUnits(kMarkerUnitsPerBundle));
  out.Set(IndexedName(kBundleMarker, index, group), Quantity::FromUnits(kMarkerUnitsPerBundle));
  return out;
}

std::optional<GroupResource> ParseGroupResource(const std::string& name) {
  constexpr size_t kHexSize = PlacementGroupId::kSize * 2;
  if (name.size() < kHexSize + sizeof(kInfix)) return std::nullopt;
  auto group = PlacementGroupId::FromHex(std::string_view(name).substr(name.size() - kHexSize));
  if (!group.ok()) return std::nullopt;
  std::string head = name.substr(0, name.size() - kHexSize);  // "CPU_group_" or "CPU_group_1_"
  GroupResource r;
  r.group = *group;
  size_t infix = head.rfind(kInfix);
  if (infix == std::string::npos || infix == 0) return std::nullopt;
  std::string rest = head.substr(infix + sizeof(kInfix) - 1);  // "" or "1_"
  if (!rest.empty()) {
    if (rest.back() != '_') return std::nullopt;
    int index = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.size() - 1), &index) || index < 0) return std::nullopt;
    r.index = index;
  }
  r.base = head.substr(0, infix);
  return r;
}

SummaryName SummarizeName(const std::string& name) {
  if (name.rfind("node:", 0) == 0) return {SummaryName::kSkip, ""};
  if (name.find(kInfix) == std::string::npos) return {SummaryName::kPlain, name};
  auto g = ParseGroupResource(name);
  if (!g) return {SummaryName::kPlain, name};
  if (g->index >= 0 || g->base == kBundleMarker) return {SummaryName::kSkip, ""};
  return {SummaryName::kReserved, g->base};
}

}  // namespace manta::pg
