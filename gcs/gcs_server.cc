#include "gcs/gcs_server.h"

#include <atomic>
#include <optional>
#include <thread>

#include "common/id.h"
#include "common/logging.h"
#include "common/memory_release.h"
#include "common/rpc/client_call.h"
#include "common/rpc/connection_gate.h"
#include "common/rpc/server_call.h"
#include "common/rpc/tsan_handoff.h"
#include "common/status.h"
#include "gcs/actor_manager.h"
#include "gcs/actor_scheduler.h"
#include "gcs/core_worker_client.h"
#include "gcs/job_manager.h"
#include "gcs/kv_manager.h"
#include "gcs/node_manager.h"
#include "gcs/placement_group_manager.h"
#include "gcs/placement_group_scheduler.h"
#include "gcs/publisher.h"
#include "gcs/resource_manager.h"
#include "gcs/raylet_client.h"
#include "gcs/task_event_manager.h"
#include "gcs/train_run_manager.h"
#include "proto/gcs_service.grpc.pb.h"
#include "proto/node_manager.grpc.pb.h"

namespace manta::gcs {
namespace {

constexpr char kClusterTable[] = "cluster";
constexpr char kClusterIdKey[] = "cluster_id";

// Health checks over gRPC, one channel per node.
class GrpcHealthCheckClient : public HealthCheckClient {
 public:
  GrpcHealthCheckClient(EventLoop* loop, std::string token, std::string incarnation)
      : loop_(loop), token_(std::move(token)), incarnation_(std::move(incarnation)) {}

  void Check(const NodeId& node, const std::string& address, absl::Duration timeout,
             std::function<void(const absl::Status&)> done) override {
    auto& stub = stubs_[node];
    if (!stub) stub = rpc::NodeManagerService::NewStub(rpc::MakeChannel(address));
    rpc::HealthCheckRequest request;
    request.set_gcs_incarnation(incarnation_);
    rpc::UnaryCall<rpc::HealthCheckReply>(
        loop_, token_, timeout, std::move(request),
        [stub = stub.get()](auto* ctx, auto* req, auto* reply, auto cb) {
          stub->async()->HealthCheck(ctx, req, reply, std::move(cb));
        },
        [done = std::move(done)](const absl::Status& s, rpc::HealthCheckReply&&) { done(s); });
  }

  void Forget(const NodeId& node) override {
    // A call in flight holds its own reference to the channel.
    stubs_.erase(node);
  }

 private:
  EventLoop* const loop_;
  const std::string token_;
  const std::string incarnation_;
  absl::flat_hash_map<NodeId, std::unique_ptr<rpc::NodeManagerService::Stub>> stubs_;
};

}  // namespace

class GcsServer::Impl {
 public:
  // The gRPC adapters: check the token, post to the loop, run the manager.
  class NodeInfoService : public rpc::NodeInfoGcsService::CallbackService {
   public:
    explicit NodeInfoService(Impl* impl) : impl_(impl) {}
#define MANTA_GCS_HANDLER(Method, Req, Reply, manager, handler)                                        \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const rpc::Req* req, rpc::Reply* reply) \
      override {                                                                                       \
    return rpc::Dispatch(ctx, impl_->loop_, impl_->options_.token,                                     \
                         [m = impl_->manager.get(), req, reply](rpc::Done done) {                     \
                           m->handler(*req, reply, std::move(done));                                   \
                         });                                                                           \
  }
    MANTA_GCS_HANDLER(GetClusterId, GetClusterIdRequest, GetClusterIdReply, nodes_, HandleGetClusterId)
    MANTA_GCS_HANDLER(RegisterNode, RegisterNodeRequest, RegisterNodeReply, nodes_, HandleRegisterNode)
    MANTA_GCS_HANDLER(UnregisterNode, UnregisterNodeRequest, UnregisterNodeReply, nodes_, HandleUnregisterNode)
    MANTA_GCS_HANDLER(GetAllNodeInfo, GetAllNodeInfoRequest, GetAllNodeInfoReply, nodes_, HandleGetAllNodeInfo)
    MANTA_GCS_HANDLER(DrainNode, DrainNodeRequest, DrainNodeReply, nodes_, HandleDrainNode)
   private:
    Impl* impl_;
  };

