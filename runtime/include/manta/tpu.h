// TPU slices: reserve whole slices and run one process per host on them,
// as Ray's ray.util.tpu does.
//
//   auto slices = manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2});
//   std::vector<manta::ObjectRef<std::string>> refs = manta::tpu::RunOnSlices(slices, Describe);
//   ... or one actor per host:  auto actors = manta::tpu::ActorsOnSlices(slices, Trainer::Create, cfg);
//   slices.Release();
//
// A slice is reserved whole: one bundle per host of the slice
// (`{TPU: chips_per_host}` by default), bundle b on the host with worker id
// b, bundle 0 also holding the slice's `TPU-<pod type>-head` (as a Ray
// reservation through the head does). The GCS places every bundle of a
// slice on hosts of one slice (one TPU_NAME), and each slice of the request
// on another, in one decision: a reservation is one create and one wait per
// group. A slice with a host missing, draining, held or not matching the
// caller's selector is not taken; when no slice can be taken now, the call
// waits until one can (a host replaced after a failure completes its slice)
// or its timeout. Two clients never share a slice (the head is held).
//
// Each process started through RunOnSlices/ActorsOnSlices gets the TPU_*
// variables a JAX process expects (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, ...)
// and, for more than one slice, MEGASCALE_COORDINATOR_ADDRESS (host 0 of
// slice 0), MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID and MEGASCALE_PORT; for
// a single slice the MEGASCALE_* variables are removed. Values inherited from
// the environment are always overwritten. As in Ray, MEGASCALE_COORDINATOR_ADDRESS
// is host 0's address without a port; the port is MEGASCALE_PORT.
//
// Errors: every call throws manta::Error (its status() says the code);
// the Try* forms return the status instead.
// Thread-safety: every call may be made from any thread after Init; a
// SliceReservation is a value (copies name the same groups).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/actor.h"
#include "manta/placement_group.h"
#include "manta/task_caller.h"

namespace manta::tpu {

struct SliceInfo {
  std::string name;        // TPU_NAME, e.g. "tpu-group-0"
  std::string pod_type;    // "v6e-16"
  std::string topology;    // "4x4"
  int num_hosts = 0;       // hosts alive now
  int expected_hosts = 0;  // hosts the pod type and topology imply
  int chips_per_host = 0;
  std::string head_ip;      // worker 0's address
  bool head_free = false;   // its TPU-<pod type>-head resource is available
  bool chips_free = false;  // every host's TPU chips are available (nobody holds the slice)
};

// The shape of one slice of `accelerator_version` ("v6e", "TPU-V6E") shaped
// `topology` ("4x4"), by Ray's rules; pure.
struct SliceShape {
  std::string pod_type;          // "v6e-16"
  std::string topology;          // normalized: "4x4"
  std::string accelerator_type;  // "TPU-V6E"
  int chips_per_host = 0;
  int hosts_per_slice = 0;
};
// InvalidArgument naming the problem for an unknown version, a malformed
// topology, or one the version does not accept.
absl::StatusOr<SliceShape> TrySliceShapeOf(const std::string& accelerator_version, const std::string& topology);

// Every slice with all its hosts alive and none draining (and, given a
// `label_selector`, every host's labels matching it), grouped by pod type,
// by name. InvalidArgument for a malformed selector.
std::map<std::string, std::vector<SliceInfo>> ListSlices(const std::map<std::string, std::string>& label_selector = {});
absl::StatusOr<std::map<std::string, std::vector<SliceInfo>>> TryListSlices(
    const std::map<std::string, std::string>& label_selector = {});

// Checks `label_selector` as a choice among slices of `pod_type` ("v6e-16"):
// Ray's syntax (see common/label_selector.h), no condition on the worker id
// (every slice has each), and a condition on the pod type only if
// `pod_type` meets it. InvalidArgument naming the problem.
absl::Status CheckSliceLabelSelector(const std::map<std::string, std::string>& label_selector,
                                     const std::string& pod_type);

struct SliceOptions {
  std::string topology = {};             // "4x4"
  std::string accelerator_version = {};  // "v6e" or "TPU-V6E"
  int num_slices = 1;
  // Per host bundle; default {TPU: chips_per_host}.
  std::map<std::string, double> resources_per_bundle = {};
  PlacementStrategy strategy = PlacementStrategy::kStrictSpread;
  // Node labels every host of a chosen slice matches (Ray's syntax:
  // {"zone": "a"}, {"manta.io/tpu-slice-name": "in(tpu-group-1,tpu-group-2)"});
  // a slice with a host that does not is never chosen. Checked as
  // CheckSliceLabelSelector does.
  std::map<std::string, std::string> label_selector = {};
  // One group holding every slice's bundles, or one group per slice.
  bool one_group = true;
  absl::Duration timeout = absl::Seconds(60);
  int megascale_port = 8081;
};

class SliceReservation {
 public:
  SliceReservation() = default;

