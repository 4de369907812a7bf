#include "raylet/raylet.h"

#include <unistd.h>

#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/metrics/stats_page.h"
#include "common/package_name.h"
#include "raylet/raylet_log.h"
#include "common/rpc/connection_gate.h"
#include "common/rpc/server_call.h"
#include "common/status.h"
#include "common/utf8.h"
#include "gcs/client/gcs_client.h"
#include "proto/node_manager.grpc.pb.h"
#include "raylet/bundle_manager.h"
#include "raylet/cluster_view.h"
#include "raylet/drain_state.h"
#include "raylet/gcs_link.h"
#include "raylet/lease_manager.h"
#include "raylet/local_resource_manager.h"
#include "raylet/log_forwarder.h"
#include "raylet/raylet_metrics.h"
#include "raylet/report_throttle.h"
#include "raylet/runtime_env_manager.h"
#include "raylet/worker_pool.h"

namespace manta::raylet {
namespace {

// Resource changes reach the GCS at most this often.
constexpr absl::Duration kReportInterval = absl::Milliseconds(100);
// A view told only by a bundle call's reply and not seen published (or read
// back from the GCS) is reported this much later: more than the GCS's 100 ms
// before it publishes such views plus its longest batching of poll replies
// (1 s, from 2,000 polling raylets), so that only a lost reply costs one.
constexpr absl::Duration kConfirmReplied = absl::Seconds(3);
constexpr absl::Duration kShutdownGrace = absl::Seconds(1);
// How often leases waiting for a placement group ask whether it still exists.
constexpr absl::Duration kGroupRecheckPeriod = absl::Seconds(2);
// While draining, how often the raylet checks whether it may exit.
constexpr absl::Duration kDrainCheckPeriod = absl::Milliseconds(100);
// SIGTERM with a drain grace: how long the GCS may take to accept the drain.
constexpr absl::Duration kDrainCallTimeout = absl::Seconds(2);
constexpr char kSigtermDrainReason[] = "preemption";
constexpr size_t kMaxDrainReasonBytes = 256;

}  // namespace

class Raylet::Impl : public rpc::NodeManagerService::CallbackService, public GcsLink::Host {
 public:
  Impl(RayletOptions options, EventLoop* loop)
      : options_(std::move(options)),
        loop_(loop),
        node_id_(NodeId::FromRandom()),
        local_(options_.resources.total, options_.resources.tpu ? options_.resources.tpu->chips_per_host : 0),
        view_(node_id_) {}
  ~Impl() override {
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
  }

  absl::Status Start() {
    grpc::ServerBuilder builder;
    rpc::ConfigureServerBuilder(&builder);
    std::string address = options_.node_ip + ":" + std::to_string(options_.port);
    builder.RegisterService(this);
    // Workers publish pages for the metrics in the node's stats directory.
    std::string stats_dir;
    if (options_.metrics_port >= 0 && !options_.session_dir.empty()) {
      stats_dir = metrics::NodeStatsDir(options_.session_dir, node_id_.Hex());
      if (absl::Status made = MakeDirs(stats_dir); !made.ok()) {
        Log()->warn("no stats pages: {}", made.ToString());
        stats_dir.clear();
      }
    }
    metrics_ = std::make_unique<RayletMetrics>(
        RayletMetricsOptions{.port = options_.metrics_port,
                             .host = options_.node_ip,
                             .token = options_.metrics_token,
                             .session_name = options_.session_name,
                             .is_head = options_.is_head,
                             .stats_dir = stats_dir,
                             .tpu = TpuHostOf(options_.resources, options_.node_ip)},
        loop_, [this] { return Resources(); }, [this] { return WorkerProcesses(); });
    if (metrics_->enabled()) metrics_->server_metrics()->Install(&builder);
    auto server = rpc::GatedServer::Start(&builder, address, options_.token);
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    port_ = server_->port();
    RETURN_IF_ERROR(metrics_->Start());
    gcs_ = gcs::MakeGrpcGcsClient(loop_, options_.gcs_address, options_.token);
    GcsLinkOptions link;
    link.gcs_address = options_.gcs_address;
    link.connect_timeout = options_.gcs_connect_timeout;
    link.reconnect_timeout = options_.gcs_reconnect_timeout;
    link.cluster_id = options_.cluster_id;
    link.node_id = node_id_.Binary();
    link_ = std::make_unique<GcsLink>(std::move(link), loop_, gcs_.get(), this, options_.clock);
    StartManagers();
    Log()->info("raylet serving on {}:{} node_id={} resources={}", options_.node_ip, port_, node_id_.Hex(),
                options_.resources.total.DebugString());
    link_->Start();
    return absl::OkStatus();
  }