  class ResourceService : public rpc::NodeResourceGcsService::CallbackService {
   public:
    explicit ResourceService(Impl* impl) : impl_(impl) {}
    // Both also involve the actor and placement group schedulers: a report
    // may free room for a waiting actor or group, and those are demands too.
    grpc::ServerUnaryReactor* ReportResources(grpc::CallbackServerContext* ctx, const rpc::ReportResourcesRequest* req,
                                              rpc::ReportResourcesReply* reply) override {
      return rpc::Dispatch(ctx, impl_->loop_, impl_->options_.token, [impl = impl_, req, reply](rpc::Done done) {
        impl->resources_->HandleReportResources(
            *req, reply, [impl, req, reply, done = std::move(done)](const absl::Status& s) {
              // Before done(): the request and reply are freed once the call finishes.
              auto node = NodeId::FromBinary(req->resources().node_id());
              bool changed = s.ok() && node.ok() && reply->known_node();
              done(s);
              if (changed) impl->OnResourcesChanged(*node);
            });
      });
    }
    grpc::ServerUnaryReactor* GetClusterResources(grpc::CallbackServerContext* ctx,
                                                  const rpc::GetClusterResourcesRequest* req,
                                                  rpc::GetClusterResourcesReply* reply) override {
      return rpc::Dispatch(ctx, impl_->loop_, impl_->options_.token, [impl = impl_, req, reply](rpc::Done done) {
        impl->resources_->HandleGetClusterResources(
            *req, reply, [impl, reply, done = std::move(done)](const absl::Status& s) {
              if (s.ok()) {
                impl->actor_scheduler_->AppendDemands(reply);
                impl->pgs_->AppendPending(reply);
              }
              done(s);
            });
      });
    }
   private:
    Impl* impl_;
  };

  class KvService : public rpc::InternalKvGcsService::CallbackService {
   public:
    explicit KvService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(Put, KvPutRequest, KvPutReply, kv_, HandlePut)
    MANTA_GCS_HANDLER(Get, KvGetRequest, KvGetReply, kv_, HandleGet)
    MANTA_GCS_HANDLER(Del, KvDelRequest, KvDelReply, kv_, HandleDel)
    MANTA_GCS_HANDLER(Keys, KvKeysRequest, KvKeysReply, kv_, HandleKeys)
   private:
    Impl* impl_;
  };

  class ActorService : public rpc::ActorGcsService::CallbackService {
   public:
    explicit ActorService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(ReportWorkerFailure, ReportWorkerFailureRequest, ReportWorkerFailureReply, actors_,
                      HandleReportWorkerFailure)
    MANTA_GCS_HANDLER(RegisterActor, RegisterActorRequest, RegisterActorReply, actors_, HandleRegisterActor)
    MANTA_GCS_HANDLER(GetActorInfo, GetActorInfoRequest, GetActorInfoReply, actors_, HandleGetActorInfo)
    MANTA_GCS_HANDLER(GetNamedActor, GetNamedActorRequest, GetNamedActorReply, actors_, HandleGetNamedActor)
    MANTA_GCS_HANDLER(ListActors, ListActorsRequest, ListActorsReply, actors_, HandleListActors)
    MANTA_GCS_HANDLER(KillActor, KillActorRequest, KillActorReply, actors_, HandleKillActor)
   private:
    Impl* impl_;
  };

  class JobService : public rpc::JobGcsService::CallbackService {
   public:
    explicit JobService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(AddJob, AddJobRequest, AddJobReply, jobs_, HandleAddJob)
    MANTA_GCS_HANDLER(MarkJobFinished, MarkJobFinishedRequest, MarkJobFinishedReply, jobs_, HandleMarkJobFinished)
    MANTA_GCS_HANDLER(GetAllJobInfo, GetAllJobInfoRequest, GetAllJobInfoReply, jobs_, HandleGetAllJobInfo)
   private:
    Impl* impl_;
  };

  class TaskEventService : public rpc::TaskEventGcsService::CallbackService {
   public:
    explicit TaskEventService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(AddTaskEvents, AddTaskEventsRequest, AddTaskEventsReply, task_events_, HandleAddTaskEvents)
    MANTA_GCS_HANDLER(ListTasks, ListTasksRequest, ListTasksReply, task_events_, HandleListTasks)
    MANTA_GCS_HANDLER(PublishLogs, PublishLogsRequest, PublishLogsReply, task_events_, HandlePublishLogs)
   private:
    Impl* impl_;
  };

