#include "runtime/core_worker/core_worker_impl.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <future>

#include "absl/strings/match.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/package_name.h"
#include "common/rpc/reply_cache.h"
#include "common/rpc/client_call.h"
#include "common/rpc/grpc_util.h"
#include "common/status.h"
#include "common/token.h"
#include "runtime/core_worker/gcs_cluster_state.h"
#include "runtime/core_worker/log_printer.h"
#include "runtime/core_worker/peers.h"
#include "runtime/core_worker/real_core_worker.h"
#include "runtime/core_worker/runtime_env.h"
#include "runtime/core_worker/task_receiver.h"

namespace manta::core {
namespace {

// Each call to the GCS's deadline (a held poll's comes on top of its wait).
constexpr absl::Duration kGcsCallTimeout = absl::Seconds(10);

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

LogPrinter& Printer() {
  static LogPrinter* printer = new LogPrinter();
  return *printer;
}

}  // namespace

// ---------------------------------------------------------------- factory

RealCoreWorkerFactory::RealCoreWorkerFactory() = default;
RealCoreWorkerFactory::~RealCoreWorkerFactory() = default;

void RealCoreWorkerFactory::InstallClusterState(CoreWorkerImpl* cw) {
  cluster_state_ = std::make_unique<GcsClusterState>(&cw->gcs_sync(), cw, GcsReconnectTimeout());
  SetCurrentClusterState(cluster_state_.get());
}

absl::StatusOr<CoreWorker*> RealCoreWorkerFactory::InitDriver(const CoreWorkerOptions& options) {
  auto cw = std::make_unique<CoreWorkerImpl>(options, /*is_worker=*/false);
  if (auto s = cw->Start(); !s.ok()) {
    cw->Stop();
    return s;
  }
  InstallClusterState(cw.get());
  return cw.release();
}

absl::Status RealCoreWorkerFactory::RunWorker(const CoreWorkerOptions& given) {
  // Die with the raylet that started us: a killed raylet leaves no workers.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string raylet_pid = Env("MANTA_RAYLET_PID");
  if (!raylet_pid.empty() && std::to_string(getppid()) != raylet_pid) std::_Exit(1);
  // The raylet that started this worker says where everything is.
  CoreWorkerOptions options = given;
  if (!Env("MANTA_GCS_ADDRESS").empty()) options.gcs_address = Env("MANTA_GCS_ADDRESS");
  if (!Env("MANTA_RAYLET_ADDRESS").empty()) options.raylet_address = Env("MANTA_RAYLET_ADDRESS");
  if (!Env("MANTA_NODE_IP").empty()) options.node_ip = Env("MANTA_NODE_IP");
  if (!Env("MANTA_SESSION_DIR").empty()) options.session_dir = Env("MANTA_SESSION_DIR");
  if (!Env("MANTA_TOKEN").empty()) {
    options.token = Env("MANTA_TOKEN");
  } else if (!Env("MANTA_TOKEN_FILE").empty()) {
    auto token = ReadTokenFile(Env("MANTA_TOKEN_FILE"));
    if (!token.ok()) return token.status();
    options.token = *token;
  }
  auto cw = std::make_unique<CoreWorkerImpl>(options, /*is_worker=*/true);
  if (auto s = cw->Start(); !s.ok()) return s;
  InstallClusterState(cw.get());
  SetCurrentCoreWorker({cw.get(), this});
  cw.release()->RunTaskLoop();
}

void RealCoreWorkerFactory::Shutdown(CoreWorker* core) {
  auto* cw = static_cast<CoreWorkerImpl*>(core);
  // Its watches end while the core worker's GCS client still runs.
  if (ClusterState::Current() == cluster_state_.get()) SetCurrentClusterState(nullptr);
  cluster_state_.reset();
  const bool quiet = cw->Stop();
  Printer().Flush();
  if (quiet) delete cw;
}

RealCoreWorkerFactory& RealCoreWorkerFactory::Get() {
  static RealCoreWorkerFactory* factory = new RealCoreWorkerFactory();
  return *factory;
}

// ---------------------------------------------------------------- helpers

// ---------------------------------------------------------------- lifecycle

CoreWorkerImpl::CoreWorkerImpl(CoreWorkerOptions options, bool is_worker)
    : options_(std::move(options)),
      is_worker_(is_worker),
      pid_(getpid()),
      worker_id_(WorkerId::FromRandom()),
      peers_(std::make_unique<GrpcPeers>(&pool_, &loop_, options_.token, &fetches_)),
      refs_(&store_, peers_.get()),
      objects_(&store_, peers_.get()),
      push_host_(MakePushHost()),
      pushes_(push_host_.get(), options_.token),
      submit_host_(MakeSubmitHost()),
      tasks_(submit_deps(), &resolver_),
      gcs_client_(gcs::MakeGrpcGcsClient(&loop_, options_.gcs_address, options_.token, kGcsCallTimeout)),
      gcs_sync_(&loop_, gcs_client_.get(), kGcsCallTimeout + absl::Seconds(5)),
      actors_(submit_deps(), &resolver_, gcs_client_.get()) {
  FillRandom(task_id_prefix_.data(), task_id_prefix_.size());
  if (is_worker_) {
    if (auto id = WorkerId::FromHex(Env("MANTA_WORKER_ID")); id.ok()) worker_id_ = *id;
    if (auto id = JobId::FromHex(Env("MANTA_JOB_ID")); id.ok()) job_id_ = *id;
  }
}

CoreWorkerImpl::~CoreWorkerImpl() { Stop(); }

absl::Status CoreWorkerImpl::Start() {
  if (options_.gcs_address.empty()) return absl::InvalidArgumentError("no GCS address");
  io_thread_ = std::thread([this] { loop_.Run(); });

  if (is_worker_) StartReceiver();
  grpc::ServerBuilder builder;
  rpc::ConfigureServerBuilder(&builder);
  builder.RegisterService(this);
  // Behind the connection gate, as the GCS and the raylet are: a flood of
  // idle connections cannot stop this worker accepting its owner's calls.
  auto server = rpc::GatedServer::Start(&builder, options_.node_ip + ":0", options_.token);
  if (!server.ok()) {
    return absl::UnavailableError("cannot listen on " + options_.node_ip + ": " +
                                  std::string(server.status().message()));
  }
  server_ = std::move(*server);
  rpc::Address self;
  self.set_ip(options_.node_ip);
  self.set_port(server_->port());
  self.set_worker_id(worker_id_.Binary());
  SetSelfAddress(std::move(self));

  if (is_worker_) {
    raylet_address_ = options_.raylet_address;
    if (auto s = RegisterWithRaylet(); !s.ok()) return s;
    ConfigureSubmitters();
    PublishStats();
    return absl::OkStatus();
  }
  auto cluster =
      GcsCall<rpc::GetClusterIdReply>([](gcs::GcsClient& gcs, auto done) { gcs.GetClusterId(std::move(done)); });
  if (!cluster.ok()) {
    return absl::Status(cluster.status().code(), "cannot reach the GCS at " + options_.gcs_address + ": " +
                                                     std::string(cluster.status().message()));
  }
  if (options_.raylet_address.empty()) {
    auto raylet = FindLocalRaylet();
    if (!raylet.ok()) return raylet.status();
    raylet_address_ = *raylet;
  } else {
    raylet_address_ = options_.raylet_address;
  }
  if (auto s = RegisterJob(); !s.ok()) return s;
  ConfigureSubmitters();
  loop_.Post([this] { PollLogs(); });
  return absl::OkStatus();
}

bool CoreWorkerImpl::Stop() {
  if (stopping_) return true;
  pushes_.Stop();  // no push starts after this
  stopping_ = true;
  refs_.Stop();
  tasks_.Stop();
  actors_.Stop();
  // Calls whose results no one waited for: their completions must not run
  // once this object is gone.
  const bool quiet = pushes_.CancelAll();
  if (!is_worker_ && !job_id_.IsNil()) {
    // Return the leases, then finish the job so the cluster cleans up.
    auto returned = std::make_shared<std::promise<void>>();
    loop_.Post([this, returned] {
      tasks_.ReturnAllLeases();
      returned->set_value();
    });
    returned->get_future().wait_for(std::chrono::seconds(2));
    DrainLogs();
    FlushTaskEvents();
    rpc::MarkJobFinishedRequest req;
    req.set_job_id(job_id_.Binary());
    gcs_sync_
        .Call<rpc::MarkJobFinishedReply>(
            [req](gcs::GcsClient& gcs, auto done) { gcs.MarkJobFinished(req, std::move(done)); },
            {.wait = absl::Seconds(3)})
        .IgnoreError();
  }
  if (server_) server_->Shutdown(absl::Milliseconds(500));
  loop_.Post([this] {
    tasks_.DropTimers();
    task_event_timer_.reset();
    stats_timer_.reset();
    loop_.Stop();
  });
  if (io_thread_.joinable()) io_thread_.join();
  // No return arrives any more: end the fetches of large ones.
  fetches_.Stop();
  if (quiet) pushes_.FreeEnded();
  return quiet;
}

void CoreWorkerImpl::PublishStats() {
  const std::string dir = Env("MANTA_STATS_DIR");
  if (dir.empty()) return;
  auto page = metrics::StatsPage::Open(metrics::WorkerPagePath(dir, worker_id_.Hex()));
  if (!page.ok()) {
    Logger("core_worker")->warn("no stats page for the raylet's metrics: {}", page.status().ToString());
    return;
  }
  stats_page_ = std::move(*page);
  loop_.Post([this] {
    stats_timer_ = loop_.RunEvery(absl::Seconds(1), [this] {
      const auto bytes = static_cast<uint64_t>(std::max<int64_t>(0, store_.bytes()));
      if (stats_page_->Read()[metrics::kWorkerHeapBytes] == bytes) return;
      stats_page_->Write([bytes](metrics::StatsPage::Slots& s) { s[metrics::kWorkerHeapBytes] = bytes; });
    });
  });
}

void CoreWorkerImpl::SetSelfAddress(rpc::Address address) {
  address_proto_ = std::move(address);
  address_ = address_proto_.SerializeAsString();
  refs_.set_self(address_proto_);
  objects_.set_self(address_proto_);
}

NodeId CoreWorkerImpl::node_id() const {
  auto id = NodeId::FromBinary(address_proto_.node_id());
  return id.ok() ? *id : NodeId();
}

void CoreWorkerImpl::ConfigureSubmitters() {
  resolver_.set_self(address_proto_.worker_id());
  actors_.set_self(address_proto_.worker_id());
  TaskSubmitter::Caller caller;
  caller.address = address_proto_;
  caller.job_id = job_id_.Binary();
  caller.worker_executable = options_.worker_executable;
  caller.worker_args = options_.worker_args;
  caller.local_raylet = raylet_address_;
  caller.is_driver = !is_worker_;
  tasks_.set_caller(std::move(caller));
}

absl::Status CoreWorkerImpl::RegisterJob() {
  rpc::AddJobRequest req;
  rpc::JobInfo* job = req.mutable_job();
  PackageKv kv;
  kv.exists = [this](const std::string& name) -> absl::StatusOr<bool> {
    rpc::KvKeysRequest keys;
    keys.set_ns(kPackageKvNamespace);
    keys.set_prefix(name);
    ASSIGN_OR_RETURN(rpc::KvKeysReply reply, GcsCall<rpc::KvKeysReply>([keys](gcs::GcsClient& gcs, auto done) {
                       gcs.KvKeys(keys, std::move(done));
                     }));
    for (const std::string& k : reply.keys()) {
      if (k == name) return true;
    }
    return false;
  };
  kv.put = [this](const std::string& name, const std::string& data) {
    rpc::KvPutRequest put;
    put.set_ns(kPackageKvNamespace);
    put.set_key(name);
    put.set_value(data);
    put.set_request_id(rpc::NewRequestId());
    return GcsCall<rpc::KvPutReply>([put](gcs::GcsClient& gcs, auto done) { gcs.KvPut(put, std::move(done)); })
        .status();
  };
  auto runtime_env = MakeRuntimeEnv(options_.runtime_env_working_dir, options_.runtime_env_env_vars, kv);
  if (!runtime_env.ok()) return runtime_env.status();
  *job->mutable_runtime_env() = std::move(*runtime_env);
  *job->mutable_driver_address() = address_proto_;
  job->set_driver_pid(getpid());
  job->set_driver_ip(options_.node_ip);
  job->set_start_time_ms(absl::ToUnixMillis(absl::Now()));
  job->set_entrypoint(options_.worker_executable);
  auto reply = GcsCall<rpc::AddJobReply>([req](gcs::GcsClient& gcs, auto done) { gcs.AddJob(req, std::move(done)); });
  if (!reply.ok()) return Annotate(reply.status(), "cannot register the job with the GCS");
  auto id = JobId::FromBinary(reply->job_id());
  if (!id.ok()) return absl::InternalError("the GCS returned a malformed job id");
  job_id_ = *id;
  return absl::OkStatus();
}

absl::StatusOr<rpc::GetAllNodeInfoReply> CoreWorkerImpl::AliveNodes(absl::Duration timeout) {
  rpc::GetAllNodeInfoRequest req;
  req.set_filter_alive(true);
  return GcsCall<rpc::GetAllNodeInfoReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetAllNodeInfo(req, std::move(done)); }, timeout);
}

