// CoreWorkerImpl: the CoreWorker of a driver or worker process.
//
// Threads:
//  * the io loop (an EventLoop on its own thread) owns all submitter and
//    actor state: lease queues, leases, actor queues, subscriptions. User
//    threads and gRPC callbacks Post() into it.
//  * gRPC threads run the CoreWorkerService handlers; they only queue work.
//  * in a worker, the main thread runs tasks (TaskReceiver); threaded actors
//    use a pool of max_concurrency threads.
//  * the MemoryStore is shared, behind its own mutex.
// Internal header: includes gRPC; only runtime/core_worker/*.cc include it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/event_loop.h"
#include "common/rpc/grpc_util.h"
#include "proto/core_worker.grpc.pb.h"
#include "proto/gcs_service.grpc.pb.h"
#include "proto/node_manager.grpc.pb.h"
#include "runtime/core_worker/core_worker.h"
#include "runtime/core_worker/memory_store.h"

namespace manta::core {

// Values up to this size travel inline in replies and task arguments.
constexpr size_t kInlineLimit = 100 * 1024;
// Chunk size of large object transfers.
constexpr size_t kChunkBytes = 4 << 20;

// The return object id of `task`'s `index`-th return (1-based).
ObjectId ReturnObjectId(const TaskId& task, uint32_t index);
rpc::ErrorInfo::Type ToProtoErrorType(ErrorType t);
ErrorType FromProtoErrorType(rpc::ErrorInfo::Type t);
std::string AddressKey(const rpc::Address& a);  // "ip:port"

// Stubs to other processes, cached by "ip:port". Thread-safe.
class ClientPool {
 public:
  rpc::CoreWorkerService::Stub* Worker(const std::string& address);
  rpc::NodeManagerService::Stub* Raylet(const std::string& address);

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<rpc::CoreWorkerService::Stub>> workers_;
  std::map<std::string, std::unique_ptr<rpc::NodeManagerService::Stub>> raylets_;
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

// Blocking fetch of a value from the process at `address` over the
// GetObject stream. Any thread but the io loop.
absl::StatusOr<Value> FetchObject(ClientPool* pool, const std::string& token, const std::string& address,
                                  const ObjectId& id, absl::Duration wait);

class TaskReceiver;

class CoreWorkerImpl : public CoreWorker, public rpc::CoreWorkerService::CallbackService {
 public:
  CoreWorkerImpl(CoreWorkerOptions options, bool is_worker);
  ~CoreWorkerImpl() override;

  // Starts the io loop and the server, registers (job or worker).
  absl::Status Start();
  void Stop();

