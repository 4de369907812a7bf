// CoreWorker: the runtime inside every driver and worker process, as the
// public API (runtime/include/manta/) sees it.
//
// It submits tasks (leasing workers from raylets and pushing tasks to them
// directly), creates and calls actors (through the GCS, then directly in
// per-caller order), owns the objects it creates (small values inline, large
// ones served to others in chunks; freed when no reference is left), and, in
// a worker, runs the task loop. The typed API is a thin layer over this
// interface. The real implementation lives in runtime/core_worker/ (library
// manta_core_worker); FakeCoreWorker is an in-process one for unit tests.
//
// Which one a process runs is chosen at manta::Init by a CoreWorkerFactory:
// InitOptions::core_worker_factory, else the process default, which linking
// manta_runtime installs before main. The API library depends on neither
// implementation, and both depend on it.
//
// Thread-safety: every method may be called from any thread unless noted.
// Errors returned by Get carry an ErrorType (see GetErrorType) so the API can
// raise the matching typed error.
//
//   core::CoreWorker* cw = core::CoreWorker::Current();   // after manta::Init
//   ASSIGN_OR_RETURN(ObjectRefInfo ref, cw->SubmitTask("Add", {Arg::Value(a), Arg::Value(b)}, {}));
//   auto values = cw->Get({ref}, absl::Seconds(10));
#pragma once

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

struct TaskOptions {
  // Empty means {CPU: 1}, as in Ray.
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  int max_retries = 3;        // on worker or node death; -1: unlimited
  std::string name;           // display name; the function's by default
  // Placement group (set by the placement group API).
  std::string placement_group_id;  // binary; empty: none
  int bundle_index = -1;
  // Environment of the process while the task runs; "" removes a variable.
  std::map<std::string, std::string> env_vars;
};

struct ActorOptions {
  // Empty means {CPU: 0} to run (actors hold no CPU while idle), as in Ray.
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  int max_restarts = 0;       // -1: unlimited
  int max_task_retries = 0;   // -1: unlimited
  std::string name;           // empty: anonymous
  std::string ray_namespace;  // empty: the job's
  bool detached = false;
  int max_concurrency = 1;
  std::string class_name;     // for listings and log prefixes
  std::string placement_group_id;
  int bundle_index = -1;
  // Environment of the actor's process for its life; "" removes a variable.
  std::map<std::string, std::string> env_vars;
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
  NodeId node_id;  // nil while the bundle has no node
};

// A group's spec (what CreatePlacementGroup sends) and, from the GCS, its state.
struct PlacementGroupData {
  PlacementGroupId id;  // chosen by the creator
  std::string name;
  std::string ray_namespace;  // empty: the job's
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<BundleData> bundles;
  bool detached = false;
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

// A change of the node table, as the GCS publishes it.
struct NodeEvent {
  enum Kind { kAlive = 0, kDraining = 1, kDead = 2 };
  Kind kind = kAlive;  // kAlive: registered or registered again
  NodeData node;       // the node as it is after the change
  absl::Time received;  // when this process got it
};

struct NodeResourcesData {
  NodeId node_id;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
};

// ---- Training runs (mirrors rpc::TrainRunInfo; see the GCS's TrainRunGcsService) ----

enum class TrainRunState {
  kInitializing = 0,
  kScheduling = 1,
  kRunning = 2,
  kRestarting = 3,
  kRescheduling = 4,
  kResizing = 5,
  kShuttingDown = 6,
  kFinished = 7,
  kErrored = 8,
  kAborted = 9,
};
enum class TrainAttemptState { kPending = 0, kRunning = 1, kFinished = 2, kErrored = 3, kAborted = 4 };

struct TrainWorkerData {
  int world_rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  NodeId node_id;
  std::string node_ip;
  int pid = 0;
  ActorId actor_id;
  int slice_id = -1;  // -1: not on TPU slices
  std::string slice_name;
  bool alive = true;
  std::map<std::string, double> resources;
};

struct TrainAttemptData {
  std::string attempt_id;
  TrainAttemptState state = TrainAttemptState::kPending;
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  int num_workers = 0;
  std::vector<TrainWorkerData> workers;  // by world rank
};

struct TrainMetricPointData {
  int64_t time_ms = 0;
  int64_t step = 0;
  std::map<std::string, double> metrics;
};

struct TrainRunData {
  std::string run_id;  // 32 hex digits
  std::string name;
  JobId job_id;        // filled by the core worker on report
  ActorId controller_actor_id;
  TrainRunState state = TrainRunState::kInitializing;
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  std::vector<TrainAttemptData> attempts;
  std::vector<TrainMetricPointData> metrics;  // from ListTrainRuns with metrics
  int num_failures = 0;
  int max_failures = 0;
  std::string latest_checkpoint;
  int min_workers = 0;
  int max_workers = 0;
  std::string storage_path;
  int64_t version = 0;
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
};

class CoreWorker {
 public:
  virtual ~CoreWorker() = default;

