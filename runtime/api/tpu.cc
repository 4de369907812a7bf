// TPU slices over placement groups: listing slices from the node table,
// reserving whole slices (groups whose bundles the GCS places a slice to a
// label domain), and the per-process JAX environment.
#include "manta/tpu.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/label_selector.h"
#include "common/status.h"
#include "common/tpu.h"
#include "manta/errors.h"

namespace manta::tpu {
namespace {

// A slice as the node table shows it, complete or not.
struct ObservedSlice {
  SliceInfo info;
  std::map<int, const core::NodeData*> hosts;  // alive hosts by worker id
  bool malformed = false;                      // labels that do not parse
  bool mismatched = false;                     // an alive host fails the caller's label selector
};

absl::StatusOr<core::CoreWorker*> Core() {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) {
    return absl::FailedPreconditionError("manta::Init() has not been called (or manta::Shutdown() has)");
  }
  return core;
}

std::string Label(const core::NodeData& n, const char* key) {
  auto it = n.labels.find(key);
  return it == n.labels.end() ? std::string() : it->second;
}

// Every slice with at least one alive host, by name; `selector` (may be
// null) marks the slices with a host that fails it.
std::map<std::string, ObservedSlice> ObserveSlices(const std::vector<core::NodeData>& nodes,
                                                   const LabelSelector* selector = nullptr) {
  std::map<std::string, ObservedSlice> slices;
  for (const core::NodeData& n : nodes) {
    if (!n.alive || n.draining) continue;  // a draining host is as good as gone
    std::string name = Label(n, kLabelSliceName);
    if (name.empty()) continue;
    ObservedSlice& s = slices[name];
    if (selector != nullptr && !selector->Matches(n.labels)) s.mismatched = true;
    if (s.info.name.empty()) {
      s.info.name = name;
      auto pod = ParsePodType(Label(n, kLabelPodType));
      auto topology = ParseTopology(Label(n, kLabelTopology));
      absl::StatusOr<int> hosts = absl::InvalidArgumentError("");
      absl::StatusOr<int> chips = absl::InvalidArgumentError("");
      if (pod.ok() && topology.ok()) {
        hosts = HostsPerSlice(*pod, *topology);
        chips = ChipsPerHost(*pod, *topology);
      }
      if (!hosts.ok() || !chips.ok()) {
        s.malformed = true;
        continue;
      }
      s.info.pod_type = pod->ToString();
      s.info.topology = TopologyToString(*topology);
      s.info.expected_hosts = *hosts;
      s.info.chips_per_host = *chips;
    }
    int worker = -1;
    if (!absl::SimpleAtoi(Label(n, kLabelWorkerId), &worker) || worker < 0 || worker >= s.info.expected_hosts) {
      continue;
    }
    s.hosts[worker] = &n;
  }
  for (auto& [name, s] : slices) {
    s.info.num_hosts = static_cast<int>(s.hosts.size());
    if (auto head = s.hosts.find(0); head != s.hosts.end()) s.info.head_ip = head->second->ip;
  }
  return slices;
}

bool Complete(const ObservedSlice& s) {
  return !s.malformed && s.info.expected_hosts > 0 && s.info.num_hosts == s.info.expected_hosts;
}

const std::map<std::string, double>* Available(const std::vector<core::NodeResourcesData>& resources,
                                               const NodeId& node) {
  for (const core::NodeResourcesData& r : resources) {
    if (r.node_id == node) return &r.available;
  }
  return nullptr;
}

bool Holds(const std::map<std::string, double>* available, const std::string& name, double amount) {
  if (available == nullptr) return false;
  auto it = available->find(name);
  return it != available->end() && it->second >= amount;
}

// Fills head_free and chips_free of a complete slice from `resources`.
void FillFree(ObservedSlice& s, const std::vector<core::NodeResourcesData>& resources) {
  auto pod = ParsePodType(s.info.pod_type);
  if (!pod.ok()) return;
  s.info.head_free = Holds(Available(resources, s.hosts.at(0)->node_id), HeadResourceName(*pod), 1);
  s.info.chips_free = true;
  for (const auto& [worker, node] : s.hosts) {
    s.info.chips_free =
        s.info.chips_free && Holds(Available(resources, node->node_id), kTpuResource, s.info.chips_per_host);
  }
}

// Removes `groups`, ignoring errors: the cleanup of a failed reservation.
void RemoveAll(core::CoreWorker* core, const std::vector<PlacementGroupId>& groups) {
  for (const PlacementGroupId& id : groups) core->RemovePlacementGroup(id).IgnoreError();
}

absl::Status Prefixed(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), absl::StrCat("ReserveSlices: ", what, ": ", s.message()));
}

