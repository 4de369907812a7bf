// CoreWorker: the runtime inside every driver and worker process, as the
// public API (runtime/include/manta/) sees it, and the one interface a
// second language's binding (a pybind11 module, say) binds.
//
// Byte-in, byte-out. The seam never sees a typed value: arguments, task
// returns and put values are bytes the front end serialized (the C++ API
// uses msgpack), and Get hands back the same bytes; functions, actor
// classes and methods are names a worker resolves through its function
// registry. So a front end brings its own serialization and registry, and
// nothing below it is written twice. What it does not carry: node-table
// watches and training-run records, which the trainer keeps one layer up
// (cluster_state.h).
//
// What each group of calls is for:
//  * tasks and actors (SubmitTask, CreateActor, SubmitActorTask,
//    GetNamedActor, KillActor): lease workers from raylets and push tasks
//    to them directly; register actors with the GCS, which creates them,
//    then call them directly in per-caller order. SubmitTask and
//    SubmitActorTask return a reference to the result at once, CreateActor
//    the actor's id (a named actor's once the GCS took the name);
//    GetNamedActor and KillActor wait for the GCS.
//  * objects (Put, PutWithRefs, Get, Wait): values this process owns (small
//    ones inline, large ones served to others in chunks) and the values of
//    references it holds, fetched from their owners.
//  * references (AddLocalReference, RemoveLocalReference,
//    AddBorrowedReference): the front end's reference objects report their
//    copies, so a value is freed once no one holds it (ownership-based
//    counting, borrowers included).
//  * placement groups and the node table (CreatePlacementGroup ...
//    GetClusterResources): blocking calls to the GCS.
//  * identity (job_id, node_id, node_ip, worker_id, address): where this
//    process is; `address` is the owner address its objects carry.
// In a worker, the core worker also runs the task loop (CoreWorkerFactory::
// RunWorker), calling back into the front end through its registry.
//
// The real implementation lives in runtime/core_worker/ (library
// manta_core_worker); FakeCoreWorker is an in-process one for unit tests.
// Which one a process runs is chosen at manta::Init by a CoreWorkerFactory:
// InitOptions::core_worker_factory, else the process default, which linking
// manta_runtime installs before main. The API library depends on neither
// implementation, and both depend on it.
//
// Thread-safety: every method may be called from any thread unless noted.
// The calls that may block (Get, Wait, AddBorrowedReference, CancelTask of
// a borrowed ref, the calls that wait for the GCS) are the ones a binding
// makes with its own lock (Python's GIL) released. Errors returned by Get
// carry an ErrorType (see GetErrorType) so the API can raise the matching
// typed error, and the front end's bytes when the failing code attached
// them (ErrorData).
//
//   core::CoreWorker* cw = core::CoreWorker::Current();   // after manta::Init
//   ASSIGN_OR_RETURN(std::vector<ObjectRefInfo> refs, cw->SubmitTask("Add", {Arg::Value(a), Arg::Value(b)}, {}));
//   auto values = cw->Get(refs, absl::Seconds(10));
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/id.h"

