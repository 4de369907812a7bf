// The Jobs API's submit body (POST /api/jobs/): any bytes give a request or
// a clear error, never a crash.
#include <cstdint>
#include <string_view>

#include "dashboard/job_info.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto request = manta::dashboard::ParseSubmitRequest(body);
  if (request.ok()) FUZZ_CHECK(!request->entrypoint.empty());
  return 0;
}
