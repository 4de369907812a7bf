// Placement-group resource names, as Ray spells them.
//
// A committed bundle turns the resources it reserved into resources that
// only the group's tasks and actors can use. For bundle 1 of group <pg>
// holding {CPU: 2, TPU: 4} the node gains
//   CPU_group_<pg>: 2,  CPU_group_1_<pg>: 2,   (any bundle / this bundle)
//   TPU_group_<pg>: 4,  TPU_group_1_<pg>: 4,
//   bundle_group_<pg>: 1000, bundle_group_1_<pg>: 1000   (markers)
// where <pg> is the group id in hex. A task in bundle 1 asks for the
// indexed names plus 0.001 of the bundle marker, so even a task that needs
// nothing lands on the bundle's node; a task in any bundle asks for the
// wildcard names. Pure functions; thread-safe.
//
//   ResourceSet demand = pg::BundleDemand(task_demand, group, /*index=*/1);
#pragma once

#include <optional>
#include <string>

#include "common/id.h"
#include "common/resources.h"

namespace manta::pg {

inline constexpr char kBundleMarker[] = "bundle";
// Units of the marker a committed bundle adds, and a task takes.
inline constexpr int64_t kMarkerUnitsPerBundle = 1000 * Quantity::kScale;
inline constexpr int64_t kMarkerUnitsPerTask = Quantity::kScale / 1000;

// "CPU_group_<hex>".
std::string WildcardName(const std::string& base, const PlacementGroupId& group);
// "CPU_group_<index>_<hex>".
std::string IndexedName(const std::string& base, int index, const PlacementGroupId& group);

// The demand of a task or actor in bundle `index` of `group` (-1: any
// bundle), from its plain demand.
ResourceSet BundleDemand(const ResourceSet& demand, const PlacementGroupId& group, int index);

// What committing bundle `index` holding `bundle` adds to its node: every
// resource under both names, and both markers.
ResourceSet CommittedResources(const ResourceSet& bundle, const PlacementGroupId& group, int index);

// A placement-group resource name taken apart. `index` is -1 for the
// wildcard form.
struct GroupResource {
  std::string base;
  int index = -1;
  PlacementGroupId group;
};
// nullopt for a name that is not a placement-group resource.
std::optional<GroupResource> ParseGroupResource(const std::string& name);

// How a node's resource counts in a cluster-wide summary (`manta status`):
// a plain resource under its own name; a group's reservation under its base
// name (CPU_group_<pg> -> CPU); or not at all: the indexed names and bundle
// markers repeat the reservation, node:<ip> names only place work.
struct SummaryName {
  enum Kind { kPlain, kReserved, kSkip } kind;
  std::string name;  // the plain name or the base name
};
SummaryName SummarizeName(const std::string& name);

}  // namespace manta::pg