absl::StatusOr<std::string> CoreWorkerImpl::FindLocalRaylet() {
  auto reply = AliveNodes();
  if (!reply.ok()) return reply.status();
  const rpc::NodeInfo* best = nullptr;
  for (const auto& n : reply->nodes()) {
    if (n.node_ip() != options_.node_ip) continue;
    if (best == nullptr || (n.is_head() && !best->is_head())) best = &n;
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError("no raylet runs on " + options_.node_ip +
                                         " (start one with `manta start --address=...`)");
  }
  rpc::Address self = address_proto_;
  self.set_node_id(best->node_id());
  SetSelfAddress(std::move(self));
  return rpc::RayletAddress(*best);
}

absl::Status CoreWorkerImpl::RegisterWithRaylet() {
  rpc::RegisterWorkerRequest req;
  req.set_worker_id(worker_id_.Binary());
  req.set_port(address_proto_.port());
  req.set_pid(getpid());
  req.set_job_id(job_id_.Binary());
  // A connection that could not be made (a busy host) is tried again, well
  // within the raylet's wait for a new worker; nothing else is.
  absl::StatusOr<rpc::RegisterWorkerReply> reply;
  absl::Duration backoff = absl::Milliseconds(20);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (true) {
    reply = SyncCall<rpc::RegisterWorkerReply>(
        options_.token, [&](auto* ctx, auto* r) { return pool_.Raylet(raylet_address_)->RegisterWorker(ctx, req, r); });
    if (reply.ok() || !absl::IsUnavailable(reply.status()) || absl::Now() + backoff > give_up) break;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  if (!reply.ok()) return Annotate(reply.status(), "cannot register with the raylet at " + raylet_address_);
  rpc::Address self = address_proto_;
  self.set_node_id(reply->node_id());
  SetSelfAddress(std::move(self));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- objects

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::Put(std::string data) {
  ObjectId id = ObjectId::FromRandom();
  store_.Put(id, std::make_shared<const std::string>(std::move(data)));
  return ObjectRefInfo{id, std::string()};  // owned here
}

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::PutWithRefs(std::shared_ptr<const std::string> data,
                                                          const std::vector<ObjectRefInfo>& contained) {
  ObjectId id = ObjectId::FromRandom();
  if (contained.empty()) {  // nothing to hold: a plain put
    store_.Put(id, std::move(data));
    return ObjectRefInfo{id, std::string()};
  }
  // The caller holds every contained ref now: a reference each keeps them
  // (and any borrow of them) until the stored value is erased.
  std::vector<ObjectId> held;
  for (const ObjectRefInfo& r : contained) {
    store_.AddReference(r.id);
    held.push_back(r.id);
  }
  store_.Put(id, std::move(data));
  refs_.HoldRefs(id.Binary(), std::move(held));
  store_.NotifyOnErase(id);  // present: no ref to it has been handed out yet
  return ObjectRefInfo{id, std::string()};
}

std::vector<absl::StatusOr<Value>> CoreWorkerImpl::Get(const std::vector<ObjectRefInfo>& refs, absl::Duration timeout) {
  return objects_.Get(refs, timeout);
}

std::vector<bool> CoreWorkerImpl::Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout,
                                       bool fetch_local) {
  return objects_.Wait(refs, num_returns, timeout, fetch_local);
}

// ---------------------------------------------------------------- task events and logs

void CoreWorkerImpl::RecordTaskEvent(const rpc::TaskSpec& spec, rpc::TaskEvent::State state,
                                     const rpc::ErrorInfo* error, const rpc::Address* worker, int pid,
                                     std::shared_ptr<const TaskEventBuffer::Resources> resources,
                                     TaskEventBuffer::Ticket* ticket) {
  TaskEventBuffer::Location where;
  const TaskEventBuffer::Location* at = nullptr;
  if (worker != nullptr) {
    where = {worker->worker_id(), worker->node_id(), pid};
    at = &where;
  }
  // The GCS merges a task's events: its resources need saying only once.
  if (state != rpc::TaskEvent::SUBMITTED_TO_WORKER) {
    resources = nullptr;
  } else if (!resources) {
    resources = TaskEventBuffer::ResourcesOf(spec);
  }
  // One flush a second while there are events; nothing armed when idle.
  if (task_events_.Record(spec, state, error, at, std::move(resources), ticket)) {
    loop_.Post([this] {
      if (!task_event_timer_) {
        task_event_timer_ = loop_.RunAfter(absl::Seconds(1), [this] {
          task_event_timer_.reset();
          FlushTaskEvents();
        });
      }
    });
  }
}

void CoreWorkerImpl::FlushTaskEvents() {
  auto flush = [this] {
    // The batches live on one arena, dropped once they are sent.
    google::protobuf::Arena arena;
    for (rpc::AddTaskEventsRequest* req : task_events_.Take(&arena)) {
      gcs_client_->AddTaskEvents(*req, [](const absl::Status&, rpc::AddTaskEventsReply&&) {});
    }
  };
  if (loop_.IsInLoopThread()) {
    flush();
  } else {
    auto done = std::make_shared<std::promise<void>>();
    loop_.Post([flush, done] {
      flush();
      done->set_value();
    });
    done->get_future().wait_for(std::chrono::seconds(1));
  }
}

void CoreWorkerImpl::PrintLogs(const rpc::PollReply& reply) {
  // A worker that runs tasks announces each task's name on both its streams
  // with a marker line (kTaskNameMarker, as Ray's workers do); its later
  // lines are prefixed with that name. Called on the loop thread only.
  static auto* task_names = new absl::flat_hash_map<std::string, std::string>();  // "ip pid" -> name
  absl::Time now = absl::Now();
  for (const auto& m : reply.messages()) {
    if (!m.has_log_batch()) continue;
    const rpc::LogBatch& b = m.log_batch();
    const std::string source = b.ip() + " " + std::to_string(b.pid());
    for (const auto& line : b.lines()) {
      if (absl::StartsWith(line, kTaskNameMarker)) {
        (*task_names)[source] = line.substr(sizeof(kTaskNameMarker) - 1);
        continue;
      }
      std::string who = b.actor_name();
      if (who.empty()) {
        auto it = task_names->find(source);
        who = it == task_names->end() ? "worker" : it->second;
      }
      Printer().Add("(" + who + " pid=" + std::to_string(b.pid()) + ", ip=" + b.ip() + ")", line, b.is_error(), now);
    }
  }
  Printer().Tick(now);
}

void CoreWorkerImpl::DrainLogs() {
  // Output the job's workers wrote before now may still be in their files or
  // on its way to the GCS (raylets forward it in batches). Each raylet reads
  // the files to their end and answers once the GCS has every line; then one
  // poll collects them.
  std::promise<std::pair<int64_t, std::string>> position;
  loop_.Post([&] { position.set_value({log_poll_sequence_, log_poll_incarnation_}); });
  auto pos = position.get_future().get();
  auto nodes = AliveNodes(absl::Seconds(2));
  if (nodes.ok()) {
    rpc::FlushJobLogsRequest req;
    req.set_job_id(job_id_.Binary());
    absl::BlockingCounter left(nodes->nodes_size());
    for (const auto& n : nodes->nodes()) {
      rpc::UnaryCall<rpc::FlushJobLogsReply>(
          nullptr, options_.token, absl::Seconds(3), req,
          [stub = pool_.Raylet(rpc::RayletAddress(n))](auto* ctx, auto* r, auto* reply, auto done) {
            stub->async()->FlushJobLogs(ctx, r, reply, std::move(done));
          },
          [&left](const absl::Status&, rpc::FlushJobLogsReply&&) { left.DecrementCount(); });
    }
    left.Wait();
  }
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::LOGS);
  req.add_keys(job_id_.Binary());
  req.set_after_sequence(pos.first);
  req.set_gcs_incarnation(pos.second);
  auto reply = gcs_sync_.Call<rpc::PollReply>([req](gcs::GcsClient& gcs, auto done) { gcs.Poll(req, std::move(done)); },
                                              {.wait = absl::Seconds(2)});
  if (reply.ok()) PrintLogs(*reply);
}

