// manta::Init / Shutdown: driver start-up and the worker entry point.
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "manta/api.h"
#include "common/status.h"
#include "runtime/api/init_options.h"
#include "manta/internal/core_worker.h"

namespace manta {
namespace {

// Serializes Init and Shutdown.
absl::Mutex& InitMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

// This executable's path, resolved now so that workers run the same binary
// even if a later exec replaces /proc/self/exe.
std::string SelfExecutable() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(path, static_cast<size_t>(n));
}

// The factory Init uses: the options', else the process default.
absl::StatusOr<core::CoreWorkerFactory*> ChooseFactory(const InitOptions& options) {
  core::CoreWorkerFactory* factory = options.core_worker_factory;
  if (factory == nullptr) factory = core::DefaultCoreWorkerFactory();
  if (factory == nullptr) {
    return absl::FailedPreconditionError(
        "manta::Init: this program has no core worker (link it with manta_runtime, or name a factory in "
        "InitOptions)");
  }
  return factory;
}

[[noreturn]] void RunWorkerOrExit(const absl::StatusOr<core::CoreWorkerFactory*>& factory, const InitOptions& options) {
  if (!factory.ok()) {
    std::fprintf(stderr, "manta worker: cannot start: %s\n", factory.status().ToString().c_str());
    std::fflush(stderr);
    std::exit(1);
  }
  auto resolved = internal::ResolveDriverOptions(options);
  core::CoreWorkerOptions worker_options;
  // A worker's raylet tells it where the cluster is; what the driver's
  // resolution finds is only a default.
  if (resolved.ok()) worker_options = *resolved;
  worker_options.worker_executable = options.worker_executable;
  worker_options.worker_args = options.worker_args;
  absl::Status status = (*factory)->RunWorker(worker_options);
  std::fprintf(stderr, "manta worker: cannot start: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  std::exit(1);
}

}  // namespace

absl::Status TryInit(const InitOptions& options) {
  absl::MutexLock lock(&InitMutex());
  if (core::CoreWorker::Current() != nullptr) return absl::OkStatus();
  // A write to a peer that died (a collective's TCP pair, a closed pipe) is
  // an error the caller sees, not the end of the process: SIGPIPE is
  // ignored, as Python-based drivers and workers have it. A program that
  // installed its own handler keeps it.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
  // Process-wide, made here rather than in a library: Debian's abseil checks
  // every Mutex acquisition for lock-order cycles, which on the task path
  // costs more than the locking itself.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<core::CoreWorkerFactory*> chosen = ChooseFactory(options);
  InitOptions filled = options;
  if (filled.worker_executable.empty()) filled.worker_executable = SelfExecutable();
  // A worker that cannot start prints why and exits, as documented.
  if (core::CoreWorker::IsWorkerProcess()) RunWorkerOrExit(chosen, filled);
  ASSIGN_OR_RETURN(core::CoreWorkerFactory * factory, std::move(chosen));
  absl::StatusOr<core::CoreWorkerOptions> resolved = internal::ResolveDriverOptions(filled);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(), absl::StrCat("manta::Init: ", resolved.status().message()));
  }
  absl::StatusOr<core::CoreWorker*> core = factory->InitDriver(*resolved);
  if (!core.ok()) {
    return absl::Status(core.status().code(), absl::StrCat("manta::Init: cannot join the cluster at ",
                                                           resolved->gcs_address, ": ", core.status().message()));
  }
  core::SetCurrentCoreWorker({*core, factory});
  return absl::OkStatus();
}

absl::Status TryInit(int& argc, char** argv) {
  absl::StatusOr<internal::InitArgs> args = internal::ParseInitArgs(argc, argv);
  if (!args.ok()) return absl::Status(args.status().code(), absl::StrCat("manta::Init: ", args.status().message()));
  args->options.worker_args = std::move(args->original_args);
  return TryInit(args->options);
}

void Init(int& argc, char** argv) { internal::ThrowIfError(TryInit(argc, argv)); }

void Init(const InitOptions& options) { internal::ThrowIfError(TryInit(options)); }

void Shutdown() {
  absl::MutexLock lock(&InitMutex());
  core::CurrentCoreWorker current = core::SetCurrentCoreWorker({});
  if (current.core != nullptr && current.factory != nullptr) current.factory->Shutdown(current.core);
}

bool IsInitialized() { return core::CoreWorker::Current() != nullptr; }

}  // namespace manta
