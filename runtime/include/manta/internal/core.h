// Access to this process's core worker from the typed API.
#pragma once

#include "manta/internal/core_worker.h"

namespace manta::internal {

// The current core worker; throws manta::Error (FailedPrecondition) when
// manta::Init() has not been called or Shutdown() has.
core::CoreWorker& RequireCoreWorker();

}  // namespace manta::internal
