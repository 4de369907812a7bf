// The moments the formatting tests print: those of Ray's documented
// `ray status` and `ray list` examples, so the expected text reads as Ray's.
#pragma once

#include "absl/time/time.h"

namespace manta::state::testing {

// 2026-04-21 10:20:20.945431 UTC, the header time of Ray's examples.
inline absl::Time RayExampleTime() { return absl::FromUnixMicros(int64_t{1776766820} * 1000000 + 945431); }

// The same second, without its fraction.
inline absl::Time RayExampleSecond() { return absl::FromUnixSeconds(1776766820); }

}  // namespace manta::state::testing