const char* StateName(core::PlacementGroupState s) {
  switch (s) {
    case core::PlacementGroupState::kPending:
      return "PENDING";
    case core::PlacementGroupState::kPrepared:
      return "PREPARED";
    case core::PlacementGroupState::kCreated:
      return "CREATED";
    case core::PlacementGroupState::kRemoved:
      return "REMOVED";
    case core::PlacementGroupState::kRescheduling:
      return "RESCHEDULING";
  }
  return "UNKNOWN";
}

// Waits for `id` until `deadline`. OK once CREATED; DeadlineExceeded naming
// `what` and the group's state message when time runs out; Aborted when the
// group was removed meanwhile.
absl::StatusOr<core::PlacementGroupData> WaitCreated(core::CoreWorker* core, const PlacementGroupId& id,
                                                     absl::Time deadline, const std::string& what,
                                                     const std::string& request) {
  auto data = core->WaitPlacementGroupReady(id, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!data.ok()) return Prefixed(data.status(), what);
  if (data->state == core::PlacementGroupState::kCreated) return data;
  std::string why = data->state_message.empty() ? StateName(data->state) : data->state_message;
  if (data->state == core::PlacementGroupState::kRemoved) {
    return absl::AbortedError(absl::StrCat("ReserveSlices: ", what, " was removed: ", why));
  }
  return absl::DeadlineExceededError(absl::StrCat("ReserveSlices: could not reserve ", request, " in time: ", what,
                                                  " is still ", StateName(data->state), " (", why, ")"));
}

}  // namespace

// ---- Shapes ---------------------------------------------------------------------

absl::StatusOr<SliceShape> TrySliceShapeOf(const std::string& accelerator_version, const std::string& topology) {
  auto pod = PodTypeFromTopology(accelerator_version, topology);
  if (!pod.ok()) return absl::InvalidArgumentError(pod.status().message());
  if (!IsValidTopology(accelerator_version, topology)) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology '", topology, "' is not valid for accelerator version '", accelerator_version, "'"));
  }
  auto dims = ParseTopology(topology);
  if (!dims.ok()) return absl::InvalidArgumentError(dims.status().message());
  auto chips = ChipsPerHost(*pod, *dims);
  if (!chips.ok()) return absl::InvalidArgumentError(chips.status().message());
  auto hosts = HostsPerSlice(*pod, *dims);
  if (!hosts.ok()) return absl::InvalidArgumentError(hosts.status().message());
  auto type = AcceleratorTypeName(accelerator_version);
  if (!type.ok()) return absl::InvalidArgumentError(type.status().message());
  return SliceShape{pod->ToString(), TopologyToString(*dims), *type, *chips, *hosts};
}

// ---- Listing --------------------------------------------------------------------

