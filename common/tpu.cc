#include "common/tpu.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace manta::tpu {
namespace {

constexpr int kDefaultChipsPerHost = 4;
// Beyond the largest slice of any generation; keeps chip counts in an int.
constexpr int64_t kMaxChipsInTopology = 1 << 16;

// Our APIs take std::string_view; this abseil build has its own string_view.
absl::string_view View(std::string_view s) { return {s.data(), s.size()}; }

struct Generation {
  const char* name;
  int cores_per_chip;
  // v5litepod and v6e put up to 8 chips on one host, for single-host
  // topologies only; larger slices use 4-chip hosts.
  bool single_host_up_to_8_chips;
};

constexpr Generation kGenerations[] = {
    {"v2", 2, false},       {"v3", 2, false}, {"v4", 2, false},  {"v5p", 2, false},
    {"v5litepod", 1, true}, {"v6e", 1, true}, {"v7x", 2, false},
};

const Generation* FindGeneration(absl::string_view name) {
  for (const Generation& g : kGenerations) {
    if (name == g.name) return &g;
  }
  return nullptr;
}

absl::Status UnknownGeneration(absl::string_view generation, absl::string_view input) {
  return absl::InvalidArgumentError(absl::StrCat("unknown TPU generation \"", generation, "\" in \"", input,
                                                 "\"; known generations: ", absl::StrJoin(KnownGenerations(), ", ")));
}

// The generation named by a generation, accelerator type or pod type.
absl::StatusOr<const Generation*> GenerationOf(std::string_view version_or_type) {
  const std::string normalized = NormalizeGeneration(version_or_type);
  const std::string name = normalized.substr(0, normalized.find('-'));
  const Generation* generation = FindGeneration(name);
  if (generation == nullptr) {
    return UnknownGeneration(name, View(version_or_type));
  }
  return generation;
}

bool IsDigits(absl::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
}

// Ray's table of topologies a slice placement group accepts, for the
// generations that list theirs explicitly.
const std::map<std::string, std::set<std::string>>& ExplicitTopologies() {
  static const auto* table = new std::map<std::string, std::set<std::string>>{
      {"v2", {"4x4", "4x8", "8x8", "8x16", "16x16"}},
      {"v3", {"4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"}},
      {"v5litepod", {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}},
      {"v6e", {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}},
      {"v7x", {"2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16"}},
  };
  return *table;
}

// v4 and v5p accept four small shapes plus every 3D shape whose dimensions
// are multiples of 4 up to these bounds.
struct CubeBounds {
  const char* generation;
  int max_x, max_y, max_z;
};
constexpr CubeBounds kCubeGenerations[] = {{"v4", 12, 12, 16}, {"v5p", 16, 16, 24}};

}  // namespace

const std::vector<std::string>& KnownGenerations() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const Generation& g : kGenerations) v->push_back(g.name);
    return v;
  }();
  return *names;
}

std::string NormalizeGeneration(std::string_view s) {
  std::string out = absl::AsciiStrToLower(absl::StripAsciiWhitespace(View(s)));
  absl::string_view rest = out;
  if (!absl::ConsumePrefix(&rest, "tpu")) return out;
  absl::ConsumePrefix(&rest, "-");
  absl::ConsumePrefix(&rest, "v");
  return absl::StrCat("v", rest);
}

int PodType::NumChips() const {
  const int cores_per_chip = CoresPerChip(generation);
  return cores_per_chip == 0 ? 0 : num_cores / cores_per_chip;
}

std::string PodType::ToString() const { return absl::StrCat(generation, "-", num_cores); }

absl::StatusOr<PodType> ParsePodType(std::string_view s) {
  const std::string normalized = NormalizeGeneration(s);
  std::vector<absl::string_view> parts = absl::StrSplit(normalized, '-');
  PodType pod_type;
  if (parts.size() != 2 || parts[0].empty() || !IsDigits(parts[1]) ||
      !absl::SimpleAtoi(parts[1], &pod_type.num_cores) || pod_type.num_cores <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid TPU pod type \"", View(s),
                                                   "\": expected <generation>-<TensorCores>, such as v6e-16 or v4-8"));
  }
  const Generation* generation = FindGeneration(parts[0]);
  if (generation == nullptr) return UnknownGeneration(parts[0], View(s));
  pod_type.generation = generation->name;
  if (pod_type.num_cores % generation->cores_per_chip != 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid TPU pod type \"", View(s), "\": ", generation->name,
                                                   " has ", generation->cores_per_chip, " cores per chip, so ",
                                                   pod_type.num_cores, " cores is not a whole number of chips"));
  }
  return pod_type;
}

