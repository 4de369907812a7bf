// The hosts `manta up` starts (up.h): pure, no gRPC.
#include "absl/strings/str_cat.h"
#include "cli/up.h"
#include "common/status.h"
#include "common/tpu.h"

namespace manta::cli {
namespace {
constexpr int kMaxSlices = 64;
constexpr int kMaxHosts = 256;
}  // namespace

absl::StatusOr<std::string> DefaultTopology(const std::string& pod_type) {
  auto pod = tpu::ParsePodType(pod_type);
  if (!pod.ok()) return absl::InvalidArgumentError(absl::StrCat("--tpu: ", pod.status().message()));
  const int chips = pod->NumChips();
  std::string best;
  int best_max = 0;
  auto consider = [&](std::vector<int> dims) {
    const std::string t = tpu::TopologyToString(dims);
    const int largest = *std::max_element(dims.begin(), dims.end());
    if (tpu::IsValidTopology(pod->generation, t) && (best.empty() || largest < best_max)) {
      best = t;
      best_max = largest;
    }
  };
  const bool planar = tpu::CoresPerChip(pod->generation) == 1;  // v5litepod, v6e: 2D meshes
  for (int x = 1; x <= chips; x *= 2) {
    for (int y = x; x * y <= chips; y *= 2) {
      if (planar) {
        if (x * y == chips) consider({x, y});
        continue;
      }
      for (int z = y; x * y * z <= chips; z *= 2) {
        if (x * y * z == chips) consider({x, y, z});
      }
    }
  }
  if (best.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tpu ", pod_type, " has no topology a slice can take"));
  }
  return best;
}

absl::StatusOr<std::vector<SimulatedHost>> PlanHosts(const UpOptions& o) {
  if (o.slices < 0 || o.slices > kMaxSlices) {
    return absl::InvalidArgumentError(absl::StrCat("--slices must be from 0 to ", kMaxSlices));
  }
  if (o.cpu_hosts < 0) return absl::InvalidArgumentError("--cpu-hosts must not be negative");
  if (o.host_cpus < 0 || o.host_cpus > 1024) return absl::InvalidArgumentError("--host-cpus must be from 0 to 1024");
  std::vector<SimulatedHost> hosts;
  if (!o.tpu.empty() && o.slices > 0) {
    std::string topology = o.topology;
    if (topology.empty()) {
      ASSIGN_OR_RETURN(topology, DefaultTopology(o.tpu));
    }
    auto pod = tpu::ParsePodType(o.tpu);
    if (!pod.ok()) return absl::InvalidArgumentError(absl::StrCat("--tpu: ", pod.status().message()));
    auto dims = tpu::ParseTopology(topology);
    if (!dims.ok()) return absl::InvalidArgumentError(absl::StrCat("--topology: ", dims.status().message()));
    auto per_slice = tpu::HostsPerSlice(*pod, *dims);
    if (!per_slice.ok()) return absl::InvalidArgumentError(absl::StrCat("--topology: ", per_slice.status().message()));
    if (o.slices * *per_slice + o.cpu_hosts > kMaxHosts) {
      return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxHosts, " hosts on one machine (asked for ",
                                                     o.slices * *per_slice + o.cpu_hosts, ")"));
    }
    for (int s = 0; s < o.slices; ++s) {
      const std::string name = absl::StrCat("tpu-group-", s);
      for (int w = 0; w < *per_slice; ++w) {
        hosts.push_back({{{tpu::kEnvAcceleratorType, pod->ToString()},
                          {tpu::kEnvTopology, tpu::TopologyToString(*dims)},
                          {tpu::kEnvWorkerId, std::to_string(w)},
                          {tpu::kEnvName, name}},
                         absl::StrCat(name, " worker ", w)});
      }
    }
  } else if (!o.tpu.empty() || !o.topology.empty()) {
    if (o.tpu.empty()) return absl::InvalidArgumentError("--topology needs --tpu");
  }
  if (o.cpu_hosts > kMaxHosts - static_cast<int>(hosts.size())) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxHosts, " hosts on one machine"));
  }
  for (int i = 0; i < o.cpu_hosts; ++i) hosts.push_back({{}, absl::StrCat("cpu host ", i)});
  return hosts;
}

}  // namespace manta::cli