namespace manta::core {

// Why a value could not be had; mirrors rpc::ErrorInfo::Type.
enum class ErrorType {
  kNone = 0,
  kApplicationError = 1,
  kWorkerDied = 2,
  kActorDied = 3,
  kOwnerDied = 4,
  kInfeasible = 5,
  kObjectLost = 6,
  kTaskCancelled = 7,
  kNodeDied = 8,
  kInvalidArgument = 9,
  kTimeout = 100,  // Get/Wait deadline passed (not a task failure)
};

// The ErrorType attached to a status returned by Get (kNone for OK).
ErrorType GetErrorType(const absl::Status& status);
absl::Status MakeError(ErrorType type, const std::string& message);

// The front end's own form of an error (e.g. a pickled Python exception with
// its traceback) rides on a status as the payload under this URL. An
// invoker that fails may attach it; it travels to the caller in
// rpc::ErrorInfo::data, and the caller's Get returns a status carrying it
// (beside its ErrorType).
inline constexpr char kErrorDataPayloadUrl[] = "manta.error_data";
// An application error (ErrorType kApplicationError) carrying `data`.
absl::Status MakeApplicationError(const std::string& message, std::string data);
// `status` with `data` attached (nothing changes for an OK status or empty data).
absl::Status WithErrorData(absl::Status status, const std::string& data);
// The bytes attached to `status`; nullopt when none are.
std::optional<std::string> ErrorData(const absl::Status& status);

// An invoker of a task with a retry filter (TaskContext::
// retry_exception_filter) marks a failure the filter lets through as
// retryable; the worker then has the caller run the task again while
// max_retries allows. (With retry_exceptions and no filter, every
// application error is retryable.)
absl::Status MarkRetryable(absl::Status status);
bool IsMarkedRetryable(const absl::Status& status);

// Where a reference's value lives: its id and the address of its owner
// (serialized rpc::Address), so any process can fetch it.
struct ObjectRefInfo {
  ObjectId id;
  std::string owner_address;  // serialized rpc::Address; empty: this process
};

// One argument of a call: a serialized value, or a reference whose value
// the callee receives (resolved before the task runs).
struct Arg {
  static Arg Value(std::string data, std::vector<ObjectRefInfo> contained = {}) {
    return Arg{std::move(data), std::nullopt, std::move(contained)};
  }
  static Arg Ref(ObjectRefInfo ref) { return Arg{{}, std::move(ref), {}}; }
  std::string data;
  std::optional<ObjectRefInfo> ref;
  // The references serialized inside `data`: the submitted work keeps them
  // alive until the callee, which deserializes them, holds its own.
  std::vector<ObjectRefInfo> contained;
};

// While set on a thread (packing an argument or a return value), every ref
// serialized there is also listed in it.
struct RefCollector {
  std::vector<ObjectRefInfo> refs;
  // Each listed ref also takes a reference (AddLocalReference) that the
  // collector's owner releases: a return value's refs die with the value
  // before the core worker sees them.
  bool hold = false;
};
RefCollector*& ContainedRefs();  // the thread's collector, or null
// Sets the thread's collector for its lifetime (restoring the outer one).
class CollectRefs {
 public:
  explicit CollectRefs(RefCollector* c) : outer_(ContainedRefs()) { ContainedRefs() = c; }
  ~CollectRefs() { ContainedRefs() = outer_; }
  CollectRefs(const CollectRefs&) = delete;
  CollectRefs& operator=(const CollectRefs&) = delete;

 private:
  RefCollector* outer_;
};

// The task running on a thread, as the code it runs sees it: invokers, and a
// front end's runtime context (Python's get_runtime_context()). The core
// worker sets it around each invocation on the thread that runs it.
struct TaskContext {
  TaskId task_id;
  ActorId actor_id;  // nil for a normal task
  int attempt = 0;   // 0 on the first run; one more on each retry
  // How many values the invoker must return (ReturnValues' size).
  int num_returns = 1;
  // TaskOptions::retry_exceptions and its filter (the front end's bytes).
  bool retry_exceptions = false;
  std::string retry_exception_filter;
  // What the task holds while it runs (a normal task's lease; an actor's
  // creation resources).
  std::map<std::string, double> resources;
  // Set once the task is cancelled (CancelTask without force) while it
  // runs; null outside a worker. Its code may poll it (TaskCancelRequested).
  const std::atomic<bool>* cancelled = nullptr;
};
// The calling thread's task; null on a thread that runs none.
const TaskContext* CurrentTaskContext();
// Whether the calling thread's task was cancelled while it runs.
bool TaskCancelRequested();
// The front end's way to interrupt a running task of this worker process
// (Python raises KeyboardInterrupt in the thread running it): called with
// the task's id, on a gRPC thread, when a non-force CancelTask reaches a
// task running here. Replaces the previous hook; an empty one removes it.
void SetTaskInterruptHook(std::function<void(const TaskId&)> hook);
// Calls the hook, if any (the core worker does, on a cancel).
void InterruptTask(const TaskId& task);
// Sets the thread's task for its lifetime (restoring the outer one).
class ScopedTaskContext {
 public:
  explicit ScopedTaskContext(const TaskContext* context);
  ~ScopedTaskContext();
  ScopedTaskContext(const ScopedTaskContext&) = delete;
  ScopedTaskContext& operator=(const ScopedTaskContext&) = delete;

