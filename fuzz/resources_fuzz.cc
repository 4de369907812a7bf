// Resource and TPU strings from flags and requests: `--resources` JSON, pod
// types ("v6e-16") and topologies ("4x4"). Accepted quantities are finite,
// not negative and within the maximum.
#include <cmath>
#include <cstdint>
#include <string>

#include "common/resources.h"
#include "common/tpu.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  auto set = manta::ParseResourcesJson(input);
  if (set.ok()) {
    for (const auto& [name, q] : set->ToMap()) {
      FUZZ_CHECK(std::isfinite(q));
      FUZZ_CHECK(q >= 0);
      FUZZ_CHECK(q <= manta::Quantity::kMaxValue);
    }
  }
  auto pod = manta::tpu::ParsePodType(input);
  (void)pod;
  auto topology = manta::tpu::ParseTopology(input);
  if (topology.ok()) {
    for (int d : *topology) FUZZ_CHECK(d > 0);
  }
  return 0;
}
