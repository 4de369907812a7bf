// RealCoreWorkerFactory: how manta::Init starts the real core worker
// (CoreWorkerImpl) in a driver or a worker process, and how Shutdown ends it.
// Beside each core worker it installs the ClusterState above it
// (GcsClusterState, over that core worker's GCS client), and removes it, its
// node watches stopped, before the core worker stops.
//
// A program linked with manta_runtime gets it as the process default
// (default_factory.cc installs it before main); nothing else needs to name it.
//
// Thread-safety: called by manta::Init and manta::Shutdown under their lock.
#pragma once

#include <memory>

#include "manta/internal/core_worker.h"

namespace manta::core {

class CoreWorkerImpl;
class GcsClusterState;

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
  RealCoreWorkerFactory();
  ~RealCoreWorkerFactory() override;
  // Makes the ClusterState over `cw` and the process's current one.
  void InstallClusterState(CoreWorkerImpl* cw);

  // The ClusterState of the core worker this factory made last (Init and
  // Shutdown's lock).
  std::unique_ptr<GcsClusterState> cluster_state_;
};

}  // namespace manta::core