 private:
  const TaskContext* outer_;
};

// Where a task or actor may run.
struct SchedulingStrategy {
  enum class Kind {
    kDefault = 0,  // the raylets' choice (local first, spilled when full)
    // Over distinct alive nodes: each lease goes to the next node, round
    // robin, where the demand fits now (tasks do not queue on one worker).
    kSpread = 1,
    // On `node_id`: only there (hard: queued until it has room; fails with
    // kInfeasible, naming the node, when it is dead, unknown or too small),
    // or there when it has room and else anywhere (soft).
    kNodeAffinity = 2,
  };
  Kind kind = Kind::kDefault;
  NodeId node_id;
  bool soft = false;
};

struct TaskOptions {
  // Empty means {CPU: 1}, as in Ray.
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  int max_retries = 3;  // on worker or node death; -1: unlimited
  std::string name;     // display name; the function's by default
  // Placement group (set by the placement group API).
  std::string placement_group_id;  // binary; empty: none
  int bundle_index = -1;
  // Environment of the process while the task runs; "" removes a variable.
  std::map<std::string, std::string> env_vars;
  // How many values the task returns: one ref each, ids ReturnObjectId(task,
  // 1..num_returns). At least 1.
  int num_returns = 1;
  // Application errors (user code failing) are retried too, within
  // max_retries: every one when the filter is empty, else those the
  // worker's invoker marks retryable (MarkRetryable) after reading the
  // filter, whose bytes are the front end's (the C++ API: exception type
  // names, one per line). The caller sees the last attempt's error.
  bool retry_exceptions = false;
  std::string retry_exception_filter;
  SchedulingStrategy scheduling_strategy;
  // The program whose worker runs the task, and its arguments, when it is
  // not the one this process's workers run: a C++ program whose
  // MANTA_REMOTE functions a Python driver calls. Empty: this process's.
  std::string worker_executable;
  std::vector<std::string> worker_args;
};

// Options of one actor call.
struct ActorTaskOptions {
  int num_returns = 1;  // as TaskOptions::num_returns
};

struct ActorOptions {
  // Empty means {CPU: 0} to run (actors hold no CPU while idle), as in Ray.
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  int max_restarts = 0;       // -1: unlimited
  int max_task_retries = 0;   // -1: unlimited
  std::string name;           // empty: anonymous
  std::string ray_namespace;  // empty: the job's
  // A name already taken in the namespace gives the actor holding it
  // (CreateActor returns its id; these options and arguments are unused)
  // rather than AlreadyExists. Decided by the GCS, so creators racing for
  // a name all get the same actor.
  bool get_if_exists = false;
  bool detached = false;
  int max_concurrency = 1;
  std::string class_name;  // for listings and log prefixes
  std::string placement_group_id;
  int bundle_index = -1;
  // Environment of the actor's process for its life; "" removes a variable.
  std::map<std::string, std::string> env_vars;
  // SPREAD: the GCS places actors round robin already; node affinity as
  // for tasks (a hard one waits while the node cannot hold it).
  SchedulingStrategy scheduling_strategy;
  // The program the actor's worker runs, as TaskOptions::worker_executable.
  std::string worker_executable;
  std::vector<std::string> worker_args;
};

// InvalidArgument unless every name is a valid environment variable name
// (non-empty, no '=' or NUL) and no value holds a NUL.
absl::Status ValidateEnvVars(const std::map<std::string, std::string>& env_vars);

// ---- Placement groups and the node table (mirrors rpc::PlacementGroupInfo) ----

enum class PlacementStrategy { kPack = 0, kSpread = 1, kStrictPack = 2, kStrictSpread = 3 };
enum class PlacementGroupState { kPending = 0, kPrepared = 1, kCreated = 2, kRemoved = 3, kRescheduling = 4 };

struct BundleData {
  int index = 0;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  NodeId node_id;        // nil while the bundle has no node
  int label_domain = 0;  // with the group's same_label (rpc::Bundle)
};

// A group's spec (what CreatePlacementGroup sends) and, from the GCS, its state.
struct PlacementGroupData {
  PlacementGroupId id;  // chosen by the creator
  std::string name;
  std::string ray_namespace;  // empty: the job's
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<BundleData> bundles;
  bool detached = false;
  // A node label key: each label domain of bundles on nodes with one value
  // of it, no value shared by two domains (rpc::PlacementGroupInfo).
  std::string same_label;
  // Filled from the GCS.
  PlacementGroupState state = PlacementGroupState::kPending;
  std::string state_message;
  bool infeasible = false;
};

struct NodeData {
  NodeId node_id;
  std::string ip;
  bool alive = false;
  bool is_head = false;
  std::map<std::string, double> resources_total;
  std::map<std::string, std::string> labels;
  // Alive but going away (see DrainNode): takes no new work.
  bool draining = false;
  std::string drain_reason;
  int64_t drain_deadline_ms = 0;  // unix epoch; 0: none
  std::string death_reason;       // dead nodes
  bool death_expected = false;    // dead after a clean exit (a drain, a stop)
};

struct NodeResourcesData {
  NodeId node_id;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
};

struct CoreWorkerOptions {
  // GCS address ("ip:port"); the driver finds it from --address,
  // MANTA_ADDRESS or <temp_dir>/session_latest.
  std::string gcs_address;
  std::string token;
  // This process's raylet (the node's); found from the GCS when empty.
  std::string raylet_address;
  std::string node_ip = "127.0.0.1";
  std::string session_dir;
  // The program and arguments workers run (a driver's own executable).
  std::string worker_executable;
  std::vector<std::string> worker_args;
  // The job's runtime env (a driver's; workers ignore it): every worker of
  // the job, on every node, starts in the working directory with these
  // variables (a task's own env_vars still win). The working directory is
  // a local directory, which the driver packs (honouring .gitignore and
  // .mantaignore, as `manta job submit` does) and uploads to the GCS KV by
  // content hash, or "gcs://<package name>" of a package already there;
  // empty: workers start in their raylet's directory. Init fails with
  // InvalidArgument / NotFound / ResourceExhausted when it cannot be packed
  // or uploaded.
  std::string runtime_env_working_dir;
  std::map<std::string, std::string> runtime_env_env_vars;
};

class CoreWorker {
 public:
  virtual ~CoreWorker() = default;

