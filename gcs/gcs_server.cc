#include "gcs/gcs_server.h"

#include <thread>

#include "common/check.h"
#include "common/id.h"
#include "common/logging.h"
#include "common/memory_release.h"
#include "common/rpc/client_call.h"
#include "common/rpc/connection_gate.h"
#include "common/status.h"
#include "common/version.h"
#include "gcs/actor_manager.h"
#include "gcs/actor_scheduler.h"
#include "gcs/core_worker_client.h"
#include "gcs/gcs_service_adapters.h"
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

rpc::ErrorInfo Error(rpc::ErrorInfo::Type type, const std::string& message) {
  rpc::ErrorInfo e;
  e.set_type(type);
  e.set_message(message);
  return e;
}

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

// The id of a node table entry. NodeManager admits only entries whose
// node_id parses (on registration, and on recovery only rows whose node_id
// matches their key), so a malformed one here is a bug.
NodeId TableNodeId(const rpc::NodeInfo& info) {
  auto id = NodeId::FromBinary(info.node_id());
  CHECK(id.ok()) << "the node table holds a malformed node_id: " << id.status();
  return *id;
}

// The id of a job table entry; JobManager admits them as NodeManager does.
JobId TableJobId(const rpc::JobInfo& info) {
  auto id = JobId::FromBinary(info.job_id());
  CHECK(id.ok()) << "the job table holds a malformed job_id: " << id.status();
  return *id;
}

}  // namespace

