#include "raylet/local_resource_manager.h"

#include <algorithm>
#include <climits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/placement_group_resources.h"
#include "common/tpu.h"

namespace manta::raylet {
namespace {

// A demand taken apart: plain names, and per group the indexed names by
// bundle index and the wildcard names, all in base names ("CPU").
struct GroupNeed {
  std::map<int, ResourceSet> indexed;
  ResourceSet wildcard;
};
struct Split {
  ResourceSet plain;
  std::map<PlacementGroupId, GroupNeed> groups;
};

Split SplitDemand(const ResourceSet& demand) {
  Split s;
  for (const auto& [name, q] : demand.entries()) {
    auto g = pg::ParseGroupResource(name);
    if (!g) {
      s.plain.Set(name, q);
    } else if (g->index < 0) {
      s.groups[g->group].wildcard.Set(g->base, q);
    } else {
      s.groups[g->group].indexed[g->index].Set(g->base, q);
    }
  }
  return s;
}

// Per name, the larger of the two quantities.
ResourceSet MaxMerge(ResourceSet a, const ResourceSet& b) {
  for (const auto& [name, q] : b.entries()) {
    if (a.Get(name) < q) a.Set(name, q);
  }
  return a;
}

// A charge to bundle `key` (in base names) under both group names.
ResourceSet Expand(const ResourceSet& charge, const BundleKey& key) {
  ResourceSet out;
  for (const auto& [name, q] : charge.entries()) {
    out.Set(pg::IndexedName(name, key.second, key.first), q);
    out.Set(pg::WildcardName(name, key.first), q);
  }
  return out;
}

std::string Describe(const BundleKey& key) {
  return absl::StrCat("bundle ", key.second, " of placement group ", key.first.Hex());
}

}  // namespace

LocalResourceManager::LocalResourceManager(ResourceSet total, int tpu_chips_per_host)
    : total_(std::move(total)),
      chips_per_host_(tpu_chips_per_host),
      available_(total_),
      chip_free_(tpu_chips_per_host > 0 ? tpu_chips_per_host : 0, true) {
  if (chips_per_host_ > 0) {
    CHECK(total_.Get(tpu::kTpuResource) == Quantity::FromUnits(int64_t{chips_per_host_} * Quantity::kScale))
        << "TPU total disagrees with chips per host";
  }
}

int64_t LocalResourceManager::ChipsWanted(const ResourceSet& demand) {
  int64_t units = demand.Get(tpu::kTpuResource).units();
  if (units % Quantity::kScale != 0) return -1;
  return units / Quantity::kScale;
}

std::optional<LocalResourceManager::Plan> LocalResourceManager::PlanFor(const ResourceSet& demand,
                                                                        const ResourceSet& pool) const {
  // Every name a demand asks for is charged at least as much: a pool short
  // of one is short of the plan (checked first: it is cheap).
  if (!pool.Contains(demand)) return std::nullopt;
  Split split = SplitDemand(demand);
  bool tpu_host = chips_per_host_ > 0;
  if (tpu_host && ChipsWanted(split.plain) < 0) return std::nullopt;
  if (!pool.Contains(split.plain)) return std::nullopt;
  Plan plan;
  plan.plain = std::move(split.plain);
  for (const auto& [group, need] : split.groups) {
    if (need.indexed.size() > 1) return std::nullopt;  // one lease, one bundle per group
    int index = need.indexed.empty() ? -1 : need.indexed.begin()->first;
    ResourceSet charge = need.indexed.empty() ? need.wildcard : MaxMerge(need.indexed.begin()->second, need.wildcard);
    if (tpu_host && ChipsWanted(charge) < 0) return std::nullopt;
    auto fits = [&](const BundleKey& key) {
      auto it = bundles_.find(key);
      return it != bundles_.end() && it->second.committed && pool.Contains(Expand(charge, key));
    };
    std::optional<BundleKey> chosen;
    if (index >= 0) {
      if (fits({group, index})) chosen = BundleKey{group, index};
    } else {
      for (auto it = bundles_.lower_bound({group, INT_MIN}); it != bundles_.end() && it->first.first == group; ++it) {
        if (fits(it->first)) {
          chosen = it->first;
          break;
        }
      }
    }
    if (!chosen) return std::nullopt;
    plan.parts.emplace_back(*chosen, std::move(charge));
  }
  return plan;
}

bool LocalResourceManager::CanEverFit(const ResourceSet& demand) const {
  MANTA_CHECK_THREAD(thread_);
  return PlanFor(demand, total_).has_value();
}

bool LocalResourceManager::CanFitNow(const ResourceSet& demand) const {
  MANTA_CHECK_THREAD(thread_);
  return PlanFor(demand, available_).has_value();
}

std::vector<int> LocalResourceManager::TakeHostChips(int64_t n) {
  std::vector<int> chips;
  for (int i = 0; i < chips_per_host_ && static_cast<int64_t>(chips.size()) < n; ++i) {
    if (chip_free_[i]) chips.push_back(i);
  }
  CHECK(static_cast<int64_t>(chips.size()) == n) << "free chips disagree with available TPU";
  for (int id : chips) chip_free_[id] = false;
  return chips;
}

std::optional<Allocation> LocalResourceManager::Allocate(const ResourceSet& demand) {
  MANTA_CHECK_THREAD(thread_);
  std::optional<Plan> plan = PlanFor(demand, available_);
  if (!plan) return std::nullopt;
  Held h;
  h.allocation.id = next_id_++;
  h.allocation.resources = demand;
  if (chips_per_host_ > 0) h.plain_chips = TakeHostChips(ChipsWanted(plan->plain));
  available_.Subtract(plan->plain);
  h.plain = std::move(plan->plain);
  std::vector<int> chips = h.plain_chips;
  for (auto& [key, charge] : plan->parts) {
    HeldBundle& b = bundles_.at(key);
    Part part{key, std::move(charge), {}};
    if (chips_per_host_ > 0) {
      int64_t want = ChipsWanted(part.charge);
      for (size_t i = 0; i < b.tpu_chip_ids.size() && static_cast<int64_t>(part.chips.size()) < want; ++i) {
        if (b.chip_leased[i]) continue;
        b.chip_leased[i] = true;
        part.chips.push_back(b.tpu_chip_ids[i]);
      }
      CHECK(static_cast<int64_t>(part.chips.size()) == want)
          << "free chips disagree with available TPU of " << Describe(key);
    }
    available_.Subtract(Expand(part.charge, key));
    chips.insert(chips.end(), part.chips.begin(), part.chips.end());
    h.allocation.bundles.push_back(key);
    h.parts.push_back(std::move(part));
  }
  std::sort(chips.begin(), chips.end());
  h.allocation.tpu_chip_ids = std::move(chips);
  Allocation out = h.allocation;
  allocations_.emplace(out.id, std::move(h));
  Changed();
  return out;
}

ResourceSet LocalResourceManager::AllocatedResources(int64_t allocation_id) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = allocations_.find(allocation_id);
  if (it == allocations_.end()) return {};
  ResourceSet held = it->second.plain;
  for (const Part& part : it->second.parts) held.Add(Expand(part.charge, part.key));
  return held;
}