  class PlacementGroupService : public rpc::PlacementGroupGcsService::CallbackService {
   public:
    explicit PlacementGroupService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(CreatePlacementGroup, CreatePlacementGroupRequest, CreatePlacementGroupReply, pgs_,
                      HandleCreatePlacementGroup)
    MANTA_GCS_HANDLER(RemovePlacementGroup, RemovePlacementGroupRequest, RemovePlacementGroupReply, pgs_,
                      HandleRemovePlacementGroup)
    MANTA_GCS_HANDLER(GetPlacementGroup, GetPlacementGroupRequest, GetPlacementGroupReply, pgs_,
                      HandleGetPlacementGroup)
    MANTA_GCS_HANDLER(ListPlacementGroups, ListPlacementGroupsRequest, ListPlacementGroupsReply, pgs_,
                      HandleListPlacementGroups)
    MANTA_GCS_HANDLER(WaitPlacementGroupReady, WaitPlacementGroupReadyRequest, WaitPlacementGroupReadyReply, pgs_,
                      HandleWaitPlacementGroupReady)
   private:
    Impl* impl_;
  };

  class TrainRunService : public rpc::TrainRunGcsService::CallbackService {
   public:
    explicit TrainRunService(Impl* impl) : impl_(impl) {}
    MANTA_GCS_HANDLER(ReportTrainRun, ReportTrainRunRequest, ReportTrainRunReply, train_runs_, HandleReportTrainRun)
    MANTA_GCS_HANDLER(ListTrainRuns, ListTrainRunsRequest, ListTrainRunsReply, train_runs_, HandleListTrainRuns)
   private:
    Impl* impl_;
  };

  // Polls get their own reactor: a held poll whose connection drops is the
  // fastest sign that its raylet (subscriber_node_id) or driver
  // (subscriber_job_id) died.
  class PollReactor : public grpc::ServerUnaryReactor {
   public:
    PollReactor(Impl* impl, const rpc::PollRequest& req) : impl_(impl) {
      if (auto node = NodeId::FromBinary(req.subscriber_node_id()); node.ok()) node_ = *node;
      if (auto job = JobId::FromBinary(req.subscriber_job_id()); job.ok()) job_ = *job;
    }
    // On the loop thread, before the poll is handled.
    void Started() {
      if (job_.has_value() && !impl_->shutting_down_) impl_->jobs_->OnDriverPollStarted(*job_);
    }
    void OnCancel() override {
      MANTA_GRPC_HANDOFF_AFTER();
      cancelled_ = true;
      if (!node_.has_value()) return;
      impl_->loop_->Post([impl = impl_, node = *node_] {
        if (impl->health_ && !impl->shutting_down_) impl->health_->Suspect(node);
      });
    }
    void OnDone() override {
      MANTA_GRPC_HANDOFF_AFTER();
      if (job_.has_value()) {
        impl_->loop_->Post([impl = impl_, job = *job_, lost = cancelled_.load()] {
          if (!impl->shutting_down_) impl->jobs_->OnDriverPollEnded(job, lost);
        });
      }
      delete this;
    }

   private:
    Impl* const impl_;
    std::optional<NodeId> node_;
    std::optional<JobId> job_;
    std::atomic<bool> cancelled_{false};
  };

  class PubSubService : public rpc::PubSubGcsService::CallbackService {
   public:
    explicit PubSubService(Impl* impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* ctx, const rpc::PollRequest* req,
                                   rpc::PollReply* reply) override {
      grpc::Status auth = rpc::CheckAuth(*ctx, impl_->options_.token);
      if (!auth.ok()) {
        rpc::PollRequest unauthenticated;
        auto* reactor = new PollReactor(impl_, unauthenticated);
        reactor->Finish(auth);
        return reactor;
      }
      auto* reactor = new PollReactor(impl_, *req);
      impl_->loop_->Post([impl = impl_, req, reply, reactor] {
        reactor->Started();
        impl->publisher_->HandlePoll(*req, reply, [reactor](const absl::Status& s) {
          MANTA_GRPC_HANDOFF_BEFORE();  // OnDone reads the reactor on gRPC's thread
          reactor->Finish(rpc::ToGrpcStatus(s));
        });
      });
      return reactor;
    }

   private:
    Impl* impl_;
  };
#undef MANTA_GCS_HANDLER

