// CoreWorkerImpl: the CoreWorker of a driver or worker process.
//
// Threads:
//  * submitting threads and gRPC threads share the submitters: the
//    normal-task queues and leases behind the TaskSubmitter's lock, the
//    actor table behind the ActorSubmitter's. A task or actor call is pushed from the
//    thread that makes it; the reply of a push is settled on the gRPC
//    thread that gets it, which also pushes whatever that made due. A burst
//    of tasks or calls so wakes no other thread of this process.
//  * the io loop (an EventLoop on its own thread) handles lease replies and
//    the idle-lease timer, dependency resolution, actor registration and
//    subscriptions, and the GCS plumbing. Other threads Post() into it.
//  * gRPC threads run the CoreWorkerService handlers; they only queue work.
//  * in a worker, the main thread runs tasks (TaskReceiver); threaded actors
//    use a pool of max_concurrency threads.
//  * the MemoryStore, the ReferenceCounter and the TaskEventBuffer are
//    shared, behind their own mutexes.
// Lock order: one submitter's (never both), then the
// reference counter's (reference_counter.h), the store's, the task-event
// buffer's, the push transport's (push_transport.h) and the loop's.
// Nothing holds a lock across a blocking call (borrower registration is
// one). No push is started with a submitter's lock held: a failing call may
// complete inline, and its completion takes it.
// Internal header: includes gRPC; only runtime/core_worker/*.cc include it.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/event_loop.h"
#include "common/metrics/stats_page.h"
#include "common/rpc/connection_gate.h"
#include "common/rpc/grpc_util.h"
#include "gcs/client/sync_gcs_client.h"
#include "manta/internal/core_worker.h"
#include "proto/core_worker.grpc.pb.h"
#include "proto/gcs_service.grpc.pb.h"
#include "proto/node_manager.grpc.pb.h"
#include "runtime/core_worker/actor_submitter.h"
#include "runtime/core_worker/child_tasks.h"
#include "runtime/core_worker/fetch_pool.h"
#include "runtime/core_worker/memory_store.h"
#include "runtime/core_worker/object_service.h"
#include "runtime/core_worker/push_transport.h"
#include "runtime/core_worker/reference_counter.h"
#include "runtime/core_worker/task_event_buffer.h"
#include "runtime/core_worker/task_receiver.h"
#include "runtime/core_worker/task_submitter.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {

class GrpcPeers;

// Threads that pull large task returns at once (FetchPool); more wait.
constexpr int kMaxFetchThreads = 8;

// Stubs to other processes, cached by "ip:port". Thread-safe.
class ClientPool {
 public:
  rpc::CoreWorkerService::Stub* Worker(const std::string& address);
  rpc::NodeManagerService::Stub* Raylet(const std::string& address);
  // A stub of its own for worker process `worker_id` at `address` (by the
  // address alone when the id is empty). A process at an address another
  // one used (its port handed out again by the kernel) then never gets that
  // one's channel: its dead connection, or the failure to reach it that the
  // channel remembers while it backs off.
  std::shared_ptr<rpc::CoreWorkerService::Stub> WorkerProcess(const std::string& address, const std::string& worker_id);

  // Stubs kept by WorkerProcess; past it they are all let go (a stream
  // still using one keeps it).
  static constexpr size_t kMaxWorkerProcesses = 10000;

 private:
  struct ProcessStub {
    std::string address;
    std::shared_ptr<rpc::CoreWorkerService::Stub> stub;
  };
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<rpc::CoreWorkerService::Stub>> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ProcessStub> processes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<rpc::NodeManagerService::Stub>> raylets_ ABSL_GUARDED_BY(mu_);
};

// A blocking call with a deadline and the token. Never on the io loop.
template <typename Reply, typename Call>
absl::StatusOr<Reply> SyncCall(const std::string& token, Call&& call, absl::Duration timeout = absl::Seconds(10)) {
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  Reply reply;
  grpc::Status s = call(&ctx, &reply);
  if (!s.ok()) return rpc::ToAbslStatus(s);
  return reply;
}

// How long calls to the GCS wait out an unreachable GCS (a restarting head)
// before they fail: MANTA_GCS_RECONNECT_TIMEOUT_S seconds, 60 by default (as
// Ray's gcs_rpc_server_reconnect_timeout_s).
absl::Duration GcsReconnectTimeout();