bool LocalResourceManager::Release(int64_t allocation_id) {
  MANTA_CHECK_THREAD(thread_);
  auto it = allocations_.find(allocation_id);
  if (it == allocations_.end()) return false;
  Held& h = it->second;
  for (int id : h.plain_chips) chip_free_[id] = true;
  available_.Add(h.plain);
  for (const Part& part : h.parts) {
    HeldBundle& b = bundles_.at(part.key);  // ReturnBundles drops the parts of a bundle it returns
    for (size_t i = 0; i < b.tpu_chip_ids.size(); ++i) {
      if (std::find(part.chips.begin(), part.chips.end(), b.tpu_chip_ids[i]) != part.chips.end()) {
        b.chip_leased[i] = false;
      }
    }
    available_.Add(Expand(part.charge, part.key));
  }
  allocations_.erase(it);
  Changed();
  return true;
}

absl::Status LocalResourceManager::ValidateBundle(const BundleSpec& b) const {
  if (b.group.IsNil()) return absl::InvalidArgumentError("placement group id is nil");
  if (b.index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle index ", b.index, " of placement group ", b.group.Hex(), " is negative"));
  }
  BundleKey key{b.group, b.index};
  if (b.resources.empty()) return absl::InvalidArgumentError(Describe(key) + " has no resources");
  for (const auto& [name, q] : b.resources.entries()) {
    if (auto s = ResourceSet::ValidateName(name); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(key), ": ", s.message()));
    }
    if (name == pg::kBundleMarker || pg::ParseGroupResource(name).has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(key), ": '", name, "' is reserved for placement groups"));
    }
    if (!ResourceSet::ValidateName(pg::IndexedName(name, b.index, b.group)).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(key), ": resource name '", name, "' is too long for a placement group"));
    }
  }
  if (chips_per_host_ > 0 && ChipsWanted(b.resources) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(key), ": TPU ",
                                                   FormatQuantity(b.resources.Get(tpu::kTpuResource).ToDouble()),
                                                   " is not a whole number of chips"));
  }
  return absl::OkStatus();
}

