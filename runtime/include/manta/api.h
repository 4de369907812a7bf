// Manta's C++ API: remote functions, actors and objects on a cluster.
//
//   #include <manta/api.h>
//
//   int Add(int a, int b) { return a + b; }
//
//   class Counter {
//    public:
//     explicit Counter(int start) : value_(start) {}
//     static Counter* Create(int start) { return new Counter(start); }
//     int Incr(int by) { return value_ += by; }
//    private:
//     int value_;
//   };
//
//   MANTA_REMOTE(Add, Counter::Create, &Counter::Incr);
//
//   int main(int argc, char** argv) {
//     manta::Init(argc, argv);  // in a worker process this runs tasks and never returns
//     manta::ObjectRef<int> sum = manta::Task(Add).Remote(1, 2);
//     std::cout << *manta::Get(sum) << "\n";  // 3
//
//     auto counter = manta::Actor(Counter::Create).SetMaxRestarts(3).Remote(0);
//     manta::ObjectRef<int> n = counter.Task(&Counter::Incr).Remote(5);
//     std::cout << *manta::Get(n) << "\n";  // 5
//
//     auto big = manta::Put(std::vector<float>(1 << 20, 1.0f));
//     manta::Task(Add).Remote(sum, 10);  // Add receives 3, not the ref
//     manta::Shutdown();
//   }
//
// The program is both the driver and its workers: the raylet starts it again
// in worker mode, where Init enters the task loop. Everything MANTA_REMOTE
// registers at static initialization is therefore known on both sides.
//
// Errors: calls throw (manta/errors.h); Get of a failed task throws the
// TaskError subclass for the cause with the remote message. TryGet/TryInit
// return absl::Status instead.
//
// Thread-safety: every call may be made from any thread after Init.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/actor.h"
#include "manta/errors.h"
#include "manta/internal/core.h"
#include "manta/object_ref.h"
#include "manta/placement_group.h"
#include "manta/remote.h"
#include "manta/serialization.h"
#include "manta/task_caller.h"

