// TryCall: a call into the runtime API (which throws manta::Error) as a
// Status, for code that must go on when a worker or a slice is already gone
// (the trainer, and the serving group's driver).
//
//   TryCall([&] { Kill(actor); }).IgnoreError();
#pragma once

#include "absl/status/status.h"
#include "manta/api.h"

namespace manta::train {

template <typename F>
absl::Status TryCall(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

}  // namespace manta::train