  // The process's core worker; null before Init and after Shutdown.
  static CoreWorker* Current();
  // Whether a raylet started this process as a worker (MANTA_WORKER_ID is set).
  static bool IsWorkerProcess();

  // ---- Tasks and actors ----
  // One ref per return (options.num_returns of them), in order.
  // InvalidArgument for invalid options (num_returns < 1, env_vars).
  virtual absl::StatusOr<std::vector<ObjectRefInfo>> SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                                const TaskOptions& options) = 0;
  // Registers the actor with the GCS, which creates it; calls may be
  // submitted at once (they wait until the actor is alive). Returns its id
  // (with get_if_exists, perhaps an existing actor's); AlreadyExists for a
  // taken name otherwise.
  virtual absl::StatusOr<ActorId> CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                              const ActorOptions& options) = 0;
  // One ref per return (options.num_returns of them), in order.
  virtual absl::StatusOr<std::vector<ObjectRefInfo>> SubmitActorTask(const ActorId& actor,
                                                                     const std::string& method_name,
                                                                     std::vector<Arg> args,
                                                                     const ActorTaskOptions& options) = 0;
  // Cancels the task whose return `ref` is (a ref this process owns). A
  // task not yet running (queued, waiting for a worker or its arguments)
  // is dropped and its returns fail with kTaskCancelled; a running one is
  // interrupted (SetTaskInterruptHook, TaskCancelRequested) or, with
  // `force`, its worker is killed and its lease's resources given back;
  // either way its returns fail with kTaskCancelled and it is not retried.
  // Actor calls: queued ones at the actor are dropped, running ones
  // interrupted; `force` is InvalidArgument for them, as in Ray. A task
  // already finished is left as it is (OK). With `recursive` (Ray's
  // default), the worker running the task also cancels the tasks and
  // actor calls it submitted that are still pending (and any it submits
  // after), and theirs in turn, with the same `force` (never for actor
  // calls); a forced task's worker is killed once it has. A ref another
  // process owns (borrowed) is cancelled by its owner, which this asks and
  // waits for: the owner's error, or Unavailable when it cannot be reached.
  virtual absl::Status CancelTask(const ObjectRefInfo& ref, bool force, bool recursive) = 0;
  virtual absl::StatusOr<ActorId> GetNamedActor(const std::string& name, const std::string& ray_namespace) = 0;
  virtual absl::Status KillActor(const ActorId& actor, bool no_restart) = 0;

  // ---- Objects: values as bytes ----
  virtual absl::StatusOr<ObjectRefInfo> Put(std::string data) = 0;
  // The same, for a value with refs inside (`contained`): the stored value
  // holds them for as long as it lives. The bytes are shared, not copied
  // (a caller may give them a deleter that reuses their buffer).
  virtual absl::StatusOr<ObjectRefInfo> PutWithRefs(std::shared_ptr<const std::string> data,
                                                    const std::vector<ObjectRefInfo>& contained) {
    return Put(*data);
  }
  // Per id: the serialized value, or an error with an ErrorType. Blocks up
  // to `timeout` (absl::InfiniteDuration() for no limit).
  virtual std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> Get(const std::vector<ObjectRefInfo>& refs,
                                                                              absl::Duration timeout) = 0;
  // Which of `refs` are ready, once `num_returns` are or `timeout` passes.
  // A value another process owns is ready once it is in this process, so
  // that Get needs no remote fetch (its owner's later death included); it
  // is fetched as soon as its owner has it. Without `fetch_local` it is
  // ready once its owner has it, and is not fetched (as Ray's
  // fetch_local=False). A value whose owner cannot be reached is ready
  // (Get fails at once).
  virtual std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout,
                                 bool fetch_local = true) = 0;

  // ---- References: the API's ObjectRef copies call these ----
  // A value is freed when its owner holds no reference, no submitted work
  // holds one (as an argument, or inside an argument's value), and no
  // borrower does.
  virtual void AddLocalReference(const ObjectId& id) = 0;
  virtual void RemoveLocalReference(const ObjectId& id) = 0;
  // A reference that arrived inside a value (deserialized). When another
  // process owns it and this is the first one here, this process registers
  // with the owner as a borrower first (a blocking call), and unregisters
  // when its last reference goes.
  virtual void AddBorrowedReference(const ObjectRefInfo& info) { AddLocalReference(info.id); }

  // ---- Placement groups (blocking GCS calls; statuses carry the GCS's code
  // and message: InvalidArgument for a malformed spec, AlreadyExists for a
  // taken name, NotFound for an unknown group) ----
  // Creates the group `spec` describes (bundle i must have index i) for this
  // job; returns it as the GCS has it (usually PENDING). Idempotent by id.
  virtual absl::StatusOr<PlacementGroupData> CreatePlacementGroup(const PlacementGroupData& spec) = 0;
  virtual absl::Status RemovePlacementGroup(const PlacementGroupId& id) = 0;
  virtual absl::StatusOr<PlacementGroupData> GetPlacementGroup(const PlacementGroupId& id) = 0;
  // By name among live groups; an empty namespace means the job's.
  virtual absl::StatusOr<PlacementGroupData> GetNamedPlacementGroup(const std::string& name,
                                                                    const std::string& ray_namespace) = 0;
  // Blocks until the group is CREATED or REMOVED, or `timeout` passes;
  // returns its state then (ready iff state == kCreated).
  virtual absl::StatusOr<PlacementGroupData> WaitPlacementGroupReady(const PlacementGroupId& id,
                                                                     absl::Duration timeout) = 0;
  // CreatePlacementGroup, then WaitPlacementGroupReady up to `timeout`, the
  // wait starting in the create's own call (one round trip when the group
  // is placed within the GCS's limit on a held wait).
  virtual absl::StatusOr<PlacementGroupData> CreatePlacementGroupAndWait(const PlacementGroupData& spec,
                                                                         absl::Duration timeout) = 0;
  // ---- The node table (blocking GCS calls) ----
  // Every node the GCS knows, alive or dead.
  virtual absl::StatusOr<std::vector<NodeData>> GetAllNodes() = 0;
  // Total and available resources of every alive node.
  virtual absl::StatusOr<std::vector<NodeResourcesData>> GetClusterResources() = 0;

  // ---- Identity ----
  virtual const JobId& job_id() const = 0;
  // The node this process runs on (nil and "" before it is known) and its pid.
  virtual NodeId node_id() const { return NodeId(); }
  virtual std::string node_ip() const { return std::string(); }
  virtual const WorkerId& worker_id() const = 0;
  // Serialized rpc::Address of this process (owner address of its objects).
  virtual const std::string& address() const = 0;
};