  // Groups: one, or one per slice (options.one_group). Bundle b of slice s is
  // bundle s * hosts_per_slice + b of the single group, or bundle b of
  // group s. Bundle b of a slice is on its host with TPU_WORKER_ID b.
  const std::vector<PlacementGroup>& groups() const { return groups_; }
  const std::vector<SliceInfo>& slices() const { return slices_; }
  int num_slices() const { return static_cast<int>(slices_.size()); }
  int hosts_per_slice() const { return hosts_per_slice_; }
  // The hosts' addresses of slice `slice`, by worker id.
  const std::vector<std::string>& host_ips(int slice) const;
  // The group and bundle index of host `host` of slice `slice`. Throws
  // manta::Error (InvalidArgument) when either is out of range.
  std::pair<PlacementGroup, int> Bundle(int slice, int host) const;
  // What each bundle holds (the resources a process in it asks for).
  const std::map<std::string, double>& BundleResources() const { return bundle_resources_; }
  // The environment for the process on that host (see the top of the file;
  // an empty value means "remove"). Throws as Bundle.
  std::map<std::string, std::string> ProcessEnv(int slice, int host) const;
  // Removes every group. Idempotent. Throws manta::Error when the cluster
  // cannot be reached (the groups it could not remove are kept, so a retry
  // removes them).
  void Release();

 private:
  friend absl::StatusOr<SliceReservation> TryReserveSlices(const SliceOptions& options);
  std::vector<PlacementGroup> groups_;
  std::vector<SliceInfo> slices_;
  std::vector<std::vector<std::string>> host_ips_;  // per slice, by worker id
  int hosts_per_slice_ = 0;
  bool one_group_ = true;
  int megascale_port_ = 8081;
  std::map<std::string, double> bundle_resources_;
};

// Reserves `num_slices` whole slices. Throws manta::Error: InvalidArgument
// for an unknown topology or version, a topology the version does not
// accept, num_slices < 1, or a label selector CheckSliceLabelSelector
// refuses (before anything is asked of the cluster);
// DeadlineExceeded when they could not be reserved within options.timeout
// (nothing is left reserved); the GCS's error when it fails.
SliceReservation ReserveSlices(const SliceOptions& options);
absl::StatusOr<SliceReservation> TryReserveSlices(const SliceOptions& options);

// The environment ProcessEnv gives host `host` of slice `slice` of
// `slices`, whose hosts' addresses by worker id are `host_ips`: TPU_WORKER_ID,
// TPU_WORKER_HOSTNAMES, TPU_NAME, TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY, and the
// four MEGASCALE_* variables (mapped to "" for a single slice). Pure; for
// tests and custom launchers. Throws manta::Error (InvalidArgument) when
// `slice` or `host` is out of range.
std::map<std::string, std::string> SliceProcessEnv(const std::vector<SliceInfo>& slices,
                                                   const std::vector<std::vector<std::string>>& host_ips, int slice,
                                                   int host, int megascale_port = 8081);

// Runs `f(args...)` once on every host of every reserved slice, holding that
// host's bundle; refs in slice-major order.
template <typename R, typename... P, typename... A>
std::vector<ObjectRef<internal::ReturnValue<R>>> RunOnSlices(const SliceReservation& r, R (*f)(P...), A&&... args) {
  std::vector<ObjectRef<internal::ReturnValue<R>>> refs;
  for (int s = 0; s < r.num_slices(); ++s) {
    for (int h = 0; h < r.hosts_per_slice(); ++h) {
      auto [group, bundle] = r.Bundle(s, h);
      auto caller = Task(f);
      caller.SetPlacementGroup(group, bundle).SetEnv(r.ProcessEnv(s, h)).SetResources(r.BundleResources());
      refs.push_back(caller.Remote(args...));
    }
  }
  return refs;
}

// Creates one actor with `factory(args...)` per host of every reserved
// slice, in that host's bundle, holding the bundle's resources for its life
// and with that host's ProcessEnv; handles in slice-major order (handle
// s * hosts_per_slice + h is on worker h of slice s).
template <typename T, typename... P, typename... A>
std::vector<ActorHandle<T>> ActorsOnSlices(const SliceReservation& r, T* (*factory)(P...), A&&... args) {
  std::vector<ActorHandle<T>> actors;
  for (int s = 0; s < r.num_slices(); ++s) {
    for (int h = 0; h < r.hosts_per_slice(); ++h) {
      auto [group, bundle] = r.Bundle(s, h);
      auto creator = Actor(factory);
      creator.SetPlacementGroup(group, bundle).SetEnv(r.ProcessEnv(s, h)).SetResources(r.BundleResources());
      actors.push_back(creator.Remote(args...));
    }
  }
  return actors;
}

}  // namespace manta::tpu