absl::Status CheckSliceLabelSelector(const std::map<std::string, std::string>& label_selector,
                                     const std::string& pod_type) {
  auto parsed = LabelSelector::Parse(label_selector);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("label_selector: ", parsed.status().message()));
  if (label_selector.count(kLabelWorkerId) > 0) {
    return absl::InvalidArgumentError(absl::StrCat("label_selector: a slice is chosen whole, with every ",
                                                   kLabelWorkerId, "; select slices by other labels"));
  }
  if (auto it = label_selector.find(kLabelPodType); it != label_selector.end()) {
    auto pod = LabelSelector::Parse(std::map<std::string, std::string>{*it});
    if (!pod.ok() || !pod->Matches(std::map<std::string, std::string>{{kLabelPodType, pod_type}})) {
      return absl::InvalidArgumentError(absl::StrCat("label_selector: ", kLabelPodType, " '", it->second,
                                                     "' excludes the slices asked for (", pod_type, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::vector<SliceInfo>>> TryListSlices(
    const std::map<std::string, std::string>& label_selector) {
  auto selector = LabelSelector::Parse(label_selector);
  if (!selector.ok()) return absl::InvalidArgumentError(absl::StrCat("label_selector: ", selector.status().message()));
  auto core = Core();
  if (!core.ok()) return core.status();
  auto nodes = (*core)->GetAllNodes();
  if (!nodes.ok()) return nodes.status();
  auto resources = (*core)->GetClusterResources();
  if (!resources.ok()) return resources.status();
  std::map<std::string, std::vector<SliceInfo>> out;
  for (auto& [name, s] : ObserveSlices(*nodes, &*selector)) {
    if (!Complete(s) || s.mismatched) continue;
    FillFree(s, *resources);
    out[s.info.pod_type].push_back(s.info);
  }
  return out;  // names come sorted from the map above
}

std::map<std::string, std::vector<SliceInfo>> ListSlices(const std::map<std::string, std::string>& label_selector) {
  auto slices = TryListSlices(label_selector);
  if (!slices.ok()) throw Error(slices.status());
  return *std::move(slices);
}

// ---- Reserving ------------------------------------------------------------------

namespace {

// What a reservation asks for, checked before the cluster is asked anything.
struct SliceRequest {
  PodType pod;
  std::string pod_type;  // pod->ToString()
  std::vector<int> topology;
  int chips_per_host = 0;
  int hosts = 0;
  std::map<std::string, double> bundle;               // each host's bundle
  std::string what;                                   // "2 slice(s) of v6e-16 (4x4) within 5m", for errors
  std::map<std::string, std::string> label_selector;  // the caller's, on every bundle
};

absl::StatusOr<SliceRequest> CheckSliceRequest(const SliceOptions& options) {
  auto invalid = [](absl::string_view why) { return absl::InvalidArgumentError(absl::StrCat("ReserveSlices: ", why)); };
  if (options.num_slices < 1) return invalid(absl::StrCat("num_slices must be at least 1, got ", options.num_slices));
  auto pod = PodTypeFromTopology(options.accelerator_version, options.topology);
  if (!pod.ok()) return invalid(pod.status().message());
  if (!IsValidTopology(options.accelerator_version, options.topology)) {
    return invalid(absl::StrCat("topology '", options.topology, "' is not valid for accelerator version '",
                                options.accelerator_version, "'"));
  }
  auto topology = ParseTopology(options.topology);
  if (!topology.ok()) return invalid(topology.status().message());
  auto chips = ChipsPerHost(*pod, *topology);
  auto hosts = HostsPerSlice(*pod, *topology);
  if (!chips.ok()) return invalid(chips.status().message());
  if (!hosts.ok()) return invalid(hosts.status().message());
  if (options.megascale_port <= 0 || options.megascale_port > 65535) {
    return invalid(absl::StrCat("megascale_port ", options.megascale_port, " is not a port"));
  }
  if (auto s = CheckSliceLabelSelector(options.label_selector, pod->ToString()); !s.ok()) return invalid(s.message());
  SliceRequest r{*pod, pod->ToString(),       *topology, *chips, *hosts, options.resources_per_bundle,
                 "",   options.label_selector};
  if (r.bundle.empty()) r.bundle[kTpuResource] = *chips;
  r.what = absl::StrCat(options.num_slices, " slice(s) of ", r.pod_type, " (", TopologyToString(r.topology),
                        ") within ", absl::FormatDuration(options.timeout));
  return r;
}

// The reservation's groups: one, or one per slice. Bundle h of slice s
// goes to the host with worker id h of one slice of the pod type, every
// host matching the caller's selector; the slice's bundles form one label
// domain of the slice-name label, so the GCS places a slice's bundles on
// one slice, and two slices on two, in one decision. Bundle 0 of a slice
// also holds the slice's TPU-<pod type>-head, as a reservation made through
// the head (Ray's way) does: a slice whose head is held is never taken.
std::vector<core::PlacementGroupData> SliceGroups(const SliceOptions& options, const SliceRequest& req) {
  std::vector<core::PlacementGroupData> specs;
  for (int s = 0; s < options.num_slices; ++s) {
    if (specs.empty() || !options.one_group) {
      specs.emplace_back();
      specs.back().id = PlacementGroupId::FromRandom();
      specs.back().strategy = options.strategy;
      specs.back().same_label = kLabelSliceName;
    }
    core::PlacementGroupData& g = specs.back();
    const int domain = options.one_group ? s : 0;
    for (int h = 0; h < req.hosts; ++h) {
      core::BundleData b;
      b.resources = req.bundle;
      if (h == 0) b.resources[HeadResourceName(req.pod)] = 1;
      b.label_selector = req.label_selector;
      b.label_selector[kLabelPodType] = req.pod_type;
      b.label_selector[kLabelWorkerId] = std::to_string(h);
      b.index = static_cast<int>(g.bundles.size());
      b.label_domain = domain;
      g.bundles.push_back(std::move(b));
    }
  }
  return specs;
}

// Creates the groups, then waits for each; every group made is in
// `made`, for the caller to remove on failure.
absl::StatusOr<std::vector<core::PlacementGroupData>> CreateAndWait(core::CoreWorker* core, absl::Time deadline,
                                                                    const SliceOptions& options,
                                                                    const SliceRequest& req,
                                                                    const std::vector<core::PlacementGroupData>& specs,
                                                                    std::vector<PlacementGroupId>& made) {
  // The last group's create waits for it in the same call: one round trip
  // for a single group.
  // A group whose create failed may exist all the same: each is in `made`
  // before its call.
  for (size_t i = 0; i + 1 < specs.size(); ++i) {
    made.push_back(specs[i].id);
    auto created = core->CreatePlacementGroup(specs[i]);
    if (!created.ok()) return Prefixed(created.status(), absl::StrCat("bundles of slice group ", i));
  }
  made.push_back(specs.back().id);
  auto last = core->CreatePlacementGroupAndWait(specs.back(), std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!last.ok()) return Prefixed(last.status(), absl::StrCat("bundles of slice group ", specs.size() - 1));
  std::vector<core::PlacementGroupData> ready_groups;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string what = options.one_group ? std::string("the slices' group") : absl::StrCat("the group of slice ", i);
    auto ready = i + 1 == specs.size() && last->state == core::PlacementGroupState::kCreated
                     ? absl::StatusOr<core::PlacementGroupData>(*last)
                     : WaitCreated(core, specs[i].id, deadline, what, req.what);
    if (!ready.ok()) return ready.status();
    ready_groups.push_back(*std::move(ready));
  }
  return ready_groups;
}

// The node of host `host` of slice `s`, from the created groups.
NodeId HostNode(const SliceOptions& options, const SliceRequest& req,
                const std::vector<core::PlacementGroupData>& ready_groups, int s, int host) {
  const core::PlacementGroupData& g = options.one_group ? ready_groups[0] : ready_groups[s];
  return g.bundles.at(options.one_group ? s * req.hosts + host : host).node_id;
}

const core::NodeData* FindNode(const std::vector<core::NodeData>& nodes, const NodeId& id) {
  for (const core::NodeData& n : nodes) {
    if (n.node_id == id) return &n;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<SliceReservation> TryReserveSlices(const SliceOptions& options) {
  ASSIGN_OR_RETURN(SliceRequest req, CheckSliceRequest(options));
  ASSIGN_OR_RETURN(core::CoreWorker * core, Core());
  // Time plus an infinite duration is the infinite future.
  const absl::Time deadline = absl::Now() + std::max(options.timeout, absl::ZeroDuration());
  std::vector<core::PlacementGroupData> specs = SliceGroups(options, req);
  std::vector<PlacementGroupId> made;
  auto fail = [&](absl::Status s) {
    RemoveAll(core, made);
    return s;
  };
  auto ready_groups = CreateAndWait(core, deadline, options, req, specs, made);
  if (!ready_groups.ok()) return fail(ready_groups.status());

  // Each host's address and each slice's name, from the node table.
  auto nodes = core->GetAllNodes();
  if (!nodes.ok()) return fail(Prefixed(nodes.status(), "cannot read the node table"));
  SliceReservation out;
  out.hosts_per_slice_ = req.hosts;
  out.one_group_ = options.one_group;
  out.megascale_port_ = options.megascale_port;
  out.bundle_resources_ = req.bundle;
  for (const auto& g : specs) out.groups_.emplace_back(g.id.Binary());
  for (int s = 0; s < options.num_slices; ++s) {
    std::vector<std::string> ips;
    std::string name;
    for (int h = 0; h < req.hosts; ++h) {
      const NodeId node = HostNode(options, req, *ready_groups, s, h);
      const core::NodeData* n = FindNode(*nodes, node);
      if (n == nullptr) {
        return fail(absl::UnavailableError(
            absl::StrCat("ReserveSlices: host ", h, " of slice ", s, " (node ", node.Hex(), ") left the cluster")));
      }
      if (h == 0) name = Label(*n, kLabelSliceName);
      ips.push_back(n->ip);
    }
    SliceInfo info;
    info.name = name;
    info.pod_type = req.pod_type;
    info.topology = TopologyToString(req.topology);
    info.num_hosts = req.hosts;
    info.expected_hosts = req.hosts;
    info.chips_per_host = req.chips_per_host;
    info.head_ip = ips.at(0);
    info.head_free = false;  // this reservation holds the head and every chip
    out.slices_.push_back(std::move(info));
    out.host_ips_.push_back(std::move(ips));
  }
  return out;
}

SliceReservation ReserveSlices(const SliceOptions& options) {
  auto r = TryReserveSlices(options);
  if (!r.ok()) throw Error(r.status());
  return *std::move(r);
}

// ---- The reservation ----------------------------------------------------------

namespace {

void CheckRange(int slice, int host, int num_slices, int hosts_per_slice) {
  if (slice < 0 || slice >= num_slices || host < 0 || host >= hosts_per_slice) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("no host ", host, " of slice ", slice, " (", num_slices,
                                                        " slice(s) of ", hosts_per_slice, " host(s))")));
  }
}

}  // namespace

const std::vector<std::string>& SliceReservation::host_ips(int slice) const {
  CheckRange(slice, 0, num_slices(), std::max(hosts_per_slice_, 1));
  return host_ips_.at(static_cast<size_t>(slice));
}

std::pair<PlacementGroup, int> SliceReservation::Bundle(int slice, int host) const {
  CheckRange(slice, host, num_slices(), hosts_per_slice_);
  if (one_group_) return {groups_.at(0), slice * hosts_per_slice_ + host};
  return {groups_.at(static_cast<size_t>(slice)), host};
}

std::map<std::string, std::string> SliceReservation::ProcessEnv(int slice, int host) const {
  return SliceProcessEnv(slices_, host_ips_, slice, host, megascale_port_);
}

void SliceReservation::Release() {
  std::vector<PlacementGroup> kept;
  absl::Status first_error;
  for (const PlacementGroup& g : groups_) {
    absl::Status s = TryRemovePlacementGroup(g);
    if (s.ok()) continue;
    kept.push_back(g);
    if (first_error.ok()) first_error = s;
  }
  groups_ = std::move(kept);
  if (!first_error.ok()) throw Error(first_error);
}

std::map<std::string, std::string> SliceProcessEnv(const std::vector<SliceInfo>& slices,
                                                   const std::vector<std::vector<std::string>>& host_ips, int slice,
                                                   int host, int megascale_port) {
  const int num_slices = static_cast<int>(slices.size());
  const int hosts = slice >= 0 && slice < static_cast<int>(host_ips.size())
                        ? static_cast<int>(host_ips[static_cast<size_t>(slice)].size())
                        : 0;
  CheckRange(slice, host, std::min(num_slices, static_cast<int>(host_ips.size())), hosts);
  const SliceInfo& info = slices[static_cast<size_t>(slice)];
  std::map<std::string, std::string> env;
  env[kEnvWorkerId] = std::to_string(host);
  env[kEnvWorkerHostnames] = absl::StrJoin(host_ips[static_cast<size_t>(slice)], ",");
  env[kEnvName] = info.name;
  env[kEnvAcceleratorType] = info.pod_type;
  env[kEnvTopology] = info.topology;
  if (num_slices > 1) {
    const std::vector<std::string>& first = host_ips.at(0);
    env["MEGASCALE_COORDINATOR_ADDRESS"] = first.empty() ? std::string() : first[0];
    env["MEGASCALE_NUM_SLICES"] = std::to_string(num_slices);
    env["MEGASCALE_SLICE_ID"] = std::to_string(slice);
    env["MEGASCALE_PORT"] = std::to_string(megascale_port);
  } else {
    for (const char* name :
         {"MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_PORT"}) {
      env[name] = "";
    }
  }
  return env;
}

}  // namespace manta::tpu
