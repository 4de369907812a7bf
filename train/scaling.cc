#include "train/scaling.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/utf8.h"
#include "manta/placement_group.h"
#include "manta/tpu.h"

namespace manta::train {
namespace {

// Quantity::kMaxValue: the largest quantity the GCS and raylets accept.
constexpr double kMaxQuantity = 9e14;

absl::Status CheckResources(const std::map<std::string, double>& resources) {
  for (const auto& [name, v] : resources) {
    if (name.empty()) return absl::InvalidArgumentError("resources_per_worker: a resource name is empty");
    if (!std::isfinite(v) || v < 0 || v > kMaxQuantity) {
      return absl::InvalidArgumentError(
          absl::StrCat("resources_per_worker: '", name, "' must be a finite quantity in [0, 9e14], got ", v));
    }
  }
  return absl::OkStatus();
}

absl::Status ResolveTpu(const ScalingConfig& scaling, ScalingSpec* spec) {
  if (scaling.topology.empty() || scaling.accelerator_type.empty()) {
    return absl::InvalidArgumentError(
        "use_tpu needs ScalingConfig.topology (e.g. \"4x4\") and accelerator_type (e.g. \"TPU-V6E\")");
  }
  auto shape = tpu::TrySliceShapeOf(scaling.accelerator_type, scaling.topology);
  if (!shape.ok()) return absl::InvalidArgumentError(absl::StrCat("ScalingConfig: ", shape.status().message()));
  spec->topology = shape->topology;
  spec->accelerator_version = scaling.accelerator_type;
  spec->pod_type = shape->pod_type;
  spec->accelerator_type = shape->accelerator_type;
  spec->hosts_per_slice = shape->hosts_per_slice;
  spec->chips_per_host = shape->chips_per_host;
  for (int n : {spec->min_workers, spec->max_workers}) {
    if (n % shape->hosts_per_slice != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("num_workers %d is not a whole number of %s slices (%d hosts each, one worker per host)", n,
                          shape->pod_type, shape->hosts_per_slice));
    }
  }
  if (spec->resources_per_worker.empty()) spec->resources_per_worker["TPU"] = shape->chips_per_host;
  auto tpu = spec->resources_per_worker.find("TPU");
  if (tpu == spec->resources_per_worker.end() || tpu->second != shape->chips_per_host) {
    return absl::InvalidArgumentError(
        absl::StrFormat("resources_per_worker: with use_tpu each worker holds a whole %s host, so TPU must be %d",
                        shape->pod_type, shape->chips_per_host));
  }
  return absl::OkStatus();
}

bool ValidDirName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

absl::StatusOr<ScalingSpec> ResolveScaling(const ScalingConfig& scaling) {
  ScalingSpec spec;
  spec.use_tpu = scaling.use_tpu;
  spec.min_workers = scaling.num_workers.min;
  spec.max_workers = scaling.num_workers.max;
  if (spec.min_workers < 1 || spec.max_workers < spec.min_workers) {
    return absl::InvalidArgumentError(absl::StrFormat("num_workers must be at least 1 (and min <= max), got {%d, %d}",
                                                      spec.min_workers, spec.max_workers));
  }
  if (auto s = CheckResources(scaling.resources_per_worker); !s.ok()) return s;
  spec.resources_per_worker = scaling.resources_per_worker;
  try {
    spec.placement_strategy = PlacementStrategyName(ParsePlacementStrategy(scaling.placement_strategy));
  } catch (const Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("placement_strategy: ", e.what()));
  }
  for (const auto& [key, value] : scaling.label_selector) {
    if (key.empty() || !IsValidUtf8(key) || !IsValidUtf8(value)) {
      return absl::InvalidArgumentError("label_selector: keys must be non-empty UTF-8 text, and values UTF-8 text");
    }
  }
  spec.label_selector = scaling.label_selector;
  if (spec.use_tpu) {
    if (auto s = ResolveTpu(scaling, &spec); !s.ok()) return s;
    // Slices whose every host matches; refused here, before anything is reserved.
    if (auto s = tpu::CheckSliceLabelSelector(spec.label_selector, spec.pod_type); !s.ok()) return s;
  } else if (spec.resources_per_worker.empty()) {
    spec.resources_per_worker["CPU"] = 1;
  }
  return spec;
}