  Impl(GcsServerOptions options, EventLoop* loop) : options_(std::move(options)), loop_(loop) {}
  ~Impl() {
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
  }

  absl::Status Start() {
    ASSIGN_OR_RETURN(store_, OpenStore(options_.storage, loop_));
    RETURN_IF_ERROR(LoadOrCreateClusterId());
    char inc[8];
    FillRandom(inc, sizeof(inc));
    incarnation_ = std::string(inc, sizeof(inc));
    CreateManagers();
    ListenToNodes();
    RETURN_IF_ERROR(InitializeTables());
    return Serve();
  }

  // The managers, wired to one another (ids, clients, probes, listeners
  // other than the node table's).
  void CreateManagers() {
    publisher_ = std::make_unique<Publisher>(loop_, incarnation_);
    raylet_clients_ = MakeGrpcRayletClientPool(loop_, options_.token);
    nodes_ = std::make_unique<NodeManager>(store_.get(), publisher_.get(), cluster_id_, incarnation_,
                                           raylet_clients_.get());
    resources_ = std::make_unique<ResourceManager>(nodes_.get(), publisher_.get());
    kv_ = std::make_unique<KvManager>(store_.get());
    auto run_after = [this](absl::Duration delay, std::function<void()> fn) {
      return loop_->RunAfter(delay, std::move(fn));
    };
    jobs_ = std::make_unique<JobManager>(store_.get(), publisher_.get(), raylet_clients_.get(),
                                         [this] { return AliveNodes(); }, run_after);
    task_events_ = std::make_unique<TaskEventManager>(publisher_.get());
    train_runs_ = std::make_unique<TrainRunManager>(store_.get(), jobs_.get());
    worker_clients_ = MakeGrpcCoreWorkerClientPool(loop_, options_.token);
    jobs_->SetDriverProbe([this](const rpc::Address& driver, std::function<void(bool)> answer) {
      // Gone: nothing listens at its address (refused, after the pool's
      // retries), or another worker does. A timeout says nothing.
      if (driver.ip().empty() || driver.port() <= 0 || driver.worker_id().empty()) return answer(false);
      worker_clients_->CheckWorker(driver, [this, driver, answer](const absl::Status& s, rpc::CheckWorkerReply&& reply) {
        bool gone = s.ok() ? !reply.same() : absl::IsUnavailable(s);
        if (gone) worker_clients_->Forget(driver.worker_id());
        answer(gone);
      });
    });
    actor_scheduler_ = std::make_unique<ActorScheduler>(
        [this](const NodeId& node) { return resources_->Get(node); }, raylet_clients_.get(), worker_clients_.get(),
        run_after);
    actors_ = std::make_unique<ActorManager>(store_.get(), publisher_.get(), actor_scheduler_.get(),
                                             raylet_clients_.get(), worker_clients_.get(), jobs_.get());
    actors_->SetTaskEventSink([this](const rpc::TaskEvent& e) { task_events_->Record(e); });
    pg_scheduler_ = std::make_unique<PlacementGroupScheduler>(
        [this](const NodeId& node) { return resources_->Get(node); },
        [this](const rpc::NodeResources& r) {
          if (resources_->Apply(r)) OnResourcesChanged(*NodeId::FromBinary(r.node_id()));
        },
        raylet_clients_.get());
    pgs_ = std::make_unique<PlacementGroupManager>(store_.get(), publisher_.get(), pg_scheduler_.get(),
                                                   raylet_clients_.get(), run_after);
    pgs_->SetRemovedListener([this](const std::string& id) { actors_->OnPlacementGroupRemoved(id); });
    jobs_->AddJobFinishedListener([this](const rpc::JobInfo& job) {
      actors_->OnJobFinished(job);
      pgs_->OnJobFinished(job.job_id());
      train_runs_->OnJobFinished(*JobId::FromBinary(job.job_id()));
    });
    metrics_ = std::make_unique<GcsMetrics>(
        options_.metrics, loop_,
        GcsMetrics::Tables{nodes_.get(), actors_.get(), pgs_.get(), task_events_.get(), train_runs_.get(), kv_.get()});
    kv_->SetChangeListener([this](const std::string& ns) {
      if (ns == kMetricsKvNamespace) metrics_->OnTargetsChanged();
    });
  }

