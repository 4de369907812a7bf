// Resource, label and TPU strings from flags and requests: `--resources`
// JSON, `--labels` ("k=v,k2=v2"), label selectors ({"zone": "!in(a,b)"}),
// pod types ("v6e-16") and topologies ("4x4"). Accepted quantities are
// finite, not negative and within the maximum; accepted labels keep
// Kubernetes' length rules.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "common/label_selector.h"
#include "common/resources.h"
#include "common/tpu.h"
#include "fuzz/fuzz_check.h"
#include "raylet/local_resources.h"

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
  auto labels = manta::raylet::ParseLabels(input);
  if (labels.ok()) {
    for (const auto& [key, value] : *labels) {
      FUZZ_CHECK(!key.empty() && key.size() <= 253);
      FUZZ_CHECK(value.size() <= 63);
    }
  }
  // A selector of one condition: the key before the first '=', the rest.
  const size_t eq = input.find('=');
  std::map<std::string, std::string> condition{
      {input.substr(0, eq), eq == std::string::npos ? std::string() : input.substr(eq + 1)}};
  auto selector = manta::LabelSelector::Parse(condition);
  if (selector.ok()) {
    (void)selector->Matches(condition);
    (void)selector->Matches(std::map<std::string, std::string>());
    if (labels.ok()) (void)selector->Matches(*labels);
  }
  return 0;
}