  // --- gRPC handlers (NodeManagerService) ---
  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* ctx, const rpc::HealthCheckRequest* req,
                                        rpc::HealthCheckReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      link_->OnHealthCheck(req->gcs_incarnation());
      reply->set_node_id(node_id_.Binary());
      done(absl::OkStatus());
    });
  }

  grpc::ServerUnaryReactor* GetNodeStats(grpc::CallbackServerContext* ctx, const rpc::GetNodeStatsRequest*,
                                         rpc::GetNodeStatsReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, reply](rpc::Done done) {
      *reply->mutable_node_info() = NodeInfo();
      *reply->mutable_resources() = Resources();
      done(absl::OkStatus());
    });
  }

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* ctx, const rpc::RegisterWorkerRequest* req,
                                           rpc::RegisterWorkerReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      absl::Status s = pool_->RegisterWorker(*req);
      if (s.ok()) reply->set_node_id(node_id_.Binary());
      done(s);
    });
  }

  grpc::ServerUnaryReactor* RequestWorkerLease(grpc::CallbackServerContext* ctx,
                                               const rpc::RequestWorkerLeaseRequest* req,
                                               rpc::RequestWorkerLeaseReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      if (req->reply_with_resources()) done = WithResources(reply, std::move(done));
      leases_->HandleRequestWorkerLease(*req, reply, std::move(done));
    });
  }

  grpc::ServerUnaryReactor* ReturnWorker(grpc::CallbackServerContext* ctx, const rpc::ReturnWorkerRequest* req,
                                         rpc::ReturnWorkerReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      leases_->HandleReturnWorker(*req, reply, std::move(done));
    });
  }

  grpc::ServerUnaryReactor* CancelWorkerLease(grpc::CallbackServerContext* ctx,
                                              const rpc::CancelWorkerLeaseRequest* req,
                                              rpc::CancelWorkerLeaseReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      leases_->HandleCancelWorkerLease(*req, reply, std::move(done));
    });
  }

  grpc::ServerUnaryReactor* KillJobWorkers(grpc::CallbackServerContext* ctx, const rpc::KillJobWorkersRequest* req,
                                           rpc::KillJobWorkersReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      auto job = JobId::FromBinary(req->job_id());
      leases_->HandleKillJobWorkers(*req, reply, std::move(done));
      if (job.ok()) envs_->OnJobFinished(*job);
    });
  }

  grpc::ServerUnaryReactor* FlushJobLogs(grpc::CallbackServerContext* ctx, const rpc::FlushJobLogsRequest* req,
                                         rpc::FlushJobLogsReply*) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req](rpc::Done done) {
      auto job = JobId::FromBinary(req->job_id());
      if (!job.ok()) return done(absl::InvalidArgumentError("job_id: " + std::string(job.status().message())));
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      logs_->FlushJob(*job, [done = std::move(done)] { done(absl::OkStatus()); });
    });
  }

  // Placement-group bundles. Each reply carries this node's resources after
  // the call, under a fresh version, so the GCS can apply them at once.
  grpc::ServerUnaryReactor* PrepareBundles(grpc::CallbackServerContext* ctx, const rpc::PrepareBundlesRequest* req,
                                           rpc::PrepareBundlesReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      bundles_->HandlePrepareBundles(*req, reply, WithResources(reply, std::move(done)));
    });
  }

  grpc::ServerUnaryReactor* CommitBundles(grpc::CallbackServerContext* ctx, const rpc::CommitBundlesRequest* req,
                                          rpc::CommitBundlesReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      bundles_->HandleCommitBundles(*req, reply, WithResources(reply, std::move(done)));
    });
  }

  grpc::ServerUnaryReactor* CancelBundles(grpc::CallbackServerContext* ctx, const rpc::CancelBundlesRequest* req,
                                          rpc::CancelBundlesReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      bundles_->HandleCancelBundles(*req, reply, WithResources(reply, std::move(done)));
    });
  }

  grpc::ServerUnaryReactor* ReleaseUnusedBundles(grpc::CallbackServerContext* ctx,
                                                 const rpc::ReleaseUnusedBundlesRequest* req,
                                                 rpc::ReleaseUnusedBundlesReply* reply) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req, reply](rpc::Done done) {
      if (shutting_down_) return done(absl::UnavailableError("the raylet is stopping"));
      bundles_->HandleReleaseUnusedBundles(*req, reply, WithResources(reply, std::move(done)));
    });
  }

  // From the GCS: this node drains. Idempotent (the deadline only moves
  // earlier). InvalidArgument, changing nothing, for an empty, too long or
  // non-UTF-8 reason or a negative deadline.
  grpc::ServerUnaryReactor* DrainRaylet(grpc::CallbackServerContext* ctx, const rpc::DrainRayletRequest* req,
                                        rpc::DrainRayletReply*) override {
    return rpc::Dispatch(ctx, loop_, options_.token, [this, req](rpc::Done done) {
      const std::string& reason = req->reason();
      if (reason.empty() || reason.size() > kMaxDrainReasonBytes || ValidUtf8(reason) != reason) {
        return done(absl::InvalidArgumentError("reason must be 1 to 256 bytes of UTF-8"));
      }
      if (req->deadline_ms() < 0) return done(absl::InvalidArgumentError("deadline_ms is negative"));
      std::string why = reason;
      int64_t deadline = req->deadline_ms();
      done(absl::OkStatus());  // `req` is gone from here on
      StartDrain(why, deadline);
    });
  }

  // `done`, after filling `reply`'s view of this node: under a new version,
  // which then counts as told, when it changed since the GCS last heard;
  // otherwise as the GCS holds it (ignored there). Filled at completion
  // through `reply`: a handler may replace the whole reply before then.
  template <typename Reply>
  rpc::Done WithResources(Reply* reply, rpc::Done done) {
    return [this, reply, done = std::move(done)](const absl::Status& s) {
      const bool fresh = !told_.Current();
      if (fresh) ++resource_version_;
      *reply->mutable_resources() = Resources();
      // A failed call's reply carries no view to the GCS.
      if (s.ok() && fresh) told_.Replied(resource_version_);
      done(s);
    };
  }

  // --- managers ---
  void StartManagers() {
    std::string address = options_.node_ip + ":" + std::to_string(port_);
    WorkerPoolOptions popts;
    popts.node_id = node_id_;
    popts.node_ip = options_.node_ip;
    popts.raylet_address = address;
    popts.gcs_address = options_.gcs_address;
    popts.token_file = options_.token.empty() ? "" : options_.token_file;
    popts.token = options_.token;
    popts.session_dir = options_.session_dir;
    popts.stats_dir = metrics_ ? metrics_->stats_dir() : "";
    popts.max_workers = options_.max_workers;
    popts.idle_timeout = options_.idle_worker_timeout;
    popts.start_timeout = options_.worker_start_timeout;
    StartRuntimeEnvs();
    popts.job_envs = envs_.get();
    pool_ = std::make_unique<WorkerPool>(popts, loop_);
    leases_ = std::make_unique<LeaseManager>(LeaseManagerOptions{node_id_, options_.node_ip, options_.resources.labels},
                                             &local_, &view_, pool_.get());
    bundles_ = std::make_unique<BundleManager>(BundleManagerOptions{node_id_, options_.resources.labels}, &local_,
                                               leases_.get());
    logs_ = std::make_unique<LogForwarder>(LogForwarderOptions{.node_ip = options_.node_ip}, loop_,
                                           [this](rpc::LogBatch batch, std::function<void()> answered) {
                                             PublishLogs(std::move(batch), std::move(answered));
                                           });
    reports_ = std::make_unique<ReportThrottle>(
        loop_, kReportInterval, [this](std::function<void()> done) { link_->SendReport(std::move(done)); });
    local_.SetChangeListener([this] {
      told_.Changed();
      RequestReportSoon();
    });
    leases_->SetDemandsListener([this] { reports_->Request(); });
    leases_->SetGrantListener([this](const rpc::TaskSpec& spec, const LeasedWorker& worker) {
      if (spec.type() != rpc::TaskSpec::ACTOR_CREATION_TASK) {
        worker_names_[worker.worker_id] = {spec.function_name(), false};
        return;
      }
      std::string name = spec.actor_creation().class_name();
      if (name.empty()) name = spec.function_name().substr(0, spec.function_name().find("::"));
      logs_->SetName(worker.worker_id, name);
      worker_names_[worker.worker_id] = {name, true};
    });
    leases_->SetGroupCheck([this](const PlacementGroupId& group, std::function<void(bool)> answer) {
      rpc::GetPlacementGroupRequest req;
      req.set_placement_group_id(group.Binary());
      gcs_->GetPlacementGroup(req, [answer](const absl::Status& s, rpc::GetPlacementGroupReply&& reply) {
        if (s.code() == absl::StatusCode::kNotFound) return answer(false);
        // An unreachable GCS counts as "exists": the lease waits and asks again.
        answer(!s.ok() || reply.placement_group().state() != rpc::PlacementGroupInfo::REMOVED);
      });
    });
    group_check_timer_ = loop_->RunEvery(kGroupRecheckPeriod, [this] { leases_->RecheckGroups(); });
    pool_->SetLogListener([this](const WorkerLogFiles& files) { logs_->AddWorker(files); });
    pool_->SetExitListener([this](const WorkerExit& exit) { OnWorkerExit(exit); });
  }

  // The jobs' runtime envs, read from the GCS: the job's record and its
  // package in the KV.
  void StartRuntimeEnvs() {
    RuntimeEnvManagerOptions options;
    const std::string session = options_.session_dir.empty() ? "/tmp/manta" : options_.session_dir;
    options.root = session + "/runtime_resources/nodes/" + node_id_.Hex();
    auto get_job_env = [this](const JobId& job, std::function<void(absl::StatusOr<rpc::RuntimeEnv>)> cb) {
      rpc::GetAllJobInfoRequest req;
      req.set_job_id(job.Binary());
      gcs_->GetAllJobInfo(req, [cb = std::move(cb)](const absl::Status& s, rpc::GetAllJobInfoReply&& reply) {
        if (!s.ok()) return cb(s);
        if (reply.jobs_size() == 0) return cb(absl::NotFoundError("no such job"));
        cb(reply.jobs(0).runtime_env());
      });
    };
    auto get_package = [this](const std::string& name, std::function<void(absl::StatusOr<std::string>)> cb) {
      rpc::KvGetRequest req;
      req.set_ns(kPackageKvNamespace);
      req.set_key(name);
      gcs_->KvGet(req, [cb = std::move(cb)](const absl::Status& s, rpc::KvGetReply&& reply) {
        if (!s.ok()) return cb(s);
        if (!reply.found()) return cb(absl::NotFoundError("it was never uploaded"));
        cb(std::move(*reply.mutable_value()));
      });
    };
    envs_ =
        std::make_unique<RuntimeEnvManager>(std::move(options), loop_, std::move(get_job_env), std::move(get_package),
                                            [this](const JobId& job) { return pool_ && pool_->HasWorkersOf(job); });
  }

  // The live workers and what each runs, for the metrics.
  std::vector<WorkerProcess> WorkerProcesses() const {
    std::vector<WorkerProcess> out;
    if (!pool_) return out;
    pool_->ForEachProcess([&](const WorkerId& id, int pid, bool leased) {
      auto it = worker_names_.find(id);
      // An actor's process is its class's for life; a task worker is its
      // function's while leased.
      const bool named = it != worker_names_.end() && (leased || it->second.actor);
      out.push_back({id, pid, "ray::" + (named ? it->second.name : std::string("IDLE"))});
    });
    return out;
  }

  void OnWorkerExit(const WorkerExit& exit) {
    auto named = worker_names_.find(exit.worker_id);
    // A worker never leased (idle, prestarted) was no caller of a lease.
    const bool leased_once = named != worker_names_.end();
    const WorkerName name = leased_once ? named->second : WorkerName{};
    if (leased_once) worker_names_.erase(named);
    // "killed by signal 9 (Killed)", not sent by the pool.
    const bool sigkill = !exit.intentional && exit.detail.rfind("killed by signal 9 ", 0) == 0;
    if (metrics_) metrics_->OnWorkerExit(exit.worker_id, sigkill, name.name, name.actor);
    logs_->RemoveWorker(exit.worker_id);
    // What it leased here as a caller ends first, so that what its own
    // lease frees is not granted to one of them; elsewhere, once published.
    const bool ended = leased_once && leases_->EndLeasesOfCaller(exit.worker_id);
    const bool held_lease = leases_->OnWorkerExit(exit.worker_id);  // schedules if it held one
    if (ended && !held_lease) leases_->OnLocalResourcesChanged();
    // Reported if ever leased: it may own tasks still, even idle.
    if (!leased_once || shutting_down_ || !link_->registered()) return;
    rpc::ReportWorkerFailureRequest req;
    req.set_worker_id(exit.worker_id.Binary());
    req.set_node_id(node_id_.Binary());
    req.set_pid(exit.pid);
    req.set_exit_detail(exit.detail);
    req.set_intentional(exit.intentional);
    req.set_held_no_lease(!held_lease);
    gcs_->ReportWorkerFailure(req, [id = exit.worker_id](const absl::Status& s, rpc::ReportWorkerFailureReply&&) {
      if (!s.ok()) Log()->warn("cannot report the exit of worker_id={}: {}", id.Hex(), s.ToString());
    });
  }

  void PublishLogs(rpc::LogBatch batch, std::function<void()> answered) {
    if (shutting_down_) return answered();
    rpc::PublishLogsRequest req;
    *req.mutable_batch() = std::move(batch);
    gcs_->PublishLogs(req, [this, answered = std::move(answered)](const absl::Status& s, rpc::PublishLogsReply&&) {
      answered();
      if (s.ok()) {
        logs_failing_ = false;
      } else if (!logs_failing_) {
        logs_failing_ = true;
        Log()->warn("cannot forward worker output to the GCS: {}", s.ToString());
      }
    });
  }

  // --- lifecycle ---
  void Shutdown(int exit_code, const std::string& why) {
    if (shutting_down_) return;
    shutting_down_ = true;
    exit_code_ = exit_code;
    if (rejoin_) {
      Log()->warn("raylet rejoining as a new node: {}", why);
    } else {
      (exit_code == 0 ? Log()->info("raylet stopping: {}", why) : Log()->error("raylet exiting: {}", why));
      if (exit_code != 0) std::fprintf(stderr, "raylet: error: %s\n", why.c_str());
    }
    if (link_) link_->Stop();
    if (metrics_) metrics_->Stop();
    group_check_timer_.reset();
    drain_timer_.reset();
    // Workers go first: none may outlive the raylet.
    if (!pool_) return FinishShutdown(exit_code, why);
    // The server's shutdown waits for every call: none may stay held.
    leases_->CancelAll("the raylet is stopping");
    pool_->KillAll(kShutdownGrace, [this, exit_code, why] { FinishShutdown(exit_code, why); });
  }

  // --- draining ---
  // Starts or updates the drain; the raylet exits once idle or at the
  // deadline (checked now and every kDrainCheckPeriod).
  void StartDrain(const std::string& reason, int64_t deadline_ms) {
    if (shutting_down_) return;
    bool started = drain_.Start(reason, deadline_ms);
    leases_->StartDraining(reason);
    if (started) {
      Log()->info("draining node_id={} reason={} deadline_ms={}", node_id_.Hex(), reason, drain_.deadline_ms());
      drain_timer_ = loop_->RunEvery(kDrainCheckPeriod, [this] { CheckDrain(); });
    }
    CheckDrain();
  }

  void CheckDrain() {
    if (shutting_down_ || !drain_.draining()) return;
    NodeLoad load{leases_->num_granted(), local_.bundles().size()};
    switch (drain_.Decide(absl::ToUnixMillis(options_.clock()), load)) {
      case DrainState::Action::kStay:
        return;
      case DrainState::Action::kIdle:
        return Shutdown(0, "drained: " + drain_.reason());
      case DrainState::Action::kDeadline:
        Log()->warn("drain deadline reached with {} leased workers and {} bundles: stopping them", load.leased_workers,
                    load.bundles);
        return Shutdown(0, "drained: " + drain_.reason() + " (deadline reached)");
    }
  }

  void OnSigterm() {
    if (shutting_down_) return;
    if (options_.drain_grace <= absl::ZeroDuration() || drain_.draining() || sigterm_drain_) {
      return Shutdown(0, "SIGTERM");
    }
    sigterm_drain_ = true;
    const int64_t deadline = absl::ToUnixMillis(options_.clock()) + absl::ToInt64Milliseconds(options_.drain_grace);
    Log()->info("SIGTERM: draining within {} (a second SIGTERM, or SIGINT, stops at once)",
                absl::FormatDuration(options_.drain_grace));
    leases_->StartDraining(kSigtermDrainReason);  // no new work while the GCS is asked
    if (!link_->registered()) return StartDrain(kSigtermDrainReason, deadline);
    rpc::DrainNodeRequest req;
    req.set_node_id(node_id_.Binary());
    req.set_reason(kSigtermDrainReason);
    req.set_deadline_ms(deadline);
    gcs_->DrainNode(req, kDrainCallTimeout, [this, deadline](const absl::Status& s, rpc::DrainNodeReply&& reply) {
      if (shutting_down_) return;
      if (!s.ok()) {
        Log()->warn("cannot ask the GCS to drain this node ({}); draining locally", s.ToString());
      } else if (!reply.accepted()) {
        return Shutdown(0, "SIGTERM (the GCS refused the drain: " + reply.rejection_reason() + ")");
      }
      StartDrain(kSigtermDrainReason, deadline);
    });
  }

  void FinishShutdown(int exit_code, const std::string& why) {
    auto finish = [this] {
      shutdown_thread_ = std::thread([this] {
        if (server_) server_->Shutdown(absl::Seconds(1));
        loop_->Stop();
      });
    };
    if (!link_ || !link_->registered() || exit_code != 0 || rejoin_) return finish();
    rpc::UnregisterNodeRequest req;
    req.set_node_id(node_id_.Binary());
    req.set_reason(why);
    gcs_->UnregisterNode(req, absl::Seconds(2), [finish](const absl::Status& s, rpc::UnregisterNodeReply&&) {
      if (!s.ok()) Log()->warn("unregister failed: {}", s.ToString());
      finish();
    });
  }

  // --- GcsLink::Host ---
  rpc::NodeInfo NodeInfo() const override {
    rpc::NodeInfo info;
    info.set_node_id(node_id_.Binary());
    info.set_node_ip(options_.node_ip);
    info.set_node_manager_port(port_);
    info.set_node_name(options_.node_name.empty() ? options_.node_ip : options_.node_name);
    info.set_is_head(options_.is_head);
    info.set_pid(getpid());
    info.set_metrics_export_port(metrics_ ? metrics_->port() : 0);
    for (const auto& [k, v] : options_.resources.total.ToMap()) (*info.mutable_resources_total())[k] = v;
    for (const auto& [k, v] : options_.resources.labels) (*info.mutable_labels())[k] = v;
    if (drain_.draining()) {
      info.set_draining(true);
      info.set_drain_reason(drain_.reason());
      info.set_drain_deadline_ms(drain_.deadline_ms());
    }
    return info;
  }

  rpc::NodeResources Resources() const {
    rpc::NodeResources r;
    r.set_node_id(node_id_.Binary());
    r.set_version(resource_version_);
    for (const auto& [k, v] : local_.total().ToMap()) (*r.mutable_total())[k] = v;
    for (const auto& [k, v] : local_.available().ToMap()) (*r.mutable_available())[k] = v;
    return r;
  }

  void WriteReadyFile() {
    if (options_.ready_file.empty()) return;
    std::string json = "{\"node_id\": \"" + node_id_.Hex() + "\", \"port\": " + std::to_string(port_) +
                       ", \"pid\": " + std::to_string(getpid()) + "}\n";
    if (auto s = WriteFileAtomic(options_.ready_file, json); !s.ok()) {
      Shutdown(1, "cannot write the ready file: " + std::string(s.message()));
    }
  }

  std::optional<rpc::ReportResourcesRequest> Report() override {
    std::vector<rpc::ResourceDemand> demands = leases_->Demands();
    if (told_.Redundant(!demands.empty())) {
      // Told by a bundle call's reply: reported after all if its view is
      // not seen published in a while (the reply may have been lost).
      if (told_.unconfirmed() && !confirm_timer_) {
        confirm_timer_ = loop_->RunAfter(kConfirmReplied, [this] {
          confirm_timer_.reset();
          if (!told_.unconfirmed()) return;
          told_.Forget();
          reports_->Request();
        });
      }
      return std::nullopt;
    }
    rpc::ReportResourcesRequest req;
    ++resource_version_;
    *req.mutable_resources() = Resources();
    told_.Reported(!demands.empty());
    for (auto& d : demands) *req.add_demands() = std::move(d);
    return req;
  }

  void OnRegistered(bool first) override {
    told_.Forget();
    reports_->Request();
    if (first) WriteReadyFile();
  }

  void RequestReport() override {
    told_.Forget();  // a report failed
    reports_->Request();
  }

  // A change's report is requested on the loop's next turn, after the call
  // that made the change has answered: a bundle call's reply has then told
  // the GCS the new view, and the report is skipped (ToldView).
  void RequestReportSoon() {
    if (report_posted_) return;
    report_posted_ = true;
    loop_->Post([this] {
      report_posted_ = false;
      reports_->Request();
    });
  }
  bool OnNodeResources(const rpc::NodeResources& r) override {
    if (r.node_id() == node_id_.Binary()) {
      told_.Published(r.version());
      if (!told_.unconfirmed()) confirm_timer_.reset();
    }
    return view_.OnNodeResources(r);
  }

  void OnNodesReset() override {
    alive_nodes_.clear();
    view_.Reset();
  }

  void OnClusterChanged() override { leases_->OnClusterChanged(); }
  void Exit(const std::string& why) override { Shutdown(1, why); }

  // Declared dead while alive: start over as a new node, unless draining or
  // told not to.
  void Rejoin(const std::string& why) override {
    if (drain_.draining() || !options_.rejoin_when_dead) return Shutdown(1, why);
    StartOver(why);
  }

  // Returns whether the cluster view changed.
  bool OnNodeInfo(const rpc::NodeInfo& info) override {
    auto id = NodeId::FromBinary(info.node_id());
    if (!id.ok()) return false;
    bool changed = view_.OnNodeInfo(info);
    if (info.state() == rpc::NodeInfo::DEAD) {
      alive_nodes_.erase(*id);
      if (*id == node_id_ && !shutting_down_) OnDeclaredDead(info);
      // Its workers died with it, unreported. (Scheduled by the caller of
      // OnNodeInfo, once the view is whole.)
      if (*id != node_id_) changed |= leases_->EndLeasesOfCallerNode(*id);
    } else {
      alive_nodes_[*id] = info;
      if (*id == node_id_ && info.draining()) {
        // Also learned this way when DrainRaylet did not get through. Posted:
        // the drain may end the raylet, and the poll is still being handled.
        loop_->Post([this, reason = info.drain_reason(), deadline = info.drain_deadline_ms()] {
          StartDrain(reason.empty() ? "drained" : reason, deadline);
        });
      }
    }
    return changed;
  }

  bool OnWorkerDeath(const rpc::WorkerDeath& death) override {
    auto id = WorkerId::FromBinary(death.worker_id());
    return id.ok() && leases_->EndLeasesOfCaller(*id);
  }

  // --- declared dead while alive ---
  // The GCS published this node as DEAD. An expected death (drained,
  // unregistered) or a draining node ends the raylet as before; any other
  // death (the GCS lost contact with it) makes it rejoin as a new node.
  void OnDeclaredDead(const rpc::NodeInfo& info) {
    std::string why = "the GCS marked this node dead: " + info.death_reason();
    if (info.death_expected()) return Shutdown(1, why);
    Rejoin(why);
  }

  // Stops every worker (the cluster has replaced them) and the server
  // without unregistering; main then starts this raylet over as a new node.
  void StartOver(const std::string& why) {
    if (shutting_down_) return;
    rejoin_ = true;
    Shutdown(1, why + "; stopping every worker and rejoining as a new node");
  }

  const RayletOptions options_;
  EventLoop* const loop_;
  const NodeId node_id_;
  int port_ = 0;
  int exit_code_ = 0;
  std::unique_ptr<rpc::GatedServer> server_;
  std::unique_ptr<RayletMetrics> metrics_;
  std::unique_ptr<gcs::GcsClient> gcs_;
  std::unique_ptr<GcsLink> link_;
  std::thread shutdown_thread_;  // drains the server, then stops the loop

  bool shutting_down_ = false;
  bool rejoin_ = false;  // shutting down to rejoin as a new node
  int64_t resource_version_ = 0;
  std::unique_ptr<EventLoop::Timer> group_check_timer_;

  // Draining.
  DrainState drain_;
  bool sigterm_drain_ = false;  // SIGTERM asked for a drain: the next one stops
  std::unique_ptr<EventLoop::Timer> drain_timer_;

  // Node events.
  absl::flat_hash_map<NodeId, rpc::NodeInfo> alive_nodes_;

  // Leasing. Created in Start(); the pool before the leases that use it.
  LocalResourceManager local_;
  ClusterView view_;
  // Destroyed after the pool (whose workers run in its directories).
  std::unique_ptr<RuntimeEnvManager> envs_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseManager> leases_;
  std::unique_ptr<BundleManager> bundles_;
  std::unique_ptr<LogForwarder> logs_;
  std::unique_ptr<ReportThrottle> reports_;
  ToldView told_;               // loop thread
  bool report_posted_ = false;  // a RequestReportSoon is on its way
  std::unique_ptr<EventLoop::Timer> confirm_timer_;
  bool logs_failing_ = false;
  // What each worker was last granted for: an actor's class, or a function.
  // A worker without an entry was never leased, so it asked for no lease
  // (its exit ends none and is not reported).
  struct WorkerName {
    std::string name;
    bool actor = false;
  };
  absl::flat_hash_map<WorkerId, WorkerName> worker_names_;
};

Raylet::Raylet(RayletOptions options, EventLoop* loop) : impl_(std::make_unique<Impl>(std::move(options), loop)) {}
Raylet::~Raylet() = default;
absl::Status Raylet::Start() {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  return impl_->Start();
}
void Raylet::Shutdown(int exit_code, const std::string& why) {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  impl_->Shutdown(exit_code, why);
}
void Raylet::OnSigterm() {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  impl_->OnSigterm();
}
int Raylet::exit_code() const {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  return impl_->exit_code_;
}
bool Raylet::rejoin_requested() const {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  return impl_->rejoin_;
}
std::string Raylet::cluster_id_hex() const {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  return ToHex(impl_->link_ ? impl_->link_->cluster_id() : impl_->options_.cluster_id);
}
std::string Raylet::node_id_hex() const { return impl_->node_id_.Hex(); }
int Raylet::port() const {
  MANTA_CHECK_THREAD(impl_->loop_->thread_checker());
  return impl_->port_;
}

}  // namespace manta::raylet