  // What each manager does when a node joins, drains or dies.
  void ListenToNodes() {
    health_client_ = std::make_unique<GrpcHealthCheckClient>(loop_, options_.token, incarnation_);
    health_ = std::make_unique<HealthCheckManager>(
        health_client_.get(), options_.health_check,
        [this](const NodeId& node, const std::string& reason) {
          nodes_->MarkNodeDead(node, "NodeTerminated: " + reason, /*expected=*/false);
        });
    nodes_->AddNodeAddedListener([this](const rpc::NodeInfo& info) {
      resources_->OnNodeAdded(info);
      actor_scheduler_->OnNodeAdded(info);
      pgs_->OnNodeAdded(info);
      health_->AddNode(*NodeId::FromBinary(info.node_id()),
                       RayletAddress(info));
      metrics_->OnTargetsChanged();
    });
    // A draining node takes no new actors or bundles.
    nodes_->AddNodeDrainingListener([this](const rpc::NodeInfo& info) {
      actor_scheduler_->OnNodeDraining(info);
      pg_scheduler_->OnNodeDraining(info);
    });
    nodes_->AddNodeDeadListener([this](const rpc::NodeInfo& info) {
      resources_->OnNodeDead(info);
      health_->RemoveNode(*NodeId::FromBinary(info.node_id()));
      raylet_clients_->Forget(*NodeId::FromBinary(info.node_id()));
      // The scheduler first: attempts on the node end before actors restart.
      actor_scheduler_->OnNodeDead(*NodeId::FromBinary(info.node_id()));
      pg_scheduler_->OnNodeDead(*NodeId::FromBinary(info.node_id()));
      pgs_->OnNodeDead(*NodeId::FromBinary(info.node_id()));
      actors_->OnNodeDead(info);
      metrics_->OnTargetsChanged();
    });
  }

  // Recovers every table from the store.
  absl::Status InitializeTables() {
    // Groups first: recovered nodes are synced against them as they are added.
    RETURN_IF_ERROR(pgs_->Initialize());
    RETURN_IF_ERROR(nodes_->Initialize());
    RETURN_IF_ERROR(kv_->Initialize());
    RETURN_IF_ERROR(jobs_->Initialize());
    RETURN_IF_ERROR(train_runs_->Initialize());
    // A run whose job ended while the GCS was down missed OnJobFinished.
    train_runs_->AbortRunsOfFinishedJobs();
    return actors_->Initialize();
  }

  // The gRPC services behind the token gate, and the timers.
  absl::Status Serve() {
    node_service_ = std::make_unique<NodeInfoService>(this);
    resource_service_ = std::make_unique<ResourceService>(this);
    kv_service_ = std::make_unique<KvService>(this);
    pubsub_service_ = std::make_unique<PubSubService>(this);
    actor_service_ = std::make_unique<ActorService>(this);
    job_service_ = std::make_unique<JobService>(this);
    task_event_service_ = std::make_unique<TaskEventService>(this);
    pg_service_ = std::make_unique<PlacementGroupService>(this);
    train_run_service_ = std::make_unique<TrainRunService>(this);
    grpc::ServerBuilder builder;
    rpc::ConfigureServerBuilder(&builder);
    std::string address = options_.bind_address + ":" + std::to_string(options_.port);
    builder.RegisterService(node_service_.get());
    builder.RegisterService(resource_service_.get());
    builder.RegisterService(kv_service_.get());
    builder.RegisterService(pubsub_service_.get());
    builder.RegisterService(actor_service_.get());
    builder.RegisterService(job_service_.get());
    builder.RegisterService(task_event_service_.get());
    builder.RegisterService(pg_service_.get());
    builder.RegisterService(train_run_service_.get());
    if (options_.metrics.port >= 0) metrics_->server_metrics()->Install(&builder);
    auto server = rpc::GatedServer::Start(&builder, address, options_.token);
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    port_ = server_->port();
    RETURN_IF_ERROR(metrics_->Start());
    health_timer_ = loop_->RunEvery(options_.health_check.tick, [this] { health_->Tick(); });
    // Large requests (and refused ones) leave freed heap pages behind; give
    // them back so a burst does not stay resident.
    trim_timer_ = loop_->RunEvery(absl::Seconds(5), [] { ReleaseFreeMemory(); });
    Logger("gcs")->info("GCS serving on {} cluster_id={}", address, cluster_id_.Hex());
    return absl::OkStatus();
  }

