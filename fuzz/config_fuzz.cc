// The kernels' MaxText-style configuration: a flat YAML base file and
// `key=value` overrides. Input: the YAML text, then after a NUL byte one
// override per line.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "train/kernels/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string yaml = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::string rest = input.substr(nul + 1);
    size_t start = 0;
    while (start <= rest.size() && overrides.size() < 64) {
      size_t end = rest.find('\n', start);
      if (end == std::string::npos) end = rest.size();
      overrides.push_back(rest.substr(start, end - start));
      start = end + 1;
    }
  }
  auto flat = manta::train::ParseFlatYaml(yaml);
  (void)flat;
  auto config = manta::train::ConfigFromYaml(yaml, overrides);
  (void)config;
  return 0;
}
