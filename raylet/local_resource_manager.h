// LocalResourceManager: what this node has, what is held by leases, and the
// placement-group bundles reserved here.
//
// Owns the node's total and available ResourceSet, which TPU chips of this
// host are free, the allocations held by leases and the bundles reserved by
// placement groups.
//
// Plain resources. An allocation of `TPU: n` on a TPU host takes the n
// lowest free chip ids (chips are 0..chips_per_host-1); on any other node
// TPU is a plain quantity.
//
// Bundles, keyed by (group, index), follow two-phase commit:
//   PrepareBundles  takes the bundle's plain resources (and, on a TPU host,
//                   specific chips) out of available(); total() is unchanged.
//   CommitBundles   adds pg::CommittedResources(bundle) to total() and
//                   available(): the bundle is now usable by the group only.
//   ReturnBundles   undoes both, whatever state the bundle is in.
// A demand naming group resources (pg::BundleDemand) is charged to one
// committed bundle: for bundle i it takes X_group_i_<pg> and X_group_<pg>;
// for "any bundle" (wildcard names only) it takes them from the lowest-index
// committed bundle of the group whose indexed resources hold it. TPU chips of
// such an allocation are the lowest free chips that bundle owns.
//
// Invariants: available <= total; on a TPU host, free host chips == available
// TPU, and for each committed bundle its unleased chips == available
// TPU_group_<i>_<pg>; for each group, available X_group_<pg> == sum over its
// committed bundles of available X_group_<i>_<pg>. Every change bumps
// version() and calls the change listener (the raylet coalesces those into
// ReportResources calls). Thread: the raylet's loop thread; not thread-safe.
//
//   LocalResourceManager local(total, /*tpu_chips_per_host=*/4);
//   if (auto a = local.Allocate(demand)) { ... a->tpu_chip_ids ...; local.Release(a->id); }
//   RETURN_IF_ERROR(local.PrepareBundles({{group, 0, bundle}}));
//   RETURN_IF_ERROR(local.CommitBundles(group, {0}));
//   local.ReturnBundles({{group, 0}});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/id.h"
#include "common/resources.h"
#include "common/thread_checker.h"

namespace manta::raylet {

// (placement group, bundle index).
using BundleKey = std::pair<PlacementGroupId, int>;

struct Allocation {
  int64_t id = 0;                  // unique per manager, never 0
  ResourceSet resources;           // the demand it was made for
  std::vector<int> tpu_chip_ids;   // ascending; empty unless TPU on a TPU host
  std::vector<BundleKey> bundles;  // bundles it draws from (at most one per group)
};

// A bundle to reserve: its plain resources ({TPU: 4, CPU: 1}).
struct BundleSpec {
  PlacementGroupId group;
  int index = 0;
  ResourceSet resources;
};

// A bundle held by this node.
struct HeldBundle {
  ResourceSet resources;          // plain, as prepared
  std::vector<int> tpu_chip_ids;  // host chips it owns, ascending
  std::vector<bool> chip_leased;  // parallel to tpu_chip_ids
  bool committed = false;
};

class LocalResourceManager {
 public:
  // `tpu_chips_per_host` is 0 on a node that is not a TPU host. On a TPU
  // host, `total` must hold exactly that many TPU.
  LocalResourceManager(ResourceSet total, int tpu_chips_per_host);

  // Include committed bundles' group resources.
  const ResourceSet& total() const { return total_; }
  const ResourceSet& available() const { return available_; }
  int tpu_chips_per_host() const { return chips_per_host_; }
  // Bumped on every change of total() or available().
  int64_t version() const { return version_; }

  // Whether `demand` fits in the total (on a TPU host: also a whole number of
  // chips). A demand in "any bundle" fits when one committed bundle's totals
  // hold it. A demand naming more than one bundle of one group never fits.
  bool CanEverFit(const ResourceSet& demand) const;
  bool CanFitNow(const ResourceSet& demand) const;

  // Takes `demand` from available(); nullopt when it does not fit now.
  std::optional<Allocation> Allocate(const ResourceSet& demand);
  // Gives an allocation back. Idempotent: unknown or released ids are ignored
  // (returns false).
  bool Release(int64_t allocation_id);
  // What a held allocation takes from available(): its plain resources and,
  // for each bundle it draws from, the bundle's indexed and wildcard names.
  // Empty for an unknown or released id.
  ResourceSet AllocatedResources(int64_t allocation_id) const;

  // Reserves every bundle not yet held, all or none. A bundle already held
  // (prepared or committed) with the same resources is left as it is.
  // Errors, with nothing changed: InvalidArgument for an empty bundle, a
  // negative index, a nil group, a duplicate key, a resource name that is a
  // group resource or "bundle" or would make too long a group resource name,
  // a fractional TPU on a TPU host, or a held bundle with other resources;
  // ResourceExhausted when the new bundles do not all fit now.
  absl::Status PrepareBundles(const std::vector<BundleSpec>& bundles);
  // The InvalidArgument checks of PrepareBundles alone; changes nothing.
  absl::Status ValidateBundles(const std::vector<BundleSpec>& bundles) const;
  // Commits the group's bundles at `indices` (empty: every bundle of the
  // group held here). Idempotent. NotFound, with nothing changed, when one is
  // not held (or, for empty `indices`, the group has none here).
  absl::Status CommitBundles(const PlacementGroupId& group, const std::vector<int>& indices);
  // Returns bundles, prepared or committed: their group resources leave
  // total() and available(), their plain resources and chips come back.
  // Unknown keys are ignored. A lease still charged to a returned bundle
  // keeps only its plain part (callers end such leases first). Returns the
  // keys that were held.
  std::vector<BundleKey> ReturnBundles(const std::vector<BundleKey>& keys);
  // Every bundle held here, ordered by group then index.
  const std::map<BundleKey, HeldBundle>& bundles() const { return bundles_; }

  // Called after every change of total() or available(). One listener.
  void SetChangeListener(std::function<void()> fn) { on_change_ = std::move(fn); }

 private:
  // An allocation's share of one committed bundle, in plain names.
  struct Part {
    BundleKey key;
    ResourceSet charge;
    std::vector<int> chips;
  };
  struct Held {
    Allocation allocation;
    ResourceSet plain;
    std::vector<int> plain_chips;
    std::vector<Part> parts;
  };
  // Where a demand would be taken from.
  struct Plan {
    ResourceSet plain;
    std::vector<std::pair<BundleKey, ResourceSet>> parts;
  };

  // Chips a set asks for on a TPU host: -1 when not a whole number.
  static int64_t ChipsWanted(const ResourceSet& demand);
  // Where `demand` fits within `pool` (total_ or available_); nullopt if not.
  std::optional<Plan> PlanFor(const ResourceSet& demand, const ResourceSet& pool) const;
  absl::Status ValidateBundle(const BundleSpec& b) const;
  // Takes the n lowest free chips of the host.
  std::vector<int> TakeHostChips(int64_t n);
  void Changed();

  ResourceSet total_;
  const int chips_per_host_;
  ResourceSet available_;
  std::vector<bool> chip_free_;  // size chips_per_host_; chips of bundles are not free
  absl::flat_hash_map<int64_t, Held> allocations_;
  std::map<BundleKey, HeldBundle> bundles_;
  int64_t next_id_ = 1;
  int64_t version_ = 0;
  std::function<void()> on_change_;
  // The loop thread, which every call comes from.
  ThreadChecker thread_;
};

}  // namespace manta::raylet