  void Shutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    health_timer_.reset();
    trim_timer_.reset();
    publisher_->Shutdown();
    pgs_->Shutdown();
    if (metrics_) metrics_->Stop();
    // Shutdown blocks until in-flight calls finish, and their handlers run on
    // this loop: wait on another thread, then stop the loop.
    shutdown_thread_ = std::thread([this] {
      if (server_) server_->Shutdown(absl::Seconds(2));
      loop_->Stop();
    });
  }

  // A node's resource view changed (a report, or a raylet's reply).
  void OnResourcesChanged(const NodeId& node) {
    actor_scheduler_->OnResourcesChanged(node);
    pgs_->OnResourcesChanged();
  }

  std::vector<rpc::NodeInfo> AliveNodes() {
    rpc::GetAllNodeInfoRequest request;
    request.set_filter_alive(true);
    rpc::GetAllNodeInfoReply reply;
    nodes_->HandleGetAllNodeInfo(request, &reply, [](const absl::Status&) {});
    return {reply.nodes().begin(), reply.nodes().end()};
  }

  absl::Status LoadOrCreateClusterId() {
    ASSIGN_OR_RETURN(auto rows, store_->ReadAll(kClusterTable));
    for (auto& [k, v] : rows) {
      if (k != kClusterIdKey) continue;
      auto id = ClusterId::FromBinary(v);
      if (!id.ok()) return absl::DataLossError("the store holds a malformed cluster id");
      cluster_id_ = *id;
      Logger("gcs")->info("recovered cluster_id={}", cluster_id_.Hex());
      return absl::OkStatus();
    }
    cluster_id_ = ClusterId::FromRandom();
    store_->Put(kClusterTable, kClusterIdKey, cluster_id_.Binary(), [](const absl::Status& s) {
      if (!s.ok()) Logger("gcs")->error("cannot persist the cluster id: {}", s.ToString());
    });
    return absl::OkStatus();
  }

  GcsServerOptions options_;
  EventLoop* const loop_;
  ClusterId cluster_id_;
  std::string incarnation_;
  int port_ = 0;
  bool shutting_down_ = false;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Publisher> publisher_;
  std::unique_ptr<NodeManager> nodes_;
  std::unique_ptr<ResourceManager> resources_;
  std::unique_ptr<KvManager> kv_;
  std::unique_ptr<RayletClientPool> raylet_clients_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<TaskEventManager> task_events_;
  std::unique_ptr<TrainRunManager> train_runs_;
  std::unique_ptr<CoreWorkerClientPool> worker_clients_;
  std::unique_ptr<ActorScheduler> actor_scheduler_;
  std::unique_ptr<ActorManager> actors_;
  std::unique_ptr<PlacementGroupScheduler> pg_scheduler_;
  std::unique_ptr<PlacementGroupManager> pgs_;
  std::unique_ptr<GcsMetrics> metrics_;
  std::unique_ptr<GrpcHealthCheckClient> health_client_;
  std::unique_ptr<HealthCheckManager> health_;
  std::unique_ptr<EventLoop::Timer> health_timer_;
  std::unique_ptr<EventLoop::Timer> trim_timer_;
  std::unique_ptr<NodeInfoService> node_service_;
  std::unique_ptr<ResourceService> resource_service_;
  std::unique_ptr<KvService> kv_service_;
  std::unique_ptr<PubSubService> pubsub_service_;
  std::unique_ptr<ActorService> actor_service_;
  std::unique_ptr<JobService> job_service_;
  std::unique_ptr<TaskEventService> task_event_service_;
  std::unique_ptr<PlacementGroupService> pg_service_;
  std::unique_ptr<TrainRunService> train_run_service_;
  std::unique_ptr<rpc::GatedServer> server_;
  std::thread shutdown_thread_;  // drains the server, then stops the loop
};

GcsServer::GcsServer(GcsServerOptions options, EventLoop* loop)
    : impl_(std::make_unique<Impl>(std::move(options), loop)) {}
GcsServer::~GcsServer() = default;
absl::Status GcsServer::Start() { return impl_->Start(); }
void GcsServer::Shutdown() { impl_->Shutdown(); }
int GcsServer::port() const { return impl_->port_; }
int GcsServer::metrics_port() const { return impl_->metrics_ ? impl_->metrics_->port() : -1; }
std::string GcsServer::cluster_id_hex() const { return impl_->cluster_id_.Hex(); }

}  // namespace manta::gcs