// What a GetObjectStatus reply says of `id`: its value when the reply
// carries it (`asked_value`, and small enough to be inline), nullopt when
// it is ready but not carried, or the error (Timeout while pending,
// ObjectLost when the owner has no such value, the value's own error).
absl::StatusOr<std::optional<Value>> StatusReplyValue(const ObjectId& id, const rpc::GetObjectStatusReply& reply,
                                                      bool asked_value);

// Blocking fetch of a value from the process at `address` over the
// GetObject stream. Any thread but the io loop. Its calls end with an
// OwnerDied error when `cancel` (optional) cancels them.
absl::StatusOr<Value> FetchObject(ClientPool* pool, const std::string& token, const std::string& address,
                                  const ObjectId& id, absl::Duration wait, rpc::CallCanceller* cancel = nullptr);

class CoreWorkerImpl : public CoreWorker, public rpc::CoreWorkerService::CallbackService {
 public:
  CoreWorkerImpl(CoreWorkerOptions options, bool is_worker);
  ~CoreWorkerImpl() override;

  // Starts the io loop and the server, registers (job or worker).
  absl::Status Start();
  // Finishes the job (driver) and stops everything; false when some call
  // could still reach this object, which must then be left allocated.
  bool Stop();

  // --- CoreWorker ---
  absl::StatusOr<std::vector<ObjectRefInfo>> SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                        const TaskOptions& options) override;
  absl::StatusOr<ActorId> CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                      const ActorOptions& options) override;
  absl::StatusOr<std::vector<ObjectRefInfo>> SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                             std::vector<Arg> args,
                                                             const ActorTaskOptions& options) override;
  // The RPC handlers of the same names (the service's) stay visible beside
  // the seam's calls.
  using rpc::CoreWorkerService::CallbackService::CancelTask;
  using rpc::CoreWorkerService::CallbackService::KillActor;
  absl::Status CancelTask(const ObjectRefInfo& ref, bool force, bool recursive) override;
  absl::StatusOr<ActorId> GetNamedActor(const std::string& name, const std::string& ray_namespace) override;
  absl::Status KillActor(const ActorId& actor, bool no_restart) override;
  absl::StatusOr<ObjectRefInfo> Put(std::string data) override;
  absl::StatusOr<ObjectRefInfo> PutWithRefs(std::shared_ptr<const std::string> data,
                                            const std::vector<ObjectRefInfo>& contained) override;
  std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> Get(const std::vector<ObjectRefInfo>& refs,
                                                                      absl::Duration timeout) override;
  std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout,
                         bool fetch_local) override;
  void AddLocalReference(const ObjectId& id) override;
  void RemoveLocalReference(const ObjectId& id) override;
  void AddBorrowedReference(const ObjectRefInfo& info) override;
  // Placement groups and the node table (placement_groups.cc; any thread
  // but the io loop).
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
  NodeId node_id() const override;
  std::string node_ip() const override { return options_.node_ip; }
  const WorkerId& worker_id() const override { return worker_id_; }
  const std::string& address() const override { return address_; }

  // --- CoreWorkerService (gRPC threads) ---
  grpc::ServerUnaryReactor* PushTask(grpc::CallbackServerContext* ctx, const rpc::PushTaskRequest* req,
                                     rpc::PushTaskReply* reply) override;
  grpc::ServerBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply>* PushTasks(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetObjectStatus(grpc::CallbackServerContext* ctx, const rpc::GetObjectStatusRequest* req,
                                            rpc::GetObjectStatusReply* reply) override;
  grpc::ServerWriteReactor<rpc::ObjectChunk>* GetObject(grpc::CallbackServerContext* ctx,
                                                        const rpc::GetObjectRequest* req) override;
  grpc::ServerUnaryReactor* KillActor(grpc::CallbackServerContext* ctx, const rpc::KillActorOnWorkerRequest* req,
                                      rpc::KillActorOnWorkerReply* reply) override;
  grpc::ServerUnaryReactor* Exit(grpc::CallbackServerContext* ctx, const rpc::ExitRequest* req,
                                 rpc::ExitReply* reply) override;
  grpc::ServerUnaryReactor* CancelTask(grpc::CallbackServerContext* ctx, const rpc::CancelTaskRequest* req,
                                       rpc::CancelTaskReply* reply) override;
  grpc::ServerUnaryReactor* RemoteCancelTask(grpc::CallbackServerContext* ctx, const rpc::RemoteCancelTaskRequest* req,
                                             rpc::RemoteCancelTaskReply* reply) override;
  grpc::ServerUnaryReactor* AddBorrower(grpc::CallbackServerContext* ctx, const rpc::AddBorrowerRequest* req,
                                        rpc::AddBorrowerReply* reply) override;
  grpc::ServerUnaryReactor* RemoveBorrower(grpc::CallbackServerContext* ctx, const rpc::RemoveBorrowerRequest* req,
                                           rpc::RemoveBorrowerReply* reply) override;
  grpc::ServerUnaryReactor* CheckWorker(grpc::CallbackServerContext* ctx, const rpc::CheckWorkerRequest* req,
                                        rpc::CheckWorkerReply* reply) override;

  // A push this worker may take (it runs tasks, it is the worker meant, the
  // task id is well formed); the caller's token is checked before.
  grpc::Status CheckPush(const rpc::PushTaskRequest& req) const;
  grpc::Status CheckRunsTasks() const;  // a worker, not a driver

  // The preamble of a request about one object: the caller's token, then a
  // well-formed id (into *id). Not OK: finish the call with it.
  grpc::Status CheckObjectRequest(const grpc::ServerContextBase& ctx, const std::string& object_id, ObjectId* id) const;

  // Worker: runs tasks on the calling (main) thread until exit; never returns.
  [[noreturn]] void RunTaskLoop();

  // Shared with the submitters and the receiver.
  const CoreWorkerOptions& options() const { return options_; }
  MemoryStore& store() { return store_; }
  ReferenceCounter& refs() { return refs_; }
  ClientPool& pool() { return pool_; }
  EventLoop& loop() { return loop_; }
  // Blocking calls to the GCS over this core worker's client (any thread
  // but the io loop); for the layer above (GcsClusterState).
  gcs::SyncGcsClient& gcs_sync() { return gcs_sync_; }
  const rpc::Address& address_proto() const { return address_proto_; }
  // Records a state change of `spec` for `manta list tasks` (sent in
  // batches). `worker`/`pid`: where the task was pushed or runs, when the
  // caller knows it (an executor passes its own; an owner's end of a task
  // passes none, so the record keeps where the task ran). `resources`: the
  // demand, said with SUBMITTED_TO_WORKER (taken from `spec` when null).
  // `ticket`: names the record for WithdrawTaskEvent.
  void RecordTaskEvent(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
                       const rpc::Address* worker = nullptr, int pid = 0,
                       std::shared_ptr<const TaskEventBuffer::Resources> resources = nullptr,
                       TaskEventBuffer::Ticket* ticket = nullptr);
  void WithdrawTaskEvent(const TaskEventBuffer::Ticket& ticket) { task_events_.Withdraw(ticket); }
  // Stores the returns of a finished task pushed by this process (moving
  // the values out of `reply`).
  void HandleReturns(rpc::PushTaskReply& reply);

 private:
  // A fresh task id: a random per-process prefix and a counter (no system
  // call per task).
  TaskId NextTaskId();

  // ---- pushes to workers: the transport (push_transport.h) and its host
  // (submit_host.cc) ----
  class PushHostImpl;
  std::unique_ptr<PushTransport::Host> MakePushHost();
  // A push that ended (gRPC thread): its returns stored, then settled with
  // the submitter that made it, which adds the calls that made due.
  void SettlePush(PushCall* call, std::vector<PushCall*>* to_start);

  // ---- normal tasks (task_submitter.h) and what both submitters share ----
  class SubmitHostImpl;
  std::unique_ptr<SubmitHost> MakeSubmitHost();
  SubmitDeps submit_deps() { return SubmitDeps{&store_, &refs_, &loop_, submit_host_.get()}; }
  void FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message) {
    submit_deps().FailTask(spec, type, message);
  }
  // Adds the caller's address and the program workers run, which actor
  // registrations carry.
  void AddCallerAndProgram(rpc::TaskSpec* spec) const;

  // ---- actors: actor_submitter.h; named actors and kills in named_actors.cc ----

  // ---- GCS and driver plumbing (core_worker_impl.cc) ----
  // Makes `address` this process's (address_proto_ and address_) and tells
  // the rooms that name it; before any task or ref uses it.
  void SetSelfAddress(rpc::Address address);
  // A worker with MANTA_STATS_DIR opens its stats page and keeps it current.
  void PublishStats();
  // Tells the submitters who submits, once registered.
  void ConfigureSubmitters();
  absl::Status RegisterJob();
  absl::Status RegisterWithRaylet();
  absl::StatusOr<rpc::GetAllNodeInfoReply> AliveNodes(absl::Duration timeout = absl::Seconds(10));
  absl::StatusOr<std::string> FindLocalRaylet();
  void PollLogs();
  void PrintLogs(const rpc::PollReply& reply);
  // Prints every line the job's workers wrote before this call.
  void DrainLogs();
  void FlushTaskEvents();
  // A spec with what the worker running it needs (id, job, function,
  // caller, arguments).
  // `contained`: the refs serialized inside the arguments' values.
  rpc::TaskSpec BaseSpec(rpc::TaskSpec::Type type, const std::string& function_name, std::vector<Arg> args,
                         std::vector<ObjectId>* contained);

  const CoreWorkerOptions options_;
  const bool is_worker_;
  const int pid_;
  WorkerId worker_id_;
  JobId job_id_;
  rpc::Address address_proto_;
  std::string address_;
  std::string raylet_address_;
  // The first 16 bytes of every task id this process makes.
  std::array<uint8_t, 16> task_id_prefix_;
  std::atomic<uint64_t> task_counter_{0};

  EventLoop loop_;
  std::thread io_thread_;
  std::unique_ptr<rpc::GatedServer> server_;
  ClientPool pool_;
  MemoryStore store_;
  // Reference counting and values between processes (object_service.h; its
  // handlers in object_rpc.cc), both reaching other processes via peers_.
  std::unique_ptr<GrpcPeers> peers_;
  ReferenceCounter refs_;
  ObjectService objects_;
  // Pulls large task returns into store_; stopped (cancelled and joined) by
  // Stop(), and declared after pool_ and store_, which its fetches use.
  FetchPool fetches_{kMaxFetchThreads};

  // Worker: runs the tasks pushed here (task_service.cc).
  class ReceiverHost;
  void StartReceiver();
  std::unique_ptr<TaskHost> receiver_host_;
  std::unique_ptr<TaskReceiver> receiver_;
  TaskEventBuffer task_events_;

  // Every task and actor call goes to its worker through pushes_; Stop()
  // stops it, cancels what is in flight and waits until the completions,
  // which touch this object, have all run.
  std::unique_ptr<PushTransport::Host> push_host_;
  PushTransport pushes_;

  // Pushes, leases and task events for the submitters; argument
  // resolution; normal tasks.
  std::unique_ptr<SubmitHost> submit_host_;
  DependencyResolver resolver_{&store_, &loop_};
  TaskSubmitter tasks_;
  // The GCS (gcs/client/gcs_client.h): the rooms and the io loop call it
  // directly; a caller's thread blocks on it through gcs_sync_.
  std::unique_ptr<gcs::GcsClient> gcs_client_;
  gcs::SyncGcsClient gcs_sync_;
  // A blocking call to the GCS from a caller's thread (never the io loop),
  // made again while the GCS is unreachable until GcsReconnectTimeout() has
  // passed; only for requests the GCS handles idempotently (ids chosen here).
  // `start` runs on the loop: capture by value. `wait`: zero for the default.
  template <typename Reply>
  absl::StatusOr<Reply> GcsCall(gcs::SyncGcsClient::Start<Reply> start, absl::Duration wait = absl::ZeroDuration()) {
    return gcs_sync_.Call<Reply>(std::move(start), {wait, GcsReconnectTimeout()});
  }
  // The actors this process creates and calls.
  ActorSubmitter actors_;
  // What each task running here submitted, for recursive cancels.
  ChildTasks children_{[this](const ChildTasks::Child& c) {
    return c.actor.IsNil() ? tasks_.IsPending(c.task.Binary()) : actors_.IsPending(c.actor, c.task.Binary());
  }};
  // Cancels `children`, the tasks and actor calls `parent` submitted, and
  // theirs in turn (normal tasks with `force`, actor calls without, as
  // Ray's); `done` runs once each cancel was carried out
  // (TaskSubmitter::Cancel).
  void CancelChildren(const TaskId& parent, std::vector<ChildTasks::Child> children, bool force,
                      std::function<void()> done);

  // io loop only.
  int64_t log_poll_sequence_ = 0;
  std::string log_poll_incarnation_;
  std::unique_ptr<EventLoop::Timer> log_poll_timer_;
  std::unique_ptr<EventLoop::Timer> task_event_timer_;
  // A worker's stats page (MANTA_STATS_DIR): the bytes its store holds, for
  // its raylet's metrics, refreshed each second on the io loop.
  std::unique_ptr<metrics::StatsPage> stats_page_;
  std::unique_ptr<EventLoop::Timer> stats_timer_;
  std::atomic<bool> stopping_{false};

  friend class PushTasksReactor;
};

}  // namespace manta::core
