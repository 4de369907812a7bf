// RealCoreWorkerFactory: how manta::Init starts the real core worker
// (CoreWorkerImpl) in a driver or a worker process, and how Shutdown ends it.
//
// A program linked with manta_runtime gets it as the process default
// (default_factory.cc installs it before main); nothing else needs to name it.
//
// Thread-safety: called by manta::Init and manta::Shutdown under their lock.
#pragma once

#include "manta/internal/core_worker.h"

namespace manta::core {

class RealCoreWorkerFactory final : public CoreWorkerFactory {
 public:
  // The process's one instance (never destroyed).
  static RealCoreWorkerFactory& Get();

  absl::StatusOr<CoreWorker*> InitDriver(const CoreWorkerOptions& options) override;
  absl::Status RunWorker(const CoreWorkerOptions& options) override;
  // Stops the core worker and frees it when it stopped cleanly. A core worker
  // whose work would not stop in time is left allocated: threads it could
  // not join may still touch it.
  void Shutdown(CoreWorker* core) override;

 private:
  RealCoreWorkerFactory() = default;
};

}  // namespace manta::core
