// Placement groups: resources reserved atomically across nodes, for tasks
// and actors to run in.
//
//   manta::PlacementGroup pg = manta::CreatePlacementGroup(
//       {.bundles = {{.resources = {{"TPU", 4}}}, {.resources = {{"TPU", 4}}}},
//        .strategy = manta::PlacementStrategy::kStrictSpread});
//   if (!pg.Wait(absl::Seconds(30))) { ... still pending: pg.StateMessage() says why ... }
//   auto r = manta::Task(Work).SetPlacementGroup(pg, /*bundle_index=*/0).Remote();
//   manta::RemovePlacementGroup(pg);   // stops what runs in it, returns every resource
//
// Strategies as in Ray: kPack (as few nodes as possible), kSpread (as many
// as possible), kStrictPack (one node), kStrictSpread (one node per bundle).
// A group is created by two-phase commit on the raylets: all bundles or
// none. A group no alive node could ever hold stays pending (Infeasible()
// is true, StateMessage() names the bundle) and is placed when nodes join.
// Every call throws manta::Error on a malformed request (no bundles, an
// empty bundle, a negative or NaN quantity, a bad label selector) or when
// the cluster cannot be reached; its status() has the GCS's code and
// message. The Try* forms return that status instead.
//
// Thread-safety: every call may be made from any thread after Init.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/internal/core_worker.h"

namespace manta {

// kPack, kSpread, kStrictPack, kStrictSpread.
using PlacementStrategy = core::PlacementStrategy;

// Parses "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"; throws
// manta::Error (InvalidArgument) otherwise.
PlacementStrategy ParsePlacementStrategy(const std::string& s);
std::string PlacementStrategyName(PlacementStrategy s);

// Members carry `= {}` so designated initializers may leave any out
// without -Wmissing-field-initializers warnings.
struct BundleSpec {
  std::map<std::string, double> resources = {};
  // Node labels the bundle's node must have (Ray's label selector syntax).
  std::map<std::string, std::string> label_selector = {};
};

struct PlacementGroupOptions {
  std::vector<BundleSpec> bundles = {};
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::string name = {};           // empty: anonymous; else unique among live groups
  std::string ray_namespace = {};  // for the name; empty: the job's
  bool detached = false;           // outlives the job that created it
};

// kPending, kPrepared, kCreated, kRemoved, kRescheduling.
using PlacementGroupState = core::PlacementGroupState;

// Where one bundle is, as the GCS last said.
struct BundleLocation {
  int index = 0;
  std::string node_id;  // hex; empty while the bundle has no node
  std::string node_ip;
  std::map<std::string, std::string> node_labels;
};

// A handle on a group. Copyable; all copies name the same group. The
// accessors below ask the GCS each time (no cached state) and throw
// manta::Error (NotFound for an unknown group) when it cannot answer.
class PlacementGroup {
 public:
  PlacementGroup() = default;
  explicit PlacementGroup(std::string id) : id_(std::move(id)) {}

  const std::string& ID() const { return id_; }  // binary
  std::string Hex() const;

  bool Valid() const { return !id_.empty(); }

  // Blocks until the group is CREATED (true) or `timeout` passes (false).
  // Throws manta::Error (FailedPrecondition) when the group was removed,
  // NotFound when it is unknown.
  bool Wait(absl::Duration timeout) const;
  PlacementGroupState State() const;
  std::string StateMessage() const;  // why it is not CREATED
  bool Infeasible() const;
  // Every bundle in index order, with its node's address and labels.
  std::vector<BundleLocation> Bundles() const;

  friend bool operator==(const PlacementGroup& a, const PlacementGroup& b) { return a.id_ == b.id_; }

 private:
  std::string id_;
};

// Creates the group (asynchronously placed: Wait for it) for this job; an
// empty ray_namespace is the job's. Throws manta::Error (InvalidArgument) for
// a malformed request, AlreadyExists for a taken name.
PlacementGroup CreatePlacementGroup(const PlacementGroupOptions& options);
absl::StatusOr<PlacementGroup> TryCreatePlacementGroup(const PlacementGroupOptions& options);
// Idempotent (an unknown group is not an error). Actors in the group die;
// tasks running in it are stopped. Returns once every node holding a bundle
// has returned it and sent SIGTERM to the workers using it (or could not be
// reached within 10 s), so a call or task made afterwards does not run in
// the group.
void RemovePlacementGroup(const PlacementGroup& group);
absl::Status TryRemovePlacementGroup(const PlacementGroup& group);
// Throws manta::Error (NotFound) when no live group has the name.
PlacementGroup GetPlacementGroup(const std::string& name, const std::string& ray_namespace = "");
absl::StatusOr<PlacementGroup> TryGetPlacementGroup(const std::string& name, const std::string& ray_namespace = "");

}  // namespace manta