absl::StatusOr<std::vector<int>> ParseTopology(std::string_view s) {
  const std::string normalized = absl::AsciiStrToLower(absl::StripAsciiWhitespace(View(s)));
  std::vector<absl::string_view> parts = absl::StrSplit(normalized, 'x');
  std::vector<int> dims;
  int64_t chips = 1;
  for (absl::string_view part : parts) {
    int dim = 0;
    if (!IsDigits(part) || !absl::SimpleAtoi(part, &dim) || dim <= 0) break;
    chips *= dim;
    if (chips > kMaxChipsInTopology) break;
    dims.push_back(dim);
  }
  if ((parts.size() != 2 && parts.size() != 3) || dims.size() != parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid TPU topology \"", View(s),
                                                   "\": expected 2 or 3 positive dimensions such as 4x4 or 2x2x2, at "
                                                   "most ",
                                                   kMaxChipsInTopology, " chips"));
  }
  return dims;
}

std::string TopologyToString(const std::vector<int>& topology) { return absl::StrJoin(topology, "x"); }

int ChipsInTopology(const std::vector<int>& topology) {
  int chips = 1;
  for (int dim : topology) chips *= dim;
  return chips;
}

int CoresPerChip(std::string_view generation) {
  const Generation* g = FindGeneration(View(generation));
  return g == nullptr ? 0 : g->cores_per_chip;
}

bool IsValidTopology(std::string_view generation, std::string_view topology) {
  const std::string normalized = NormalizeGeneration(generation);
  const std::string name = normalized.substr(0, normalized.find('-'));
  absl::StatusOr<std::vector<int>> dims = ParseTopology(topology);
  if (!dims.ok()) return false;
  const std::string canonical = TopologyToString(*dims);

  const auto& explicit_table = ExplicitTopologies();
  if (auto it = explicit_table.find(name); it != explicit_table.end()) {
    return it->second.count(canonical) > 0;
  }
  for (const CubeBounds& cube : kCubeGenerations) {
    if (name != cube.generation) continue;
    if (canonical == "2x2x1" || canonical == "2x2x2" || canonical == "2x2x4" || canonical == "2x4x4") {
      return true;
    }
    if (dims->size() != 3) return false;
    const int max_dims[] = {cube.max_x, cube.max_y, cube.max_z};
    for (size_t i = 0; i < 3; ++i) {
      const int d = (*dims)[i];
      if (d % kDefaultChipsPerHost != 0 || d > max_dims[i]) return false;
    }
    return true;
  }
  return false;
}

absl::StatusOr<int> ChipsPerHost(const PodType& pod_type, const std::vector<int>& topology) {
  const Generation* generation = FindGeneration(pod_type.generation);
  if (generation == nullptr) {
    return UnknownGeneration(pod_type.generation, pod_type.ToString());
  }
  const std::string shape = TopologyToString(topology);
  if (!ParseTopology(shape).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid TPU topology \"", shape, "\" for pod type ", pod_type.ToString()));
  }
  const int chips = ChipsInTopology(topology);
  if (chips * generation->cores_per_chip != pod_type.num_cores) {
    return absl::InvalidArgumentError(absl::StrCat("TPU topology ", shape, " has ", chips, " chips (",
                                                   chips * generation->cores_per_chip, " cores at ",
                                                   generation->cores_per_chip, " per chip) but pod type ",
                                                   pod_type.ToString(), " has ", pod_type.num_cores, " cores"));
  }
  if (generation->single_host_up_to_8_chips && (shape == "1x1" || shape == "2x2" || shape == "2x4")) {
    return chips;
  }
  return std::min(chips, kDefaultChipsPerHost);
}

absl::StatusOr<int> HostsPerSlice(const PodType& pod_type, const std::vector<int>& topology) {
  ASSIGN_OR_RETURN(const int chips_per_host, ChipsPerHost(pod_type, topology));
  const int chips = ChipsInTopology(topology);
  return (chips + chips_per_host - 1) / chips_per_host;
}

absl::StatusOr<std::string> AcceleratorTypeName(std::string_view version_or_type) {
  ASSIGN_OR_RETURN(const Generation* generation, GenerationOf(version_or_type));
  return absl::StrCat("TPU-", absl::AsciiStrToUpper(generation->name));
}

