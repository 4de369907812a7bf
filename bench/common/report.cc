#include "bench/common/report.h"

#include <cstdio>

#include "common/file_util.h"
#include "nlohmann/json.hpp"

namespace manta::bench {

void Report::Add(const std::string& metric, double value, const std::string& unit, std::optional<double> baseline) {
  rows_.push_back({metric, value, unit, baseline});
}

void Report::Print() const {
  std::printf("%-34s %14s %-14s %14s %9s\n", "metric", "value", "unit", "baseline", "ratio");
  for (const Row& r : rows_) {
    if (r.baseline && *r.baseline != 0) {
      std::printf("%-34s %14.3f %-14s %14.3f %9.3f\n", r.metric.c_str(), r.value, r.unit.c_str(), *r.baseline,
                  r.value / *r.baseline);
    } else {
      std::printf("%-34s %14.3f %-14s %14s %9s\n", r.metric.c_str(), r.value, r.unit.c_str(), "-", "-");
    }
  }
}

absl::Status Report::WriteJson(const std::string& path) const {
  nlohmann::json j = nlohmann::json::object();
  for (const Row& r : rows_) {
    nlohmann::json m = {{"value", r.value}, {"unit", r.unit}};
    if (r.baseline) {
      m["baseline"] = *r.baseline;
      if (*r.baseline != 0) m["ratio"] = r.value / *r.baseline;
    }
    j[r.metric] = m;
  }
  return WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace manta::bench
