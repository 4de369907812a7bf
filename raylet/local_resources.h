// What this host offers the cluster: CPU, memory, TPU chips (from the GKE TPU
// environment), user resources and labels.
//
//   LocalResourceOptions opts{.num_cpus = -1, .resources_json = "{\"ssd\": 1}"};
//   ASSIGN_OR_RETURN(LocalResources local, DetectLocalResources(opts, GetEnv));
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/resources.h"
#include "common/tpu.h"

namespace manta::raylet {

struct LocalResourceOptions {
  double num_cpus = -1;        // < 0: detect
  double memory_bytes = -1;    // < 0: detect
  std::string resources_json;  // user resources, '{"name": quantity}'
  std::string labels;          // "k=v,k2=v2"
  std::string node_ip = "127.0.0.1";
  bool is_head = false;
};

struct LocalResources {
  ResourceSet total;
  std::map<std::string, std::string> labels;
  std::optional<tpu::TpuHost> tpu;
};

// Errors (InvalidArgument, naming the flag or variable): malformed or
// negative/NaN/infinite/absurd quantities, CPU or memory given through
// --resources, malformed labels, an invalid TPU environment.
absl::StatusOr<LocalResources> DetectLocalResources(const LocalResourceOptions& options, const tpu::EnvLookup& env);

// Parses "k=v,k2=v2". Keys: 1-253 of [A-Za-z0-9._/-]; values: at most 63 of
// [A-Za-z0-9._-] (Kubernetes' label rules, which Ray follows).
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text);

// CPUs this process may run on; memory Manta offers by default (70% of the
// host's or the cgroup's limit, the rest is left for the system).
int DetectCpus();
int64_t DetectMemoryBytes();

}  // namespace manta::raylet