std::string AcceleratorTypeResourceName(std::string_view accelerator_type) {
  return absl::StrCat("accelerator_type:", View(accelerator_type));
}

std::string HeadResourceName(const PodType& pod_type) { return absl::StrCat("TPU-", pod_type.ToString(), "-head"); }

absl::StatusOr<PodType> PodTypeFromTopology(std::string_view generation_or_accelerator_type,
                                            std::string_view topology) {
  ASSIGN_OR_RETURN(const Generation* generation, GenerationOf(generation_or_accelerator_type));
  ASSIGN_OR_RETURN(const std::vector<int> dims, ParseTopology(topology));
  return PodType{generation->name, ChipsInTopology(dims) * generation->cores_per_chip};
}

std::string TpuHost::AcceleratorType() const {
  return absl::StrCat("TPU-", absl::AsciiStrToUpper(pod_type.generation));
}

std::map<std::string, double> TpuHost::Resources() const {
  std::map<std::string, double> resources = {
      {kTpuResource, static_cast<double>(chips_per_host)},
      {AcceleratorTypeResourceName(AcceleratorType()), 1},
      {slice_name, 1},
  };
  if (worker_id == 0) resources[HeadResourceName(pod_type)] = 1;
  return resources;
}

std::map<std::string, std::string> TpuHost::Labels() const {
  return {
      {kLabelSliceName, slice_name},        {kLabelWorkerId, absl::StrCat(worker_id)},  {kLabelTopology, topology_str},
      {kLabelPodType, pod_type.ToString()}, {kLabelAcceleratorType, AcceleratorType()},
  };
}

namespace {

// A variable's value without surrounding whitespace; nullopt when unset or
// blank.
std::optional<std::string> EnvValue(const EnvLookup& env, const char* name) {
  std::optional<std::string> value = env(name);
  if (!value.has_value()) return std::nullopt;
  std::string stripped(absl::StripAsciiWhitespace(*value));
  if (stripped.empty()) return std::nullopt;
  return stripped;
}

std::string EnvContext(const char* name, const std::string& value) { return absl::StrCat(name, "=\"", value, "\""); }

absl::Status Missing(const char* name, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(name, " is not set; it is required ", why));
}

// TPU_WORKER_ID: required on a multi-host slice, a host index.
absl::Status SetWorkerId(const std::optional<std::string>& worker_id, TpuHost& host) {
  if (!worker_id.has_value()) {
    if (host.hosts_per_slice <= 1) return absl::OkStatus();
    return Missing(kEnvWorkerId, absl::StrCat("on a host of a multi-host slice (", host.pod_type.ToString(), " has ",
                                              host.hosts_per_slice, " hosts)"));
  }
  if (!IsDigits(*worker_id) || !absl::SimpleAtoi(*worker_id, &host.worker_id) ||
      host.worker_id >= host.hosts_per_slice) {
    return absl::InvalidArgumentError(absl::StrCat(EnvContext(kEnvWorkerId, *worker_id),
                                                   ": expected a host index in [0, ", host.hosts_per_slice, ") for ",
                                                   host.pod_type.ToString(), " with topology ", host.topology_str));
  }
  return absl::OkStatus();
}

// TPU_CHIPS_PER_HOST_BOUNDS: positive bounds whose product is the chips
// per host.
absl::Status CheckChipsPerHostBounds(const std::string& bounds, const TpuHost& host) {
  int64_t product = 1;
  bool well_formed = true;
  for (absl::string_view part : absl::StrSplit(bounds, ',')) {
    int dim = 0;
    part = absl::StripAsciiWhitespace(part);
    if (!IsDigits(part) || !absl::SimpleAtoi(part, &dim) || dim <= 0 || product * dim > kMaxChipsInTopology) {
      well_formed = false;
      break;
    }
    product *= dim;
  }
  if (well_formed && product == host.chips_per_host) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      EnvContext(kEnvChipsPerHostBounds, bounds), ": expected positive comma-separated bounds whose product is the ",
      host.chips_per_host, " chips per host of ", host.pod_type.ToString(), " with topology ", host.topology_str));
}

// TPU_WORKER_HOSTNAMES: one name per host of the slice.
absl::Status SetWorkerHostnames(const std::string& hostnames, TpuHost& host) {
  host.worker_hostnames = absl::StrSplit(hostnames, ',', absl::SkipWhitespace());
  for (std::string& h : host.worker_hostnames) absl::StripAsciiWhitespace(&h);
  if (static_cast<int>(host.worker_hostnames.size()) == host.hosts_per_slice) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(EnvContext(kEnvWorkerHostnames, hostnames), ": lists ",
                                                 host.worker_hostnames.size(), " hosts but ", host.pod_type.ToString(),
                                                 " with topology ", host.topology_str, " has ", host.hosts_per_slice));
}

}  // namespace

