// Uploaded working-directory packages: gunzip, then every tar entry is
// validated. Accepted entries never escape their folder.
#include <cstdint>
#include <string_view>

#include "dashboard/tar_reader.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  manta::dashboard::TarLimits limits;
  limits.max_unpacked_bytes = 1 << 20;
  limits.max_entries = 1000;
  auto archive = manta::dashboard::MaybeGunzip(input, limits.max_unpacked_bytes);
  if (!archive.ok()) return 0;
  auto entries = manta::dashboard::ParseTar(*archive, limits);
  if (!entries.ok()) return 0;
  FUZZ_CHECK(entries->size() <= limits.max_entries);
  for (const auto& e : *entries) {
    FUZZ_CHECK(!e.path.empty());
    FUZZ_CHECK(e.path.front() != '/');
    FUZZ_CHECK(e.path != ".." && e.path.rfind("../", 0) != 0 && e.path.find("/../") == std::string::npos);
    FUZZ_CHECK(e.path.size() < 3 || e.path.compare(e.path.size() - 3, 3, "/..") != 0);
    FUZZ_CHECK((e.mode & ~0777u) == 0);
  }
  return 0;
}