absl::Status LocalResourceManager::ValidateBundles(const std::vector<BundleSpec>& bundles) const {
  MANTA_CHECK_THREAD(thread_);
  std::set<BundleKey> seen;
  for (const BundleSpec& b : bundles) {
    if (auto s = ValidateBundle(b); !s.ok()) return s;
    BundleKey key{b.group, b.index};
    if (!seen.insert(key).second) return absl::InvalidArgumentError(Describe(key) + " appears twice");
    auto it = bundles_.find(key);
    if (it != bundles_.end() && !(it->second.resources == b.resources)) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(key), " is already held with ",
                                                     it->second.resources.DebugString(), ", not ",
                                                     b.resources.DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::Status LocalResourceManager::PrepareBundles(const std::vector<BundleSpec>& bundles) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateBundles(bundles); !s.ok()) return s;
  std::vector<const BundleSpec*> fresh;  // not held yet; the others are retries
  ResourceSet need;
  for (const BundleSpec& b : bundles) {
    if (bundles_.count({b.group, b.index}) > 0) continue;
    fresh.push_back(&b);
    need.Add(b.resources);
  }
  if (fresh.empty()) return absl::OkStatus();
  if (!available_.Contains(need)) {
    ResourceSet have;
    for (const auto& [name, q] : need.entries()) have.Set(name, available_.Get(name));
    std::vector<int> indices;
    for (const BundleSpec* b : fresh) indices.push_back(b->index);
    return absl::ResourceExhaustedError(absl::StrCat("bundles ", absl::StrJoin(indices, ", "), " of placement group ",
                                                     fresh[0]->group.Hex(), " need ", need.DebugString(),
                                                     "; this node has ", have.DebugString(), " available"));
  }
  for (const BundleSpec* b : fresh) {
    HeldBundle held;
    held.resources = b->resources;
    if (chips_per_host_ > 0) held.tpu_chip_ids = TakeHostChips(ChipsWanted(b->resources));
    held.chip_leased.assign(held.tpu_chip_ids.size(), false);
    available_.Subtract(b->resources);
    bundles_.emplace(BundleKey{b->group, b->index}, std::move(held));
  }
  Changed();
  return absl::OkStatus();
}

absl::Status LocalResourceManager::CommitBundles(const PlacementGroupId& group, const std::vector<int>& indices) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<BundleKey> keys;
  if (indices.empty()) {
    for (auto it = bundles_.lower_bound({group, INT_MIN}); it != bundles_.end() && it->first.first == group; ++it) {
      keys.push_back(it->first);
    }
    if (keys.empty()) return absl::NotFoundError("placement group " + group.Hex() + " has no bundle on this node");
  }
  for (int index : indices) {
    BundleKey key{group, index};
    if (bundles_.count(key) == 0) return absl::NotFoundError(Describe(key) + " is not prepared on this node");
    keys.push_back(key);
  }
  bool changed = false;
  for (const BundleKey& key : keys) {
    HeldBundle& b = bundles_.at(key);
    if (b.committed) continue;
    ResourceSet added = pg::CommittedResources(b.resources, key.first, key.second);
    total_.Add(added);
    available_.Add(added);
    b.committed = true;
    changed = true;
  }
  if (changed) Changed();
  return absl::OkStatus();
}

std::vector<BundleKey> LocalResourceManager::ReturnBundles(const std::vector<BundleKey>& keys) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<BundleKey> returned;
  for (const BundleKey& key : keys) {
    auto it = bundles_.find(key);
    if (it == bundles_.end()) continue;
    HeldBundle& b = it->second;
    if (b.committed) {
      // Leases still charged to the bundle lose that part: it goes back first
      // so the group resources can leave available() whole.
      for (auto& [id, h] : allocations_) {
        for (auto p = h.parts.begin(); p != h.parts.end();) {
          if (p->key != key) {
            ++p;
            continue;
          }
          Logger("raylet")->warn("{} returned while allocation {} still held it", Describe(key), id);
          available_.Add(Expand(p->charge, key));
          auto& ab = h.allocation.bundles;
          ab.erase(std::remove(ab.begin(), ab.end(), key), ab.end());
          p = h.parts.erase(p);
        }
      }
      ResourceSet committed = pg::CommittedResources(b.resources, key.first, key.second);
      total_.Subtract(committed);
      available_.Subtract(committed);
    }
    available_.Add(b.resources);
    for (int chip : b.tpu_chip_ids) chip_free_[chip] = true;
    bundles_.erase(it);
    returned.push_back(key);
  }
  if (!returned.empty()) Changed();
  return returned;
}

void LocalResourceManager::Changed() {
  ++version_;
  if (on_change_) on_change_();
}

}  // namespace manta::raylet
