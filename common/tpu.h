// TPU host rules: pod types, topologies, chips per host, and the resources,
// labels and per-process environment a TPU host contributes. The rules follow
// Ray's (`ray/_private/accelerators/tpu.py`), so that a GKE TPU pod looks the
// same to Manta as it does to Ray. Every function is pure and thread-safe.
//
//   auto host = manta::tpu::DetectTpuHost([](const char* name)
//       -> std::optional<std::string> {
//     const char* v = std::getenv(name);
//     return v ? std::optional<std::string>(v) : std::nullopt;
//   });
//   if (!host.ok()) return host.status();   // inconsistent TPU environment
//   if (host->has_value()) {
//     for (const auto& [name, amount] : (*host)->Resources()) ...
//   }
//
// Vocabulary (Ray's):
//   generation       "v6e", "v5p", "v5litepod", ... (Ray: accelerator version)
//   accelerator type "TPU-V6E": the generation as a resource suffix
//   pod type         "v6e-16": generation and TensorCores in the slice
//   topology         "4x4", "2x2x2": chips along each axis of the slice
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::tpu {

// Environment variables set on a GKE TPU pod.
inline constexpr char kEnvAcceleratorType[] = "TPU_ACCELERATOR_TYPE";
inline constexpr char kEnvTopology[] = "TPU_TOPOLOGY";
inline constexpr char kEnvWorkerId[] = "TPU_WORKER_ID";
inline constexpr char kEnvName[] = "TPU_NAME";
inline constexpr char kEnvWorkerHostnames[] = "TPU_WORKER_HOSTNAMES";
// Also set per process for a partial host, with the two below.
inline constexpr char kEnvChipsPerHostBounds[] = "TPU_CHIPS_PER_HOST_BOUNDS";
// Set per process.
inline constexpr char kEnvVisibleChips[] = "TPU_VISIBLE_CHIPS";
inline constexpr char kEnvHostBounds[] = "TPU_HOST_BOUNDS";

// Resource holding this host's chips.
inline constexpr char kTpuResource[] = "TPU";

// Node labels of a TPU host.
inline constexpr char kLabelSliceName[] = "manta.io/tpu-slice-name";
inline constexpr char kLabelWorkerId[] = "manta.io/tpu-worker-id";
inline constexpr char kLabelTopology[] = "manta.io/tpu-topology";
inline constexpr char kLabelPodType[] = "manta.io/tpu-pod-type";
inline constexpr char kLabelAcceleratorType[] = "manta.io/accelerator-type";

// The known generations, oldest first: v2, v3, v4, v5p, v5litepod, v6e, v7x.
const std::vector<std::string>& KnownGenerations();

// Lower-cases and trims `s` and spells a generation prefix the canonical way:
// "TPU-V6E" -> "v6e", "tpu7x-8" -> "v7x-8", " V4-16 " -> "v4-16". Does not
// check that the result names a known generation.
std::string NormalizeGeneration(std::string_view s);

// A pod type such as "v6e-16": generation "v6e", num_cores 16. The functions
// below that return one guarantee a known, normalized generation and a core
// count that is a positive multiple of its cores per chip.
struct PodType {
  std::string generation;
  int num_cores = 0;

  int NumChips() const;
  // "v6e-16".
  std::string ToString() const;
  bool operator==(const PodType& other) const { return generation == other.generation && num_cores == other.num_cores; }
};

// Parses "<generation>-<cores>" after NormalizeGeneration, so "v6e-16",
// "V6E-16" and "tpu7x-8" are accepted. Returns InvalidArgument for bad
// syntax, an unknown generation, or a core count that is not a positive
// multiple of the generation's cores per chip ("v4-7").
absl::StatusOr<PodType> ParsePodType(std::string_view s);

// Parses a topology of two or three positive dimensions ("4x4", "2x2x2";
// surrounding blanks and an upper-case "X" are accepted). Returns
// InvalidArgument otherwise.
absl::StatusOr<std::vector<int>> ParseTopology(std::string_view s);

// "4x4" for {4, 4}.
std::string TopologyToString(const std::vector<int>& topology);

// Product of the dimensions: 16 for 4x4, 8 for 2x2x2.
int ChipsInTopology(const std::vector<int>& topology);

// TensorCores per chip: 1 for v5litepod and v6e, 2 for every other known
// generation, 0 for an unknown one. `generation` must be normalized.
int CoresPerChip(std::string_view generation);

// Whether Ray's slice placement groups accept `topology` for `generation`
// (its per-generation table; e.g. v6e: 1x1 ... 16x16, v4: 2x2x1, 2x2x2, 2x2x4,
// 2x4x4 and larger multiples of 4). `generation` may be any spelling that
// NormalizeGeneration accepts. Detection does not apply this table.
bool IsValidTopology(std::string_view generation, std::string_view topology);

// Chips on each host of a slice of `pod_type` shaped `topology`. Single-host
// topologies (1x1, 2x2, 2x4) of v5litepod and v6e put every chip on one host;
// otherwise a host has 4 chips, or all of them if the slice has fewer.
// Returns InvalidArgument if the topology's chips disagree with the pod
// type's cores (e.g. v6e-16 with 2x2).
absl::StatusOr<int> ChipsPerHost(const PodType& pod_type, const std::vector<int>& topology);

// Hosts in such a slice: ceil(chips / chips per host). Same errors.
absl::StatusOr<int> HostsPerSlice(const PodType& pod_type, const std::vector<int>& topology);

// The accelerator type for a generation, accelerator type or pod type:
// "v6e", "TPU-V6E", "tpu-v6e" and "v6e-16" all give "TPU-V6E". Returns
// InvalidArgument for an unknown generation.
absl::StatusOr<std::string> AcceleratorTypeName(std::string_view version_or_type);

// "accelerator_type:TPU-V6E": the resource every host of that generation has.
std::string AcceleratorTypeResourceName(std::string_view accelerator_type);

// "TPU-v6e-16-head": the resource that worker 0 of each slice holds.
std::string HeadResourceName(const PodType& pod_type);

// The pod type of a slice of `generation_or_accelerator_type` ("v6e",
// "TPU-V6E") shaped `topology`: v6e + 4x4 -> v6e-16, v4 + 2x2x2 -> v4-16.
// Returns InvalidArgument for an unknown generation or a malformed topology.
absl::StatusOr<PodType> PodTypeFromTopology(std::string_view generation_or_accelerator_type, std::string_view topology);

// Everything a raylet derives from a GKE TPU pod's environment.
struct TpuHost {
  PodType pod_type;
  std::vector<int> topology;
  std::string topology_str;  // Normalized, e.g. "4x4".
  std::string slice_name;    // TPU_NAME.
  int worker_id = 0;         // In [0, hosts_per_slice).
  int chips_per_host = 0;
  int hosts_per_slice = 0;
  std::vector<std::string> worker_hostnames;  // Empty if not given.

  // "TPU-V6E".
  std::string AcceleratorType() const;
  // TPU = chips_per_host, accelerator_type:<type> = 1, <slice_name> = 1, and
  // on worker 0 only TPU-<pod type>-head = 1.
  std::map<std::string, double> Resources() const;
  // The five manta.io/ TPU labels: slice name, worker id, topology, pod type
  // and accelerator type.
  std::map<std::string, std::string> Labels() const;
};

// Reads a variable; nullopt when unset. Empty values count as unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Derives this host's TpuHost from the TPU_* variables. Returns nullopt when
// TPU_ACCELERATOR_TYPE is unset or empty (not a TPU host). Returns
// InvalidArgument, naming the variable and its value, when:
//   - TPU_ACCELERATOR_TYPE is not a valid pod type;
//   - TPU_TOPOLOGY is missing, malformed, or disagrees with the pod type;
//   - TPU_NAME is missing;
//   - TPU_WORKER_ID is not a number or not below the slice's host count; it
//     may be omitted only on a single-host slice, where it is 0;
//   - TPU_CHIPS_PER_HOST_BOUNDS ("2,2,1") is malformed or its product is not
//     the chips per host the type and topology imply;
//   - TPU_WORKER_HOSTNAMES does not list one name per host of the slice.
absl::StatusOr<std::optional<TpuHost>> DetectTpuHost(const EnvLookup& env);

// The TPU variables for a process given `chip_ids` of a host with
// `chips_per_host` chips. A partial host gets TPU_VISIBLE_CHIPS ("0,1", in
// the given order) and, for 1 or 2 chips, TPU_CHIPS_PER_HOST_BOUNDS ("1,1,1"
// or "1,2,1") with TPU_HOST_BOUNDS = "1,1,1". A process holding every chip
// gets an empty map: it sees the whole host. The launcher must first drop
// TPU_VISIBLE_CHIPS, TPU_CHIPS_PER_HOST_BOUNDS and TPU_HOST_BOUNDS from the
// environment the process inherits, then apply the map.
// Returns InvalidArgument unless the count is 1, 2, 4 or 8 and at most
// `chips_per_host`, and the ids are distinct and in [0, chips_per_host).
absl::StatusOr<std::map<std::string, std::string>> VisibleChipsEnv(const std::vector<int>& chip_ids,
                                                                   int chips_per_host);

// Whether a task or actor may hold `num_chips` TPU: 1, 2, 4 or 8.
bool IsValidTpuRequest(double num_chips);

// Checks one value of a TPU label, as a node carries it or a label selector
// names it: kLabelAcceleratorType must name a known generation ("TPU-V6E"),
// kLabelPodType a valid pod type ("v6e-16"), kLabelTopology a well-formed
// topology ("4x4"). InvalidArgument, naming the value, otherwise; OK for
// every other key.
absl::Status ValidateTpuLabel(std::string_view key, std::string_view value);

}  // namespace manta::tpu