namespace manta {

// ---- Lifecycle -------------------------------------------------------------

// How a driver finds its cluster. Empty fields are resolved as Init(argc,
// argv) describes.
struct InitOptions {
  std::string address;   // GCS "host:port"
  std::string temp_dir;  // default /tmp/manta
  // The program workers run and its arguments; default this executable
  // (/proc/self/exe) with no arguments.
  std::string worker_executable;
  std::vector<std::string> worker_args;
  // The job's runtime env: every worker of the job, on every node, starts
  // in this directory (a local one, packed and uploaded when Init runs, or
  // "gcs://<package name>" already uploaded) with these variables; see
  // core::CoreWorkerOptions. A driver the Jobs API started gets the
  // submitted runtime env from $MANTA_RUNTIME_ENV; what is set here wins
  // (per variable).
  std::string runtime_env_working_dir;
  std::map<std::string, std::string> runtime_env_env_vars;
  // What makes this process's core worker; null: the process default, the
  // real runtime in a program linked with manta_runtime. Unit tests pass a
  // fake's (FakeCoreWorker::Factory()). Not owned; it must outlive Shutdown.
  core::CoreWorkerFactory* core_worker_factory = nullptr;
};

// Joins the cluster. Reads and removes Manta's flags from argv
// (--address=HOST:PORT, --temp-dir=DIR; also "--flag value"), leaving the
// program's own; workers are started as this executable with the original
// argv[1..]. The GCS address is --address, else $MANTA_ADDRESS, else
// <temp-dir>/session_latest/gcs_address; the token is $MANTA_TOKEN, else the
// token file of that session when it is the same cluster's. The driver's
// node is the raylet serving on $MANTA_NODE_IP (default 127.0.0.1).
//
// Init also turns off abseil's Mutex deadlock detection for the process (a
// debug check that costs more than the locking on the task path); a program
// that wants it sets it again after Init.
//
// In a worker process (started by a raylet) it runs the task loop and never
// returns; a worker that cannot start prints why and exits with status 1.
// In a driver it returns once connected, and throws manta::Error with the
// reason (no cluster found, GCS unreachable, token refused) otherwise. A
// second call while initialized does nothing.
void Init(int& argc, char** argv);
void Init(const InitOptions& options = {});
// As Init, returning the error instead of throwing.
absl::Status TryInit(int& argc, char** argv);
absl::Status TryInit(const InitOptions& options);

// Disconnects the driver: its job finishes and the objects it owns are
// freed. Idempotent; Init may be called again afterwards.
void Shutdown();
bool IsInitialized();

// ---- Objects ---------------------------------------------------------------

// Stores `value` in the cluster, owned by this process. Throws manta::Error
// when it cannot be serialized or stored.
template <typename T>
ObjectRef<T> Put(const T& value) {
  // Refs inside the value live as long as the stored value.
  core::RefCollector contained;
  absl::StatusOr<std::string> bytes;
  {
    core::CollectRefs collect(&contained);
    bytes = Serialize(value);
  }
  internal::ThrowIfError(bytes.status());
  absl::StatusOr<core::ObjectRefInfo> info =
      contained.refs.empty() ? internal::RequireCoreWorker().Put(std::move(*bytes))
                             : internal::RequireCoreWorker().PutWithRefs(
                                   std::make_shared<const std::string>(std::move(*bytes)), contained.refs);
  internal::ThrowIfError(info.status());
  return ObjectRef<T>(std::move(*info));
}

namespace internal {
absl::Status ValueDeserializeError(const ObjectId& id, const absl::Status& status);
// A failure of CoreWorker::Get with its ErrorType; one without is kObjectLost.
absl::Status TypedGetError(const absl::Status& status);

template <typename T>
absl::StatusOr<std::shared_ptr<T>> DecodeValue(const ObjectId& id,
                                               const absl::StatusOr<std::shared_ptr<const std::string>>& bytes) {
  if (!bytes.ok()) return TypedGetError(bytes.status());
  absl::StatusOr<T> value = Deserialize<T>(**bytes);
  if (!value.ok()) return ValueDeserializeError(id, value.status());
  return std::make_shared<T>(std::move(*value));
}

template <typename T>
std::vector<core::ObjectRefInfo> Infos(const std::vector<ObjectRef<T>>& refs) {
  std::vector<core::ObjectRefInfo> infos;
  infos.reserve(refs.size());
  for (const auto& ref : refs) infos.push_back(ref.Info());
  return infos;
}
}  // namespace internal

// The value of `ref`, waiting up to `timeout` for it. On failure the status
// carries the ErrorType of the cause (ErrorTypeOf): kApplicationError with
// the remote function's name and message, kWorkerDied, kActorDied,
// kOwnerDied, kInfeasible, kObjectLost, kTimeout, ...; a value that does not
// decode as T is kApplicationError.
template <typename T>
absl::StatusOr<std::shared_ptr<T>> TryGet(const ObjectRef<T>& ref, absl::Duration timeout = absl::InfiniteDuration()) {
  core::CoreWorker& core = internal::RequireCoreWorker();
  auto values = core.Get({ref.Info()}, timeout);
  return internal::DecodeValue<T>(ref.ID(), values.at(0));
}
absl::Status TryGet(const ObjectRef<void>& ref, absl::Duration timeout = absl::InfiniteDuration());

// As TryGet, throwing the matching TaskError subclass on failure
// (GetTimeoutError when `timeout` passes).
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& ref, absl::Duration timeout = absl::InfiniteDuration()) {
  absl::StatusOr<std::shared_ptr<T>> value = TryGet(ref, timeout);
  internal::ThrowIfError(value.status());
  return *std::move(value);
}
// Returns once the void task is done; throws as Get.
void Get(const ObjectRef<void>& ref, absl::Duration timeout = absl::InfiniteDuration());

// The values of all `refs`, in order; throws the error of the first that
// failed (the timeout applies to the whole call).
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& refs,
                                    absl::Duration timeout = absl::InfiniteDuration()) {
  auto values = internal::RequireCoreWorker().Get(internal::Infos(refs), timeout);
  std::vector<std::shared_ptr<T>> out;
  out.reserve(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    absl::StatusOr<std::shared_ptr<T>> value = internal::DecodeValue<T>(refs[i].ID(), values.at(i));
    internal::ThrowIfError(value.status());
    out.push_back(*std::move(value));
  }
  return out;
}

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;      // in the order of the input
  std::vector<ObjectRef<T>> not_ready;  // in the order of the input
};

// Waits until `num_returns` of `refs` are ready (done or failed) or `timeout`
// passes, and splits them. `ready` may hold more than num_returns. A ref
// another process owns is ready once its value was fetched here, or, without
// `fetch_local`, once its owner has it (see CoreWorker::Wait). Throws
// manta::Error (InvalidArgument) when num_returns is not in [0, refs.size()].
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, int num_returns,
                   absl::Duration timeout = absl::InfiniteDuration(), bool fetch_local = true) {
  if (num_returns < 0 || static_cast<size_t>(num_returns) > refs.size()) {
    throw Error(absl::InvalidArgumentError("Wait: num_returns " + std::to_string(num_returns) +
                                           " is not between 0 and " + std::to_string(refs.size())));
  }
  std::vector<bool> ready =
      internal::RequireCoreWorker().Wait(internal::Infos(refs), num_returns, timeout, fetch_local);
  WaitResult<T> result;
  for (size_t i = 0; i < refs.size(); ++i) {
    (i < ready.size() && ready[i] ? result.ready : result.not_ready).push_back(refs[i]);
  }
  return result;
}

}  // namespace manta
