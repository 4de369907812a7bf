// FakeCoreWorker: an in-process CoreWorker for unit tests of the API and of
// code built on it. Tasks and actor calls run synchronously, on the calling
// thread, through the FunctionRegistry; actors are instances in a map.
//
//   FakeCoreWorker* core = FakeCoreWorker::Install();   // becomes Current()
//   core->InjectFailure("Add", ErrorType::kWorkerDied);  // every Add dies
//   EXPECT_THROW(manta::Get(manta::Task(Add).Remote(1, 2)), manta::WorkerDiedError);
//   FakeCoreWorker::Uninstall();
//
// What it models:
//   * retries: a task whose run fails with kWorkerDied/kNodeDied (injected),
//     or with an application error under retry_exceptions (as the real
//     worker decides), is run again up to TaskOptions::max_retries times;
//   * several returns (num_returns) and the task context invokers read
//     (CurrentTaskContext: attempt, num_returns, retry filter, resources);
//   * actors: a failing factory leaves the actor dead; KillActor, and
//     KillActorProcess (a crash, which restarts up to max_restarts by
//     rerunning the factory), make later calls fail with kActorDied;
//   * objects: values with local reference counts, starting at zero (the
//     API's ObjectRef adds the first); an object is freed when its count
//     drops to zero; refs to freed objects give kObjectLost;
//   * pending values: tasks of a held name wait until ReleaseHeldTasks(),
//     so Get timeouts and Wait can be tested;
//   * named actors per namespace (AlreadyExists on a taken name, or the
//     actor holding it with get_if_exists);
//   * placement groups and the node table: nodes added with AddNode; a group
//     is validated as the GCS does (InvalidArgument, AlreadyExists) and
//     placed at once when alive nodes have room (strategies and label
//     selectors honoured, greedily), else stays PENDING until a node joins or
//     another group is removed; removing returns its resources.
// It also stands in for the ClusterState above the core worker
// (cluster_state.h): node watches over its node table, and training-run
// records kept in memory with the GCS's version and terminal rules. While it
// is Current, it is the process's ClusterState too.
// Not modelled: scheduling of tasks (beyond failing a hard node affinity to
// a node not alive in its table), resources of tasks and actors,
// concurrency of actor calls; env_vars are recorded, not applied.
//
// A test either installs one directly (Install/Uninstall) or passes
// Factory() to manta::Init in InitOptions::core_worker_factory; the binary
// may link the real core worker as well.
//
// Thread-safety: every method may be called from any thread; user code runs
// without the lock held, so tasks may submit tasks.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "manta/internal/cluster_state.h"
#include "manta/internal/core_worker.h"
#include "manta/internal/function_registry.h"

namespace manta::core {

class FakeCoreWorker : public CoreWorker, public ClusterState {
 public:
  FakeCoreWorker();
  ~FakeCoreWorker() override;

  // Creates a fake and makes it Current() (and ClusterState::Current()),
  // replacing (and deleting) any installed one. Uninstall deletes the
  // current one.
  static FakeCoreWorker* Install();
  static void Uninstall();
  // Makes a FakeCoreWorker for manta::Init (InitDriver) and deletes it at
  // manta::Shutdown; cannot run a worker process.
  static CoreWorkerFactory* Factory();

  // ---- Failure injection ----------------------------------------------------
  // The next `times` runs of the task, actor method or actor factory named
  // `name` fail with `type` and `message` without running user code (-1:
  // every run). kWorkerDied/kNodeDied runs count against retries.
  void InjectFailure(const std::string& name, ErrorType type, std::string message = "", int times = -1);
  void ClearFailures();
  // Tasks and actor calls named `name` submitted from now on stay pending
  // until ReleaseHeldTasks runs them, in submission order.
  void HoldTasks(const std::string& name);
  void ReleaseHeldTasks();
  // The actor's process dies: it restarts (factory rerun) if it has
  // restarts left, else it is dead with kActorDied.
  void KillActorProcess(const ActorId& actor);
  // ---- Nodes and placement groups ----------------------------------------------
  // Adds an alive node (a nil node_id gets a random one); returns its id.
  NodeId AddNode(NodeData node);
  // The node dies: groups with bundles on it go back to PENDING (RESCHEDULING
  // is not modelled).
  void KillNode(const NodeId& node);
  // The node begins to drain (it stays alive).
  void DrainNode(const NodeId& node, const std::string& reason, int64_t deadline_ms);
  // The next `times` calls of the placement-group or node-table method named
  // `method` ("CreatePlacementGroup", "GetAllNodes", ...) fail with `status`
  // (-1: every call).
  void InjectGcsError(const std::string& method, absl::Status status, int times = -1);