void CoreWorkerImpl::PollLogs() {
  if (stopping_) return;
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::LOGS);
  req.add_keys(job_id_.Binary());
  req.set_after_sequence(log_poll_sequence_);
  req.set_gcs_incarnation(log_poll_incarnation_);
  req.set_max_wait_ms(1000);  // also the cadence of closing repeat windows
  // The GCS finishes the job when this held poll's connection drops.
  req.set_subscriber_job_id(job_id_.Binary());
  gcs_client_->Poll(req, [this](const absl::Status& s, rpc::PollReply&& reply) {
    if (stopping_) return;
    if (!s.ok()) {
      log_poll_timer_ = loop_.RunAfter(absl::Seconds(1), [this] { PollLogs(); });
      return;
    }
    log_poll_incarnation_ = reply.gcs_incarnation();
    log_poll_sequence_ = reply.last_sequence();
    // The next poll first: a held poll is how the GCS knows this driver
    // lives, and printing a flood of lines takes a while.
    PollLogs();
    PrintLogs(reply);
  });
}

}  // namespace manta::core

namespace manta::core {

absl::Duration GcsReconnectTimeout() {
  static const absl::Duration timeout = [] {
    const char* env = std::getenv("MANTA_GCS_RECONNECT_TIMEOUT_S");
    double seconds = 60;
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      double v = std::strtod(env, &end);
      if (end != env && *end == '\0' && v >= 0 && v <= 86400) seconds = v;
    }
    return absl::Seconds(seconds);
  }();
  return timeout;
}

}  // namespace manta::core
