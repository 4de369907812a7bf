// The process's current core worker and the default factory: the only
// process-wide state the API keeps about the runtime.
#include <atomic>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

// Read on every API call: an atomic, not a lock.
std::atomic<CoreWorker*> g_core{nullptr};

absl::Mutex& SlotMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}
CoreWorkerFactory* g_factory = nullptr;  // made g_core; guarded by SlotMutex()

std::atomic<CoreWorkerFactory*> g_default{nullptr};

}  // namespace

CoreWorker* CoreWorker::Current() { return g_core.load(std::memory_order_acquire); }

bool CoreWorker::IsWorkerProcess() {
  const char* id = std::getenv("MANTA_WORKER_ID");
  return id != nullptr && *id != '\0';
}

CurrentCoreWorker SetCurrentCoreWorker(CurrentCoreWorker current) {
  absl::MutexLock lock(&SlotMutex());
  CurrentCoreWorker previous{g_core.load(), g_factory};
  g_factory = current.factory;
  g_core.store(current.core, std::memory_order_release);
  return previous;
}

CoreWorkerFactory* DefaultCoreWorkerFactory() { return g_default.load(); }

void SetDefaultCoreWorkerFactory(CoreWorkerFactory* factory) { g_default.store(factory); }

}  // namespace manta::core