  // ---- Observation -----------------------------------------------------------
  int RunCount(const std::string& name) const;
  TaskOptions last_task_options() const;
  ActorOptions actor_options(const ActorId& actor) const;
  bool ActorAlive(const ActorId& actor) const;
  int LocalReferenceCount(const ObjectId& id) const;
  bool HasObject(const ObjectId& id) const;
  size_t ObjectCount() const;
  int64_t add_reference_calls() const;
  int64_t remove_reference_calls() const;
  // RemoveLocalReference calls for an id with no count left (must stay 0).
  int64_t unbalanced_removes() const;
  // Groups not removed, and every group ever created in creation order.
  size_t LivePlacementGroupCount() const;
  std::vector<PlacementGroupData> CreatedPlacementGroups() const;
  // Blocks until at least `n` groups were ever created or `timeout` passes;
  // whether they were.
  bool AwaitCreatedPlacementGroups(size_t n, absl::Duration timeout) const;

  // ---- CoreWorker ------------------------------------------------------------
  absl::StatusOr<std::vector<ObjectRefInfo>> SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                        const TaskOptions& options) override;
  absl::StatusOr<ActorId> CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                      const ActorOptions& options) override;
  absl::StatusOr<std::vector<ObjectRefInfo>> SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                             std::vector<Arg> args,
                                                             const ActorTaskOptions& options) override;
  // A held task's ref fails with kTaskCancelled (its other returns, if
  // any, still run when released); a finished one is left as it is.
  absl::Status CancelTask(const ObjectRefInfo& ref, bool force, bool recursive) override;
  absl::StatusOr<ActorId> GetNamedActor(const std::string& name, const std::string& ray_namespace) override;
  absl::Status KillActor(const ActorId& actor, bool no_restart) override;
  absl::StatusOr<ObjectRefInfo> Put(std::string data) override;
  std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> Get(const std::vector<ObjectRefInfo>& refs,
                                                                      absl::Duration timeout) override;
  // Every value is local here: `fetch_local` changes nothing.
  std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout,
                         bool fetch_local) override;
  void AddLocalReference(const ObjectId& id) override;
  void RemoveLocalReference(const ObjectId& id) override;
  absl::StatusOr<PlacementGroupData> CreatePlacementGroup(const PlacementGroupData& spec) override;
  absl::Status RemovePlacementGroup(const PlacementGroupId& id) override;
  absl::StatusOr<PlacementGroupData> GetPlacementGroup(const PlacementGroupId& id) override;
  absl::StatusOr<PlacementGroupData> GetNamedPlacementGroup(const std::string& name,
                                                            const std::string& ray_namespace) override;
  absl::StatusOr<PlacementGroupData> WaitPlacementGroupReady(const PlacementGroupId& id,
                                                             absl::Duration timeout) override;
  absl::StatusOr<PlacementGroupData> CreatePlacementGroupAndWait(const PlacementGroupData& spec,
                                                                 absl::Duration timeout) override;
  absl::StatusOr<std::vector<NodeData>> GetAllNodes() override;
  absl::StatusOr<std::vector<NodeResourcesData>> GetClusterResources() override;
  const JobId& job_id() const override { return job_id_; }
  const WorkerId& worker_id() const override { return worker_id_; }
  const std::string& address() const override { return address_; }
  std::string node_ip() const override { return "127.0.0.1"; }

  // ---- ClusterState ----------------------------------------------------------
  // Node watches: AddNode, DrainNode and KillNode call them, on the caller's
  // thread, after the change.
  absl::StatusOr<int64_t> WatchNodes(std::function<void(const NodeEvent&)> on_event) override;
  void UnwatchNodes(int64_t id) override;
  // Training runs kept in memory: the GCS's version and terminal rules.
  absl::Status ReportTrainRun(const TrainRunData& run, const std::vector<TrainMetricPointData>& new_metrics) override;
  absl::StatusOr<std::vector<TrainRunData>> ListTrainRuns(bool with_metrics, int limit) override;
  absl::StatusOr<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                             bool overwrite) override;
  absl::StatusOr<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key) override;

 private:
  struct Object {
    bool ready = false;
    absl::StatusOr<std::shared_ptr<const std::string>> value = absl::UnknownError("pending");
    int references = 0;
  };
  struct ActorState {
    std::string factory_name;
    std::vector<Arg> args;  // for restarts
    ActorOptions options;
    std::shared_ptr<void> instance;  // null when dead
    absl::Status death;              // why it is dead
    int restarts = 0;
  };
  struct FakeGroup {
    PlacementGroupData data;
    uint64_t order = 0;
  };
  struct Injected {
    ErrorType type;
    std::string message;
    int times;
  };

  // A new pending object; the API's ObjectRef adds the first reference.
  ObjectId NewObject() ABSL_LOCKS_EXCLUDED(mu_);
  void Complete(const ObjectId& id, absl::StatusOr<std::string> value) ABSL_LOCKS_EXCLUDED(mu_);
  // Completes each of `ids` with its value of `values`, or all with the
  // error (also when the count differs, naming `name`).
  void CompleteAll(const std::vector<ObjectId>& ids, const std::string& name,
                   absl::StatusOr<internal::ReturnValues> values) ABSL_LOCKS_EXCLUDED(mu_);
  // kInfeasible for a hard node affinity to a node not alive in the table.
  absl::Status CheckAffinity(const SchedulingStrategy& strategy) const ABSL_LOCKS_EXCLUDED(mu_);
  // `n` new pending objects, as refs owned here.
  std::vector<ObjectId> NewObjects(int n) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<ObjectRefInfo> RefsTo(const std::vector<ObjectId>& ids) const;
  // Runs `run` now, or queues it when `name` is held.
  void RunOrHold(const std::string& name, std::function<void()> run) ABSL_LOCKS_EXCLUDED(mu_);
  // The values of `args` (refs resolved), or the error of a ref.
  absl::StatusOr<std::vector<std::string>> ResolveArgs(const std::vector<Arg>& args) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a run of `name`; the injected failure for it, if any.
  absl::Status TakeInjected(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  void RunTask(const std::vector<ObjectId>& ids, const std::string& name, const std::vector<Arg>& args,
               const TaskOptions& options);
  void RunActorTask(const std::vector<ObjectId>& ids, const ActorId& actor, const std::string& name,
                    const std::vector<Arg>& args);
  // Runs the factory; on failure the actor is dead.
  void StartActor(const ActorId& actor) ABSL_LOCKS_EXCLUDED(mu_);
  // The injected error for GCS method `method`, if any.
  absl::Status TakeGcsError(const std::string& method) ABSL_LOCKS_EXCLUDED(mu_);
  // What alive `node` has left after the bundles placed on it.
  std::map<std::string, double> AvailableLocked(const NodeId& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places every PENDING group that fits now, oldest first.
  void PlacePendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TryPlaceLocked(PlacementGroupData& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const JobId job_id_;
  const WorkerId worker_id_;
  const std::string address_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectId, Object> objects_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ActorId, ActorState> actors_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, ActorId> named_actors_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Injected> injected_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> run_counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> held_names_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> held_ ABSL_GUARDED_BY(mu_);
  TaskOptions last_task_options_ ABSL_GUARDED_BY(mu_);
  int64_t add_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t remove_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unbalanced_removes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<NodeData> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PlacementGroupId, FakeGroup> groups_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, PlacementGroupId> group_names_ ABSL_GUARDED_BY(mu_);
  uint64_t next_group_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::pair<absl::Status, int>> gcs_errors_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TrainRunData> train_runs_ ABSL_GUARDED_BY(mu_);                 // by run id
  std::map<std::pair<std::string, std::string>, std::string> kv_ ABSL_GUARDED_BY(mu_);  // (ns, key)
  std::map<int64_t, std::function<void(const NodeEvent&)>> node_watches_ ABSL_GUARDED_BY(mu_);
  int64_t next_watch_ ABSL_GUARDED_BY(mu_) = 1;
  // Calls every watch with `node` as `kind` (mu_ not held).
  void NotifyNodeWatches(NodeEvent::Kind kind, const NodeId& node) ABSL_LOCKS_EXCLUDED(mu_);
  // KillNode's change of the table and its groups.
  void MarkNodeDead(const NodeId& node) ABSL_LOCKS_EXCLUDED(mu_);
};

}  // namespace manta::core