absl::StatusOr<RunConfig> ResolveRunConfig(const RunConfig& run, absl::Time now) {
  RunConfig out = run;
  if (out.name.empty()) out.name = "manta_train_" + absl::FormatTime("%Y-%m-%d_%H-%M-%S", now, absl::LocalTimeZone());
  if (!IsValidUtf8(out.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RunConfig.name is not UTF-8 text: '", PrintableAscii(out.name, 80), "'"));
  }
  if (!ValidDirName(out.name) || out.name.size() > 200) {
    return absl::InvalidArgumentError(absl::StrCat("RunConfig.name '", PrintableAscii(out.name, 80),
                                                   "' must be a directory name (no '/', not '.' or '..')"));
  }
  if (out.storage_path.empty()) {
    const char* home = std::getenv("HOME");
    out.storage_path = home && *home ? std::string(home) + "/manta_results" : "/tmp/manta_results";
  }
  if (out.storage_path.find('\0') != std::string::npos || !IsValidUtf8(out.storage_path)) {
    return absl::InvalidArgumentError(absl::StrCat("RunConfig.storage_path is not UTF-8 text without NUL: '",
                                                   PrintableAscii(out.storage_path, 120), "'"));
  }
  if (out.failure_config.max_failures < -1) {
    return absl::InvalidArgumentError(absl::StrCat("FailureConfig.max_failures must be -1 (unlimited) or more, got ",
                                                   out.failure_config.max_failures));
  }
  if (out.checkpoint_config.num_to_keep < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointConfig.num_to_keep must be 0 (all) or more, got ", out.checkpoint_config.num_to_keep));
  }
  if (out.scheduling_timeout <= absl::ZeroDuration() || out.worker_start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RunConfig: scheduling_timeout and worker_start_timeout must be positive");
  }
  for (const auto& [k, v] : out.worker_env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos || !IsValidUtf8(k) || !IsValidUtf8(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("RunConfig.worker_env: '", PrintableAscii(k, 80), "' is not a valid variable"));
    }
  }
  return out;
}

std::vector<int> CandidateSizes(const ScalingSpec& spec) {
  std::vector<int> sizes;
  const int step = spec.use_tpu ? spec.hosts_per_slice : std::max(1, spec.max_workers - spec.min_workers);
  for (int n = spec.min_workers; n <= spec.max_workers; n += step) sizes.push_back(n);
  if (sizes.back() != spec.max_workers) sizes.push_back(spec.max_workers);
  return sizes;
}

WorkerGroupShape ShapeOf(const ScalingSpec& spec, int num_workers, int64_t host_memory_bytes) {
  WorkerGroupShape shape;
  shape.num_workers = num_workers;
  if (spec.use_tpu) {
    shape.num_slices = num_workers / spec.hosts_per_slice;
    shape.hosts_per_slice = spec.hosts_per_slice;
    shape.topology = spec.topology;
    shape.pod_type = spec.pod_type;
  }
  auto tpu = spec.resources_per_worker.find("TPU");
  shape.chips_per_worker = tpu == spec.resources_per_worker.end() ? 0 : static_cast<int>(tpu->second);
  shape.host_memory_bytes = host_memory_bytes;
  shape.elastic = spec.elastic();
  shape.max_workers = spec.max_workers;
  return shape;
}

std::string PythonDict(const std::map<std::string, double>& resources) {
  std::vector<std::string> items;
  for (const auto& [name, v] : resources) {
    std::string value =
        v == std::floor(v) && std::fabs(v) < 1e15 ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrFormat("%g", v);
    items.push_back(absl::StrCat("'", name, "': ", value));
  }
  return "{" + absl::StrJoin(items, ", ") + "}";
}

std::string RandomHexId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%016x%016x", rng(), rng());
}

}  // namespace manta::train
