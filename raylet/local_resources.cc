#include "raylet/local_resources.h"

#include <sched.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace manta::raylet {
namespace {

bool LabelKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '/';
}
bool LabelValueChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

int64_t ReadCgroupLimit() {
  std::ifstream f("/sys/fs/cgroup/memory.max");
  std::string v;
  if (!(f >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (...) {
    return -1;
  }
}

}  // namespace

int DetectCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 1;
}

int64_t DetectMemoryBytes() {
  int64_t total = 0;
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemTotal:") {
      total = kb * 1024;
      break;
    }
  }
  int64_t cgroup = ReadCgroupLimit();
  if (cgroup > 0 && (total == 0 || cgroup < total)) total = cgroup;
  return static_cast<int64_t>(static_cast<double>(total) * 0.7);
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> labels;
  if (text.empty()) return labels;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError("--labels: '" + item + "' is not key=value");
    }
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k.empty() || k.size() > 253 || !std::all_of(k.begin(), k.end(), LabelKeyChar)) {
      return absl::InvalidArgumentError("--labels: invalid key '" + k + "'");
    }
    if (v.size() > 63 || !std::all_of(v.begin(), v.end(), LabelValueChar)) {
      return absl::InvalidArgumentError("--labels: invalid value '" + v + "' for key '" + k + "'");
    }
    if (k.rfind("manta.io/", 0) == 0) {
      return absl::InvalidArgumentError("--labels: the manta.io/ prefix is reserved ('" + k + "')");
    }
    labels[k] = v;
  }
  return labels;
}

absl::StatusOr<LocalResources> DetectLocalResources(const LocalResourceOptions& options, const tpu::EnvLookup& env) {
  LocalResources out;
  if (!options.resources_json.empty()) {
    auto user = ParseResourcesJson(options.resources_json);
    if (!user.ok()) return Annotate(user.status(), "--resources");
    for (const char* reserved : {"CPU", "memory"}) {
      if (!user->Get(reserved).IsZero()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--resources: use --num-cpus / --memory instead of '", reserved, "' in --resources"));
      }
    }
    for (const auto& [name, q] : user->entries()) {
      RETURN_IF_ERROR(Annotate(CheckCustomResourceName(name), "--resources"));
    }
    out.total = *user;
  }
  double cpus = options.num_cpus;
  if (std::isnan(cpus)) return absl::InvalidArgumentError("--num-cpus is NaN");
  if (cpus < 0) cpus = DetectCpus();
  auto cpu_q = Quantity::FromDouble(cpus);
  if (!cpu_q.ok()) return Annotate(cpu_q.status(), "--num-cpus");
  out.total.Set("CPU", *cpu_q);
  double memory = options.memory_bytes;
  if (std::isnan(memory)) return absl::InvalidArgumentError("--memory is NaN");
  if (memory < 0) memory = static_cast<double>(DetectMemoryBytes());
  auto mem_q = Quantity::FromDouble(std::floor(memory));
  if (!mem_q.ok()) return Annotate(mem_q.status(), "--memory");
  out.total.Set("memory", *mem_q);
  // Ray's per-node resources: one "node:<ip>" unit, and a head marker.
  out.total.Set("node:" + options.node_ip, Quantity::FromUnits(Quantity::kScale));
  if (options.is_head) out.total.Set("node:__internal_head__", Quantity::FromUnits(Quantity::kScale));

  ASSIGN_OR_RETURN(out.labels, ParseLabels(options.labels));
  auto tpu = tpu::DetectTpuHost(env);
  if (!tpu.ok()) return tpu.status();
  out.tpu = *tpu;
  if (out.tpu) {
    for (const auto& [name, qty] : out.tpu->Resources()) {
      if (!out.total.Get(name).IsZero()) {
        return absl::InvalidArgumentError("--resources: '" + name + "' is set by the TPU environment");
      }
      out.total.Set(name, *Quantity::FromDouble(qty));
    }
    for (const auto& [k, v] : out.tpu->Labels()) out.labels[k] = v;
  }
  return out;
}

}  // namespace manta::raylet