  // The process's core worker; null before Init and after Shutdown.
  static CoreWorker* Current();
  // Whether a raylet started this process as a worker (MANTA_WORKER_ID is set).
  static bool IsWorkerProcess();

  virtual absl::StatusOr<ObjectRefInfo> SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                   const TaskOptions& options) = 0;
  // Registers the actor with the GCS, which creates it; calls may be
  // submitted at once (they wait until the actor is alive).
  virtual absl::StatusOr<ActorId> CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                              const ActorOptions& options) = 0;
  virtual absl::StatusOr<ObjectRefInfo> SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                        std::vector<Arg> args) = 0;
  virtual absl::StatusOr<ActorId> GetNamedActor(const std::string& name, const std::string& ray_namespace) = 0;
  virtual absl::Status KillActor(const ActorId& actor, bool no_restart) = 0;

  virtual absl::StatusOr<ObjectRefInfo> Put(std::string data) = 0;
  // The same, for a value with refs inside (`contained`): the stored value
  // holds them for as long as it lives.
  virtual absl::StatusOr<ObjectRefInfo> PutWithRefs(std::string data, const std::vector<ObjectRefInfo>& contained) {
    return Put(std::move(data));
  }
  // Per id: the serialized value, or an error with an ErrorType. Blocks up
  // to `timeout` (absl::InfiniteDuration() for no limit).
  virtual std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> Get(
      const std::vector<ObjectRefInfo>& refs, absl::Duration timeout) = 0;
  // Which of `refs` are ready, once `num_returns` are or `timeout` passes.
  virtual std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_returns,
                                 absl::Duration timeout) = 0;

  // Reference counting: the API's ObjectRef copies call these. A value is
  // freed when its owner holds no reference, no submitted work holds one
  // (as an argument, or inside an argument's value), and no borrower does.
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
  // Every node the GCS knows, alive or dead.
  virtual absl::StatusOr<std::vector<NodeData>> GetAllNodes() = 0;
  // Total and available resources of every alive node.
  virtual absl::StatusOr<std::vector<NodeResourcesData>> GetClusterResources() = 0;
  // Calls `on_event` for every change of the node table published after this
  // call (in the GCS's order), from a thread of its own; when the GCS
  // dropped events (a restart, a gap) it calls it once for every node as the
  // table stands. Returns an id for UnwatchNodes. Errors: the GCS cannot be
  // reached.
  virtual absl::StatusOr<int64_t> WatchNodes(std::function<void(const NodeEvent&)> on_event) {
    return absl::UnimplementedError("WatchNodes is not supported by this core worker");
  }
  // Stops the calls; returns once none runs. Unknown ids are ignored.
  virtual void UnwatchNodes(int64_t id) {}

  // ---- Training runs (blocking GCS calls) ----
  // Upserts `run` (its job is this process's; its metrics are ignored) and
  // appends `new_metrics` to its series. The GCS ignores a version not newer
  // than the one it holds. InvalidArgument for a malformed record.
  virtual absl::Status ReportTrainRun(const TrainRunData& run, const std::vector<TrainMetricPointData>& new_metrics) {
    return absl::UnimplementedError("ReportTrainRun is not supported by this core worker");
  }
  // Every run (of every job), oldest first; the newest `limit` (0: all).
  virtual absl::StatusOr<std::vector<TrainRunData>> ListTrainRuns(bool with_metrics, int limit) {
    return absl::UnimplementedError("ListTrainRuns is not supported by this core worker");
  }

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