// Makes and ends the process's core worker; manta::Init and manta::Shutdown
// call it under their lock, never concurrently.
class CoreWorkerFactory {
 public:
  virtual ~CoreWorkerFactory() = default;

  // Driver: joins the cluster, registers a job, and returns the started core
  // worker; the caller makes it Current. Errors: GCS unreachable, token
  // refused, no raylet on this host.
  virtual absl::StatusOr<CoreWorker*> InitDriver(const CoreWorkerOptions& options) = 0;
  // Worker (IsWorkerProcess()): joins, registers with its raylet, makes its
  // core worker Current (SetCurrentCoreWorker), runs tasks until told to
  // exit, then exits the process. Returns only on a start-up error.
  virtual absl::Status RunWorker(const CoreWorkerOptions& options) = 0;
  // Driver: finishes the job and releases `core`, which InitDriver made and
  // which is no longer Current.
  virtual void Shutdown(CoreWorker* core) = 0;
};

// The process's core worker and the factory that made it (which ends it).
struct CurrentCoreWorker {
  CoreWorker* core = nullptr;
  CoreWorkerFactory* factory = nullptr;
};
// Makes `current` the process's core worker ({} clears it) and returns the
// one it replaces.
CurrentCoreWorker SetCurrentCoreWorker(CurrentCoreWorker current);

// The factory manta::Init uses when InitOptions names none: the real
// runtime's, once manta_runtime is linked (it installs itself before main);
// null in a program without a core worker. Set before Init; not thread-safe
// with Init.
CoreWorkerFactory* DefaultCoreWorkerFactory();
void SetDefaultCoreWorkerFactory(CoreWorkerFactory* factory);

}  // namespace manta::core