class GcsServer::Impl {
 public:
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
    // A raylet that a call cannot reach is checked at once, as one whose
    // stream dropped: a killed host is declared dead in a few hundred ms even
    // when it held no stream (a removal or lease waiting on it goes on
    // then). One that answers is alive.
    raylet_clients_ = MakeGrpcRayletClientPool(
        loop_, options_.token,
        [this](const NodeId& node) {
          if (health_ != nullptr) health_->Suspect(node);
        },
        [this](const NodeId& node) {
          if (health_ != nullptr && !shutting_down_) health_->Alive(node);
        });
    nodes_ =
        std::make_unique<NodeManager>(store_.get(), publisher_.get(), cluster_id_, incarnation_, raylet_clients_.get());
    auto run_after = [this](absl::Duration delay, std::function<void()> fn) {
      return loop_->RunAfter(delay, std::move(fn));
    };
    resources_ = std::make_unique<ResourceManager>(nodes_.get(), publisher_.get(), run_after);
    kv_ = std::make_unique<KvManager>(store_.get());
    jobs_ = std::make_unique<JobManager>(
        store_.get(), publisher_.get(), raylet_clients_.get(), [this] { return AliveNodes(); }, run_after);
    task_events_ = std::make_unique<TaskEventManager>(publisher_.get());
    train_runs_ = std::make_unique<TrainRunManager>(store_.get(), jobs_.get());
    worker_clients_ = MakeGrpcCoreWorkerClientPool(loop_, options_.token);
    jobs_->SetDriverProbe([this](const rpc::Address& driver, std::function<void(bool)> answer) {
      // Gone: nothing listens at its address (refused, after the pool's
      // retries), or another worker does. A timeout says nothing.
      if (driver.ip().empty() || driver.port() <= 0 || driver.worker_id().empty()) return answer(false);
      worker_clients_->CheckWorker(driver,
                                   [this, driver, answer](const absl::Status& s, rpc::CheckWorkerReply&& reply) {
                                     bool gone = s.ok() ? !reply.same() : absl::IsUnavailable(s);
                                     if (gone) worker_clients_->Forget(driver.worker_id());
                                     answer(gone);
                                   });
    });
    actor_scheduler_ = std::make_unique<ActorScheduler>([this](const NodeId& node) { return resources_->Get(node); },
                                                        raylet_clients_.get(), worker_clients_.get(), run_after);
    actors_ = std::make_unique<ActorManager>(store_.get(), publisher_.get(), actor_scheduler_.get(),
                                             raylet_clients_.get(), worker_clients_.get(), jobs_.get());
    actors_->SetTaskEventSink([this](const rpc::TaskEvent& e) { task_events_->Record(e); });
    // What ran on a process, node or driver that is gone ends as FAILED in
    // the task table (no event of its end will come).
    actors_->SetStoppedSink([this](const ActorId& actor, const rpc::ErrorInfo& error) {
      task_events_->FailUnfinished(
          [&](const rpc::TaskEvent& t) {
            return t.type() == rpc::TaskSpec::ACTOR_TASK && t.actor_id() == actor.Binary();
          },
          error);
    });
    // A raylet's view in its reply: one with a malformed node_id is not applied.
    auto apply_view = [this](const rpc::NodeResources& r) {
      auto node = NodeId::FromBinary(r.node_id());
      if (!node.ok()) {
        Logger("gcs")->warn("ignoring a raylet's resource view: {}", node.status().ToString());
        return;
      }
      if (resources_->Apply(r)) OnResourcesChanged(*node);
    };
    actor_scheduler_->SetApplyResources(apply_view);
    pg_scheduler_ = std::make_unique<PlacementGroupScheduler>(
        [this](const NodeId& node) { return resources_->Get(node); }, apply_view, raylet_clients_.get());
    pgs_ = std::make_unique<PlacementGroupManager>(store_.get(), publisher_.get(), pg_scheduler_.get(),
                                                   raylet_clients_.get(), run_after);
    pgs_->SetRemovedListener([this](const std::string& id) { actors_->OnPlacementGroupRemoved(id); });
    jobs_->AddJobFinishedListener([this](const rpc::JobInfo& job) {
      task_events_->FailUnfinished(
          [&](const rpc::TaskEvent& t) {
            return t.job_id() == job.job_id() && t.type() != rpc::TaskSpec::ACTOR_CREATION_TASK;
          },
          Error(rpc::ErrorInfo::WORKER_DIED, "the job finished before the task did"));
      actors_->OnJobFinished(job);
      pgs_->OnJobFinished(job.job_id());
      train_runs_->OnJobFinished(TableJobId(job));
    });
    metrics_ =
        std::make_unique<GcsMetrics>(options_.metrics, loop_,
                                     GcsMetrics::Tables{nodes_.get(), actors_.get(), pgs_.get(), task_events_.get(),
                                                        train_runs_.get(), kv_.get(), resources_.get()});
    kv_->SetChangeListener([this](const std::string& ns) {
      if (ns == kMetricsKvNamespace) metrics_->OnTargetsChanged();
    });
  }

  // What each manager does when a node joins, drains or dies.
  void ListenToNodes() {
    health_client_ = std::make_unique<GrpcHealthCheckClient>(loop_, options_.token, incarnation_);
    health_ = std::make_unique<HealthCheckManager>(
        health_client_.get(), options_.health_check, [this](const NodeId& node, const std::string& reason) {
          nodes_->MarkNodeDead(node, "NodeTerminated: " + reason, /*expected=*/false);
        });
    nodes_->AddNodeAddedListener([this](const rpc::NodeInfo& info) {
      const NodeId node = TableNodeId(info);
      resources_->OnNodeAdded(info);
      actor_scheduler_->OnNodeAdded(info);
      pgs_->OnNodeAdded(info);
      health_->AddNode(node, RayletAddress(info));
      metrics_->OnTargetsChanged();
    });
    // A draining node takes no new actors or bundles.
    nodes_->AddNodeDrainingListener([this](const rpc::NodeInfo& info) {
      actor_scheduler_->OnNodeDraining(info);
      pg_scheduler_->OnNodeDraining(info);
    });
    nodes_->AddNodeDeadListener([this](const rpc::NodeInfo& info) {
      const NodeId node = TableNodeId(info);
      resources_->OnNodeDead(info);
      health_->RemoveNode(node);
      raylet_clients_->Forget(node);
      // The scheduler first: attempts on the node end before actors restart.
      actor_scheduler_->OnNodeDead(node);
      pg_scheduler_->OnNodeDead(node);
      pgs_->OnNodeDead(node);
      actors_->OnNodeDead(info);
      task_events_->FailUnfinished(
          [&](const rpc::TaskEvent& t) { return t.node_id() == info.node_id() && !t.node_id().empty(); },
          Error(rpc::ErrorInfo::NODE_DIED, "the node running it died"));
      metrics_->OnTargetsChanged();
    });
  }

  // Recovers every table from the store.
  absl::Status InitializeTables() {
    // Groups first: recovered nodes are synced against them as they are added.
    RETURN_IF_ERROR(pgs_->Initialize());
    RETURN_IF_ERROR(nodes_->Initialize());
    RETURN_IF_ERROR(kv_->Initialize());
    // Drivers of another version read this and refuse to join.
    kv_->Put(kClusterKvNamespace, kVersionKey, kVersion, [](const absl::Status&) {});
    RETURN_IF_ERROR(jobs_->Initialize());
    RETURN_IF_ERROR(train_runs_->Initialize());
    // A run whose job ended while the GCS was down missed OnJobFinished.
    train_runs_->AbortRunsOfFinishedJobs();
    return actors_->Initialize();
  }

  // The gRPC services behind the token gate, and the timers.
  absl::Status Serve() {
    services_ = std::make_unique<GcsServices>(ServiceContext());
    grpc::ServerBuilder builder;
    rpc::ConfigureServerBuilder(&builder);
    std::string address = options_.bind_address + ":" + std::to_string(options_.port);
    services_->RegisterWith(&builder);
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

  // What the gRPC services reach: the loop, the token and the managers.
  GcsServiceContext ServiceContext() {
    GcsServiceContext c;
    c.loop = loop_;
    c.token = options_.token;
    c.nodes = nodes_.get();
    c.resources = resources_.get();
    c.kv = kv_.get();
    c.publisher = publisher_.get();
    c.actors = actors_.get();
    c.actor_scheduler = actor_scheduler_.get();
    c.jobs = jobs_.get();
    c.task_events = task_events_.get();
    c.pgs = pgs_.get();
    c.train_runs = train_runs_.get();
    c.health = health_.get();
    c.on_resources_changed = [this](const NodeId& node) { OnResourcesChanged(node); };
    c.shutting_down = [this] { return shutting_down_; };
    return c;
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
  std::unique_ptr<GcsServices> services_;
  std::thread shutdown_thread_;  // drains the server, then stops the loop; joined in ~Impl
  // Declared last, so destroyed first. gRPC requires a server's services to
  // outlive it, and ~GatedServer shuts the server down, which waits for the
  // calls in flight: their reactors (OnCancel, OnDone) still reach the
  // services, the managers and the loop, so all of those must exist then.
  std::unique_ptr<rpc::GatedServer> server_;
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