  // --- CoreWorker ---
  absl::StatusOr<ObjectRefInfo> SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                           const TaskOptions& options) override;
  absl::StatusOr<ActorId> CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                      const ActorOptions& options) override;
  absl::StatusOr<ObjectRefInfo> SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                std::vector<Arg> args) override;
  absl::StatusOr<ActorId> GetNamedActor(const std::string& name, const std::string& ray_namespace) override;
  absl::Status KillActor(const ActorId& actor, bool no_restart) override;
  absl::StatusOr<ObjectRefInfo> Put(std::string data) override;
  std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> Get(const std::vector<ObjectRefInfo>& refs,
                                                                      absl::Duration timeout) override;
  std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout) override;
  void AddLocalReference(const ObjectId& id) override;
  void RemoveLocalReference(const ObjectId& id) override;
  // Placement groups and the node table (placement_groups.cc; any thread
  // but the io loop).
  absl::StatusOr<PlacementGroupData> CreatePlacementGroup(const PlacementGroupData& spec) override;
  absl::Status RemovePlacementGroup(const PlacementGroupId& id) override;
  absl::StatusOr<PlacementGroupData> GetPlacementGroup(const PlacementGroupId& id) override;
  absl::StatusOr<PlacementGroupData> GetNamedPlacementGroup(const std::string& name,
                                                            const std::string& ray_namespace) override;
  absl::StatusOr<PlacementGroupData> WaitPlacementGroupReady(const PlacementGroupId& id,
                                                             absl::Duration timeout) override;
  absl::StatusOr<std::vector<NodeData>> GetAllNodes() override;
  absl::StatusOr<std::vector<NodeResourcesData>> GetClusterResources() override;
  const JobId& job_id() const override { return job_id_; }
  const WorkerId& worker_id() const override { return worker_id_; }
  const std::string& address() const override { return address_; }

  // --- CoreWorkerService (gRPC threads) ---
  grpc::ServerUnaryReactor* PushTask(grpc::CallbackServerContext* ctx, const rpc::PushTaskRequest* req,
                                     rpc::PushTaskReply* reply) override;
  grpc::ServerUnaryReactor* GetObjectStatus(grpc::CallbackServerContext* ctx, const rpc::GetObjectStatusRequest* req,
                                            rpc::GetObjectStatusReply* reply) override;
  grpc::ServerWriteReactor<rpc::ObjectChunk>* GetObject(grpc::CallbackServerContext* ctx,
                                                        const rpc::GetObjectRequest* req) override;
  grpc::ServerUnaryReactor* KillActor(grpc::CallbackServerContext* ctx, const rpc::KillActorOnWorkerRequest* req,
                                      rpc::KillActorOnWorkerReply* reply) override;
  grpc::ServerUnaryReactor* Exit(grpc::CallbackServerContext* ctx, const rpc::ExitRequest* req,
                                 rpc::ExitReply* reply) override;

  // Worker: runs tasks on the calling (main) thread until exit; never returns.
  [[noreturn]] void RunTaskLoop();

  // Shared with the submitters and the receiver.
  const CoreWorkerOptions& options() const { return options_; }
  MemoryStore& store() { return store_; }
  ClientPool& pool() { return pool_; }
  EventLoop& loop() { return loop_; }
  const rpc::Address& address_proto() const { return address_proto_; }
  // `worker`/`pid`: where the task was pushed, when the caller knows it.
  void RecordTaskEvent(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
                       const rpc::Address* worker = nullptr, int pid = 0);
  // Resolves an argument's value for execution (local store, or the owner).
  absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg);
  // A large return kept here until its owner has pulled it (worker side).
  void HoldForOwner(const ObjectId& id, Value value);
  // Stores the returns of a finished task pushed by this process.
  void HandleReturns(const rpc::PushTaskReply& reply);

 private:
  // ---- normal tasks (task_submitter.cc; io loop) ----
  struct PendingTask {
    rpc::TaskSpec spec;
  };
  struct Lease {
    LeaseId lease_id;
    std::string raylet;  // "ip:port" of the granting raylet
    rpc::Address worker;
    std::vector<int> chips;
    int chips_per_host = 0;
    int worker_pid = 0;
    int in_flight = 0;
    absl::Time idle_since = absl::InfiniteFuture();
    bool dead = false;
  };
  struct SchedulingQueue {
    std::deque<PendingTask> tasks;
    std::vector<std::shared_ptr<Lease>> leases;
    int lease_requests_in_flight = 0;
    absl::Time oldest_lease_request = absl::InfinitePast();
    rpc::TaskSpec shape;  // resources, labels, job, program of this key
  };
  static std::string SchedulingKey(const rpc::TaskSpec& spec);
  void SubmitOnLoop(rpc::TaskSpec spec);
  void ResolveDependencies(rpc::TaskSpec spec, std::function<void(rpc::TaskSpec)> then);
  void Pump(const std::string& key);
  void RequestLease(const std::string& key, const std::string& raylet, bool grant_or_reject, int spillbacks);
  void PushNormalTask(const std::string& key, std::shared_ptr<Lease> lease, rpc::TaskSpec spec);
  void OnNormalTaskReply(const std::string& key, const std::shared_ptr<Lease>& lease, rpc::TaskSpec spec,
                         const absl::Status& s, const rpc::PushTaskReply& reply);
  void OnNormalTaskFailed(const std::string& key, rpc::TaskSpec spec, const std::string& why);
  void ReturnLease(const std::shared_ptr<Lease>& lease, bool disconnect);
  void ReturnIdleLeases();
  void FailQueue(const std::string& key, ErrorType type, const std::string& message);
  void FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message);

  // ---- actors (actor_submitter.cc; io loop) ----
  struct ActorState {
    ActorId id;
    rpc::ActorInfo info;
    int max_task_retries = 0;
    int64_t next_sequence = 0;
    // Calls not yet completed, by sequence number.
    std::map<int64_t, rpc::TaskSpec> pending;
    // Every pending call below the cursor was pushed to the current
    // incarnation; `resend` lists single calls to push again.
    int64_t send_cursor = 0;
    std::set<int64_t> resend;
    std::map<int64_t, int> retries_used;
    std::string address;  // "ip:port" while ALIVE
  };
  void RegisterActorOnLoop(rpc::TaskSpec creation);
  void SendActorTasks(ActorState& actor);
  void OnActorTaskReply(const ActorId& actor, const std::string& address, int64_t sequence, const absl::Status& status,
                        const rpc::PushTaskReply& reply);
  void OnActorInfo(const rpc::ActorInfo& info);
  void PollActors();
  void SubscribeActor(const ActorId& id);
  void FailActorTasks(ActorState& actor, const std::string& why);

  // ---- GCS and driver plumbing (core_worker_impl.cc) ----
  absl::Status RegisterJob();
  absl::Status RegisterWithRaylet();
  absl::StatusOr<std::string> FindLocalRaylet();
  void PollLogs();
  void PrintLogs(const rpc::PollReply& reply);
  void DrainLogs(absl::Duration wait);
  void FlushTaskEvents();
  rpc::TaskSpec BaseSpec(rpc::TaskSpec::Type type, const std::string& function_name, std::vector<Arg> args);

  const CoreWorkerOptions options_;
  const bool is_worker_;
  WorkerId worker_id_;
  JobId job_id_;
  rpc::Address address_proto_;
  std::string address_;
  std::string raylet_address_;

  EventLoop loop_;
  std::thread io_thread_;
  std::unique_ptr<grpc::Server> server_;
  ClientPool pool_;
  MemoryStore store_;
  std::shared_ptr<grpc::Channel> gcs_channel_;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> gcs_nodes_;
  std::unique_ptr<rpc::ActorGcsService::Stub> gcs_actors_;
  std::unique_ptr<rpc::JobGcsService::Stub> gcs_jobs_;
  std::unique_ptr<rpc::TaskEventGcsService::Stub> gcs_tasks_;
  std::unique_ptr<rpc::PubSubGcsService::Stub> gcs_pubsub_;
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> gcs_placement_groups_;
  std::unique_ptr<rpc::NodeResourceGcsService::Stub> gcs_resources_;
  std::unique_ptr<TaskReceiver> receiver_;
  std::mutex held_mu_;
  absl::flat_hash_set<ObjectId> held_for_owner_;  // guarded by held_mu_

  // io loop only.
  std::map<std::string, SchedulingQueue> queues_;
  std::unique_ptr<EventLoop::Timer> idle_lease_timer_;
  absl::flat_hash_map<ActorId, std::unique_ptr<ActorState>> actors_;
  int64_t actor_poll_sequence_ = 0;
  std::string actor_poll_incarnation_;
  bool actor_poll_running_ = false;
  int64_t log_poll_sequence_ = 0;
  std::string log_poll_incarnation_;
  std::unique_ptr<EventLoop::Timer> log_poll_timer_;
  std::mutex task_events_mu_;
  std::vector<rpc::TaskEvent> task_events_;  // guarded by task_events_mu_
  std::unique_ptr<EventLoop::Timer> task_event_timer_;
  std::atomic<bool> stopping_{false};

  friend class TaskReceiver;
};

}  // namespace manta::core