absl::StatusOr<std::optional<TpuHost>> DetectTpuHost(const EnvLookup& env) {
  const std::optional<std::string> type = EnvValue(env, kEnvAcceleratorType);
  if (!type.has_value()) return std::nullopt;

  TpuHost host;
  absl::StatusOr<PodType> pod_type = ParsePodType(*type);
  if (!pod_type.ok()) return Annotate(pod_type.status(), EnvContext(kEnvAcceleratorType, *type));
  host.pod_type = *std::move(pod_type);

  const std::optional<std::string> topology = EnvValue(env, kEnvTopology);
  if (!topology.has_value()) return Missing(kEnvTopology, "on a TPU host to size the slice");
  absl::StatusOr<std::vector<int>> dims = ParseTopology(*topology);
  if (!dims.ok()) return Annotate(dims.status(), EnvContext(kEnvTopology, *topology));
  host.topology = *std::move(dims);
  host.topology_str = TopologyToString(host.topology);

  absl::StatusOr<int> chips_per_host = ChipsPerHost(host.pod_type, host.topology);
  if (!chips_per_host.ok()) {
    return Annotate(chips_per_host.status(), absl::StrCat(EnvContext(kEnvTopology, *topology), " with ",
                                                          EnvContext(kEnvAcceleratorType, *type)));
  }
  host.chips_per_host = *chips_per_host;
  host.hosts_per_slice = (ChipsInTopology(host.topology) + host.chips_per_host - 1) / host.chips_per_host;

  const std::optional<std::string> name = EnvValue(env, kEnvName);
  if (!name.has_value()) return Missing(kEnvName, "on a TPU host to name its slice");
  host.slice_name = *name;

  RETURN_IF_ERROR(SetWorkerId(EnvValue(env, kEnvWorkerId), host));
  if (const std::optional<std::string> bounds = EnvValue(env, kEnvChipsPerHostBounds)) {
    RETURN_IF_ERROR(CheckChipsPerHostBounds(*bounds, host));
  }
  if (const std::optional<std::string> hostnames = EnvValue(env, kEnvWorkerHostnames)) {
    RETURN_IF_ERROR(SetWorkerHostnames(*hostnames, host));
  }
  return host;
}

absl::StatusOr<std::map<std::string, std::string>> VisibleChipsEnv(const std::vector<int>& chip_ids,
                                                                   int chips_per_host) {
  const int count = static_cast<int>(chip_ids.size());
  if (chips_per_host <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("chips_per_host must be positive, got ", chips_per_host));
  }
  if (!IsValidTpuRequest(count) || count > chips_per_host) {
    return absl::InvalidArgumentError(absl::StrCat("a process cannot hold ", count, " TPU chips on a host with ",
                                                   chips_per_host, "; a process holds 1, 2, 4 or 8 chips"));
  }
  std::set<int> seen;
  for (int id : chip_ids) {
    if (id < 0 || id >= chips_per_host || !seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("invalid TPU chip ids [", absl::StrJoin(chip_ids, ","),
                                                     "]: expected distinct ids in [0, ", chips_per_host, ")"));
    }
  }

  std::map<std::string, std::string> env;
  if (count == chips_per_host) return env;
  env[kEnvVisibleChips] = absl::StrJoin(chip_ids, ",");
  if (count == 1 || count == 2) {
    env[kEnvChipsPerHostBounds] = count == 1 ? "1,1,1" : "1,2,1";
    env[kEnvHostBounds] = "1,1,1";
  }
  return env;
}

bool IsValidTpuRequest(double num_chips) {
  return num_chips == 1 || num_chips == 2 || num_chips == 4 || num_chips == 8;
}

absl::Status ValidateTpuLabel(std::string_view key, std::string_view value) {
  absl::Status s;
  if (key == kLabelAcceleratorType) {
    s = AcceleratorTypeName(value).status();
  } else if (key == kLabelPodType) {
    s = ParsePodType(value).status();
  } else if (key == kLabelTopology) {
    s = ParseTopology(value).status();
  }
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("'", std::string(value.substr(0, 64)), "' is not a valid ",
                                                 std::string(key.substr(key.find('/') + 1)), ": ", s.message()));
}

}  // namespace manta::tpu
