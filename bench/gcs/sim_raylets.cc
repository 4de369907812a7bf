#include "bench/gcs/sim_raylets.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/gcs/sim_node.h"
#include "common/event_loop.h"
#include "common/placement_group_resources.h"
#include "common/process.h"
#include "common/rpc/client_call.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/server_call.h"
#include "common/status.h"
#include "proto/gcs_service.grpc.pb.h"
#include "proto/node_manager.grpc.pb.h"

namespace manta::bench {
namespace {

// As the raylet (raylet/raylet.cc).
constexpr absl::Duration kRetryDelay = absl::Milliseconds(300);
constexpr absl::Duration kReportInterval = absl::Milliseconds(100);
constexpr absl::Duration kPollRetry = absl::Seconds(1);
constexpr absl::Duration kKeepalive = absl::Seconds(5);  // GcsLinkOptions::keepalive
constexpr int kPollWaitMs = 30000;
// The raylet's --gcs_connect_timeout_s default: a raylet whose registration
// has not succeeded this long after it started gives up and exits.
constexpr absl::Duration kConnectTimeout = absl::Seconds(5);
// Longer than this between two health checks of a node (the GCS checks
// every 2 s by default): the GCS went quiet on it.
constexpr int64_t kQuietGapMs = 3000;
constexpr absl::Duration kSimCallTimeout = absl::Seconds(5);  // as gcs::GcsClient
constexpr char kSubscribeMethod[] = "/manta.rpc.PubSubGcsService/Subscribe";

bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded;
}

// The port a call was addressed to, from its :authority ("127.0.0.1:20001").
int CalledPort(const grpc::CallbackServerContext& ctx) {
  grpc::string_ref authority = ctx.ExperimentalGetAuthority();
  std::string text(authority.data(), authority.size());
  int port = 0;
  auto colon = text.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port)) return 0;
  return port;
}

absl::StatusOr<ResourceSet> LeaseDemand(const rpc::TaskSpec& spec) {
  auto demand = ResourceSet::FromPairs(spec.resources());
  if (!demand.ok() || spec.placement_group_id().empty()) return demand;
  auto group = PlacementGroupId::FromBinary(spec.placement_group_id());
  if (!group.ok()) return group.status();
  return pg::BundleDemand(*demand, *group, spec.bundle_index());
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

grpc::ServerUnaryReactor* Finished(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// What a simulated node needs of a PollReply, read from its encoding without
// parsing the messages: raylets on other machines would parse them, so this
// process does not spend the GCS's machine's CPU on it.
struct PollHeader {
  std::string gcs_incarnation;
  bool gap = false;
  int64_t last_sequence = 0;
  int64_t messages = 0;
};

absl::StatusOr<PollHeader> ReadPollHeader(const grpc::ByteBuffer& buffer) {
  using google::protobuf::internal::WireFormatLite;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::DataLossError("unreadable poll reply");
  std::string bytes;
  for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  PollHeader h;
  while (uint32_t tag = in.ReadTag()) {
    int field = WireFormatLite::GetTagFieldNumber(tag);
    uint32_t length = 0;
    uint64_t value = 0;
    bool ok = true;
    if (field == rpc::PollReply::kMessagesFieldNumber) {
      ok = in.ReadVarint32(&length) && in.Skip(static_cast<int>(length));
      ++h.messages;
    } else if (field == rpc::PollReply::kGcsIncarnationFieldNumber) {
      ok = in.ReadVarint32(&length) && in.ReadString(&h.gcs_incarnation, static_cast<int>(length));
    } else if (field == rpc::PollReply::kGapFieldNumber) {
      ok = in.ReadVarint64(&value);
      h.gap = value != 0;
    } else if (field == rpc::PollReply::kLastSequenceFieldNumber) {
      ok = in.ReadVarint64(&value);
      h.last_sequence = static_cast<int64_t>(value);
    } else {
      ok = WireFormatLite::SkipField(&in, tag);
    }
    if (!ok) return absl::DataLossError("malformed poll reply");
  }
  return h;
}

// One simulated raylet's connection to the GCS: a channel of its own, as
// each raylet has.
struct GcsConnection {
  explicit GcsConnection(const std::string& address)
      : channel(rpc::MakeChannel(address)),
        nodes(rpc::NodeInfoGcsService::NewStub(channel)),
        resources(rpc::NodeResourceGcsService::NewStub(channel)),
        raw(channel) {}
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes;
  std::unique_ptr<rpc::NodeResourceGcsService::Stub> resources;
  grpc::TemplatedGenericStub<rpc::PollRequest, grpc::ByteBuffer> raw;  // Subscribe, read with ReadPollHeader
};

}  // namespace

// The start function of rpc::UnaryCall for `Method` of node `n`'s `member` stub.
#define MANTA_SIM_CALL(member, Method)                                         \
  [stub = n.gcs->member.get()](auto* ctx, auto* req, auto* reply, auto done) { \
    stub->async()->Method(ctx, req, reply, std::move(done));                   \
  }

class SimulatedRaylets::Impl {
 public:
  // One simulated raylet. Loop thread only, but for `book`'s id and port.
  struct Node {
    explicit Node(SimNode b) : book(std::move(b)) {}
    SimNode book;
    std::unique_ptr<GcsConnection> gcs;
    std::string cluster_id;
    bool registered = false;
    bool report_in_flight = false;
    absl::Time last_report = absl::InfinitePast();  // sent: a report or a keepalive
    bool keepalive_in_flight = false;
    int64_t poll_sequence = 0;
    std::string poll_incarnation;
    std::unique_ptr<EventLoop::Timer> retry;
    absl::Time first_attempt = absl::InfinitePast();  // of RegisterNode
    // When the last health check arrived (steady clock, ms); written on gRPC's threads.
    std::atomic<int64_t> last_check_ms{0};
  };

  // NodeManagerService of every node: which node is meant comes from the
  // port the call was addressed to.
  class RayletService : public rpc::NodeManagerService::CallbackService {
   public:
    explicit RayletService(Impl* impl) : impl_(impl) {}

    grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* ctx, const rpc::HealthCheckRequest*,
                                          rpc::HealthCheckReply* reply) override {
      grpc::Status auth = rpc::CheckAuth(*ctx, impl_->options_.token);
      if (!auth.ok()) return Finished(ctx, auth);
      Node* node = impl_->NodeAt(CalledPort(*ctx));
      if (node == nullptr) return Finished(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND, "no node on this port"));
      impl_->health_checks_.fetch_add(1, std::memory_order_relaxed);
      // Reached here with less than half its deadline left: this process was slow to take it.
      if (ctx->deadline() - std::chrono::system_clock::now() < std::chrono::milliseconds(500)) {
        impl_->health_checks_late_.fetch_add(1, std::memory_order_relaxed);
      }
      int64_t now = NowMs();
      int64_t last = node->last_check_ms.exchange(now);
      if (last > 0 && now - last > kQuietGapMs) impl_->health_check_gaps_.fetch_add(1, std::memory_order_relaxed);
      reply->set_node_id(node->book.id().Binary());  // fixed at Start
      return Finished(ctx, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* GetNodeStats(grpc::CallbackServerContext* ctx, const rpc::GetNodeStatsRequest*,
                                           rpc::GetNodeStatsReply* reply) override {
      return impl_->OnNode(ctx, [reply](Node& n, rpc::Done done) {
        *reply->mutable_node_info() = n.book.Info();
        *reply->mutable_resources() = n.book.Resources();
        done(absl::OkStatus());
      });
    }
    grpc::ServerUnaryReactor* RequestWorkerLease(grpc::CallbackServerContext* ctx,
                                                 const rpc::RequestWorkerLeaseRequest* req,
                                                 rpc::RequestWorkerLeaseReply* reply) override {
      return impl_->OnNode(ctx, [impl = impl_, req, reply](Node& n, rpc::Done done) {
        impl->Lease(n, *req, reply);
        done(absl::OkStatus());
      });
    }
    grpc::ServerUnaryReactor* ReturnWorker(grpc::CallbackServerContext* ctx, const rpc::ReturnWorkerRequest* req,
                                           rpc::ReturnWorkerReply*) override {
      return impl_->OnNode(ctx, [req](Node& n, rpc::Done done) {
        n.book.Return(req->lease_id());
        done(absl::OkStatus());
      });
    }
    grpc::ServerUnaryReactor* CancelWorkerLease(grpc::CallbackServerContext* ctx, const rpc::CancelWorkerLeaseRequest*,
                                                rpc::CancelWorkerLeaseReply*) override {
      return impl_->OnNode(ctx, [](Node&, rpc::Done done) { done(absl::OkStatus()); });  // leases never queue
    }
    grpc::ServerUnaryReactor* KillJobWorkers(grpc::CallbackServerContext* ctx, const rpc::KillJobWorkersRequest*,
                                             rpc::KillJobWorkersReply*) override {
      return impl_->OnNode(ctx, [](Node&, rpc::Done done) { done(absl::OkStatus()); });
    }
    grpc::ServerUnaryReactor* PrepareBundles(grpc::CallbackServerContext* ctx, const rpc::PrepareBundlesRequest* req,
                                             rpc::PrepareBundlesReply* reply) override {
      return impl_->OnNode(
          ctx, [impl = impl_, req, reply](Node& n, rpc::Done done) { done(impl->Prepare(n, *req, reply)); });
    }
    grpc::ServerUnaryReactor* CommitBundles(grpc::CallbackServerContext* ctx, const rpc::CommitBundlesRequest* req,
                                            rpc::CommitBundlesReply* reply) override {
      return impl_->OnNode(ctx, [impl = impl_, req, reply](Node& n, rpc::Done done) {
        impl->bundle_calls_.fetch_add(1, std::memory_order_relaxed);
        auto group = PlacementGroupId::FromBinary(req->placement_group_id());
        if (!group.ok()) return done(group.status());
        absl::Status s = n.book.Commit(*group, {req->indices().begin(), req->indices().end()});
        *reply->mutable_resources() = ReplyView(n, s.ok());
        done(s);
      });
    }
    grpc::ServerUnaryReactor* CancelBundles(grpc::CallbackServerContext* ctx, const rpc::CancelBundlesRequest* req,
                                            rpc::CancelBundlesReply* reply) override {
      return impl_->OnNode(ctx, [impl = impl_, req, reply](Node& n, rpc::Done done) {
        impl->bundle_calls_.fetch_add(1, std::memory_order_relaxed);
        auto group = PlacementGroupId::FromBinary(req->placement_group_id());
        if (!group.ok()) return done(group.status());
        n.book.Cancel(*group, {req->indices().begin(), req->indices().end()});
        *reply->mutable_resources() = ReplyView(n, true);
        done(absl::OkStatus());
      });
    }
    grpc::ServerUnaryReactor* ReleaseUnusedBundles(grpc::CallbackServerContext* ctx,
                                                   const rpc::ReleaseUnusedBundlesRequest* req,
                                                   rpc::ReleaseUnusedBundlesReply* reply) override {
      return impl_->OnNode(ctx, [impl = impl_, req, reply](Node& n, rpc::Done done) {
        impl->bundle_calls_.fetch_add(1, std::memory_order_relaxed);
        std::vector<std::pair<PlacementGroupId, int>> in_use;
        for (const rpc::Bundle& b : req->bundles_in_use()) {
          auto group = PlacementGroupId::FromBinary(b.placement_group_id());
          if (!group.ok()) return done(group.status());
          in_use.emplace_back(*group, b.index());
        }
        n.book.ReleaseUnused(in_use);
        *reply->mutable_resources() = ReplyView(n, true);
        done(absl::OkStatus());
      });
    }
    grpc::ServerUnaryReactor* DrainRaylet(grpc::CallbackServerContext* ctx, const rpc::DrainRayletRequest*,
                                          rpc::DrainRayletReply*) override {
      return impl_->OnNode(ctx, [](Node&, rpc::Done done) { done(absl::OkStatus()); });
    }

   private:
    Impl* const impl_;
  };

  explicit Impl(SimOptions options) : options_(std::move(options)), raylets_(this) {}

  absl::Status Start() {
    RETURN_IF_ERROR(StartWorkers());
    grpc::ServerBuilder builder;
    rpc::ConfigureServerBuilder(&builder);
    // Port 0 for each: the kernel hands out distinct ports, with no race
    // between choosing one and binding it.
    std::vector<int> ports(options_.nodes, 0);
    for (int& port : ports) builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&raylets_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) return absl::InternalError("cannot start the simulated raylets' server");
    for (int port : ports) {
      if (port <= 0) return absl::InternalError("cannot bind a port for every simulated node");
      nodes_.push_back(std::make_unique<Node>(SimNode(NodeId::FromRandom(), port, options_.resources)));
      nodes_.back()->gcs = std::make_unique<GcsConnection>(options_.gcs_address);
      by_port_[port] = nodes_.back().get();
    }
    loop_thread_ = std::thread([this] { loop_.Run(); });
    loop_.Post([this] { report_timer_ = loop_.RunEvery(kReportInterval, [this] { SendReports(); }); });
    return absl::OkStatus();
  }

  // The workers' process (bench_gcs_sim_workers), gone with this thread.
  absl::Status StartWorkers() {
    std::string ready = options_.scratch_dir + "/sim_workers.port";
    SpawnOptions opts;
    opts.executable = options_.workers_bin;
    opts.args = {ready};
    opts.env = {{"MANTA_TOKEN", options_.token}};
    opts.log_file = options_.scratch_dir + "/sim_workers.log";
    opts.kill_with_parent = true;
    ASSIGN_OR_RETURN(workers_pid_, SpawnDaemon(opts));
    ASSIGN_OR_RETURN(std::string port,
                     WaitForFile(ready, absl::Now() + absl::Seconds(20), workers_pid_, opts.log_file));
    if (!absl::SimpleAtoi(port, &worker_port_) || worker_port_ <= 0) {
      return absl::InternalError("bench_gcs_sim_workers wrote no port");
    }
    return absl::OkStatus();
  }

  absl::Status RegisterAll(absl::Duration timeout) {
    loop_.Post([this] {
      for (auto& n : nodes_) Register(*n);
    });
    bool done = all_registered_.WaitForNotificationWithTimeout(timeout);
    if (fatal_.load()) return FirstError();
    if (!done) {
      return absl::DeadlineExceededError(absl::StrCat(registered_.load(), " of ", options_.nodes,
                                                      " nodes registered in ", absl::FormatDuration(timeout)));
    }
    return absl::OkStatus();
  }

  absl::Status WaitReported(absl::Duration timeout) {
    auto settled = [this] {
      absl::Notification checked;
      bool idle = true;
      loop_.Post([&] {
        for (const auto& n : nodes_) idle &= !n->book.dirty() && !n->report_in_flight;
        checked.Notify();
      });
      checked.WaitForNotification();
      return idle;
    };
    if (!PollUntil(settled, absl::Now() + timeout)) return absl::DeadlineExceededError("reports did not settle");
    return absl::OkStatus();
  }

  SimStats stats() const {
    SimStats s;
    s.registered = registered_.load();
    s.register_retries = register_retries_.load();
    s.late_registrations = late_registrations_.load();
    s.health_checks = health_checks_.load();
    s.health_checks_late = health_checks_late_.load();
    s.health_check_gaps = health_check_gaps_.load();
    s.reports = reports_.load();
    s.keepalives = keepalives_.load();
    s.polls = polls_.load();
    s.poll_messages = poll_messages_.load();
    s.poll_bytes = poll_bytes_.load();
    s.poll_gaps = poll_gaps_.load();
    s.leases_granted = leases_granted_.load();
    s.leases_rejected = leases_rejected_.load();
    s.bundle_calls = bundle_calls_.load();
    s.errors = errors_.load();
    return s;
  }

  absl::Status Healthy() const {
    if (errors_.load() > 0) return FirstError();
    // The GCS must still count every simulated node alive.
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, options_.token, kSimCallTimeout);
    rpc::GetAllNodeInfoRequest request;
    request.set_filter_alive(true);
    rpc::GetAllNodeInfoReply reply;
    grpc::Status s = nodes_.front()->gcs->nodes->GetAllNodeInfo(&ctx, request, &reply);
    if (!s.ok()) return rpc::ToAbslStatus(s);
    if (reply.nodes_size() != options_.nodes) {
      return absl::InternalError(absl::StrCat("the GCS counts ", reply.nodes_size(), " of the ", options_.nodes,
                                              " simulated nodes alive (the others failed health checks)"));
    }
    return absl::OkStatus();
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    // Polls end when the GCS stops; their callbacks must not outlive the loop.
    if (!PollUntil([this] { return in_flight_.load() == 0; }, absl::Now() + absl::Seconds(10))) {
      std::fprintf(stderr, "%d calls to the GCS still in flight; leaving them\n", in_flight_.load());
      abandoned_ = true;
    }
    if (loop_thread_.joinable()) {
      loop_.Post([this] {
        report_timer_.reset();
        for (auto& n : nodes_) n->retry.reset();
        loop_.Stop();
      });
      loop_thread_.join();
    }
    if (workers_pid_ > 0) TerminateProcess(workers_pid_, absl::Now() + absl::Seconds(2)).IgnoreError();
  }

  bool abandoned() const { return abandoned_; }

 private:
  Node* NodeAt(int port) const {
    auto it = by_port_.find(port);
    return it == by_port_.end() ? nullptr : it->second;
  }

  // Runs `fn` on the loop for the node the call is addressed to.
  template <typename Fn>
  grpc::ServerUnaryReactor* OnNode(grpc::CallbackServerContext* ctx, Fn fn) {
    Node* node = NodeAt(CalledPort(*ctx));
    if (node == nullptr) return Finished(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND, "no node on this port"));
    return rpc::Dispatch(ctx, &loop_, options_.token,
                         [node, fn = std::move(fn)](rpc::Done done) mutable { fn(*node, std::move(done)); });
  }

  void Lease(Node& n, const rpc::RequestWorkerLeaseRequest& req, rpc::RequestWorkerLeaseReply* reply) {
    auto demand = LeaseDemand(req.spec());
    if (!demand.ok()) {
      reply->set_outcome(rpc::RequestWorkerLeaseReply::INVALID);
      reply->set_message(std::string(demand.status().message()));
      return;
    }
    if (!n.book.Lease(req.lease_id(), *demand)) {
      leases_rejected_.fetch_add(1, std::memory_order_relaxed);
      reply->set_outcome(rpc::RequestWorkerLeaseReply::REJECTED);
      return;
    }
    leases_granted_.fetch_add(1, std::memory_order_relaxed);
    reply->set_outcome(rpc::RequestWorkerLeaseReply::GRANTED);
    rpc::Address* worker = reply->mutable_worker_address();
    worker->set_ip("127.0.0.1");
    worker->set_port(worker_port_);
    worker->set_worker_id(WorkerId::FromRandom().Binary());
    worker->set_node_id(n.book.id().Binary());
    reply->set_worker_pid(getpid());
    if (req.reply_with_resources()) *reply->mutable_resources() = ReplyView(n, true);
  }

  // A call's reply carries the node's view, as a raylet's: after a change, a
  // successful one under a new version, which the node then does not report;
  // otherwise as last told (the GCS ignores it).
  static rpc::NodeResources ReplyView(Node& n, bool ok) {
    return ok && n.book.dirty() ? n.book.TakeReport() : n.book.Resources();
  }

  absl::Status Prepare(Node& n, const rpc::PrepareBundlesRequest& req, rpc::PrepareBundlesReply* reply) {
    bundle_calls_.fetch_add(1, std::memory_order_relaxed);
    if (req.bundles().empty()) return absl::InvalidArgumentError("no bundles to prepare");
    auto fits = n.book.Prepare({req.bundles().begin(), req.bundles().end()});
    if (!fits.ok()) return fits.status();
    reply->set_success(*fits);
    if (*fits && req.commit()) {
      std::vector<int> indices;
      for (const rpc::Bundle& b : req.bundles()) indices.push_back(b.index());
      RETURN_IF_ERROR(n.book.Commit(*PlacementGroupId::FromBinary(req.bundles(0).placement_group_id()), indices));
      reply->set_committed(true);
    }
    if (!*fits) reply->set_message("the bundles do not fit on node " + n.book.id().Hex());
    *reply->mutable_resources() = ReplyView(n, true);
    return absl::OkStatus();
  }

  void Register(Node& n) {
    if (stopping_.load()) return;
    if (n.first_attempt == absl::InfinitePast()) n.first_attempt = absl::Now();
    rpc::RegisterNodeRequest req;
    *req.mutable_node_info() = n.book.Info();
    req.set_cluster_id(n.cluster_id);
    in_flight_.fetch_add(1);
    Call<rpc::RegisterNodeReply>(
        req, MANTA_SIM_CALL(nodes, RegisterNode), [this, &n](const absl::Status& s, rpc::RegisterNodeReply&& reply) {
          in_flight_.fetch_sub(1);
          if (s.ok()) {
            n.cluster_id = reply.cluster_id();
            if (!n.registered) {
              n.registered = true;
              n.last_report = absl::Now();  // as a raylet: no keepalive due yet
              if (absl::Now() - n.first_attempt > kConnectTimeout) late_registrations_.fetch_add(1);
              if (registered_.fetch_add(1) + 1 == options_.nodes && !all_registered_.HasBeenNotified()) {
                all_registered_.Notify();
              }
              Subscribe(n);
            }
            n.book.MarkDirty();
          } else if (Retryable(s)) {
            register_retries_.fetch_add(1, std::memory_order_relaxed);
            if (!stopping_.load()) n.retry = loop_.RunAfter(kRetryDelay, [this, &n] { Register(n); });
          } else {
            Fail(s, /*fatal=*/true);
          }
        });
  }

  // Every kReportInterval: each registered node with a change to report and
  // no report in flight sends one.
  void SendReports() {
    for (auto& node : nodes_) {
      Node& n = *node;
      if (!n.registered || n.report_in_flight || !n.book.dirty() || stopping_.load()) continue;
      n.report_in_flight = true;
      n.last_report = absl::Now();
      rpc::ReportResourcesRequest req;
      *req.mutable_resources() = n.book.TakeReport();
      in_flight_.fetch_add(1);
      Call<rpc::ReportResourcesReply>(req, MANTA_SIM_CALL(resources, ReportResources),
                                      [this, &n](const absl::Status& s, rpc::ReportResourcesReply&& reply) {
                                        in_flight_.fetch_sub(1);
                                        n.report_in_flight = false;
                                        reports_.fetch_add(1, std::memory_order_relaxed);
                                        if (!s.ok()) {
                                          n.book.MarkDirty();  // the GCS must not keep a stale view
                                          if (!Retryable(s)) Fail(s, /*fatal=*/false);
                                        } else if (!reply.known_node()) {
                                          Register(n);
                                        }
                                      });
    }
  }

  // A node's Subscribe stream, as a raylet's (the one request, then the
  // replies), with each reply read by ReadPollHeader on the loop. It deletes
  // itself when done; what it posts goes through the loop's mailbox.
  class NodeStream final : public grpc::ClientBidiReactor<rpc::PollRequest, grpc::ByteBuffer> {
   public:
    NodeStream(Impl* impl, Node* n, rpc::PollRequest request)
        : impl_(impl), node_(n), mailbox_(impl->loop_.mailbox()), request_(std::move(request)) {}
    void Start() {
      rpc::PrepareContext(&ctx_, impl_->options_.token, absl::InfiniteDuration());
      node_->gcs->raw.PrepareBidiStreamingCall(&ctx_, kSubscribeMethod, grpc::StubOptions(), this);
      StartWriteLast(&request_, grpc::WriteOptions());
      StartRead(&reply_);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;  // OnDone follows
      mailbox_->Post([impl = impl_, n = node_, reply = reply_] { impl->OnPollReply(*n, reply); });
      reply_.Clear();
      StartRead(&reply_);
    }
    void OnDone(const grpc::Status& status) override {
      mailbox_->Post([impl = impl_, n = node_, s = rpc::ToAbslStatus(status)] { impl->OnStreamEnd(*n, s); });
      delete this;
    }

   private:
    Impl* const impl_;
    Node* const node_;
    const std::shared_ptr<EventLoop::Mailbox> mailbox_;
    grpc::ClientContext ctx_;
    rpc::PollRequest request_;
    grpc::ByteBuffer reply_;
  };

  void Subscribe(Node& n) {
    if (stopping_.load() || !options_.poll) return;
    rpc::PollRequest req;
    req.add_channels(rpc::PubMessage::NODE_INFO);
    req.add_channels(rpc::PubMessage::NODE_RESOURCES);
    req.set_after_sequence(n.poll_sequence);
    req.set_gcs_incarnation(n.poll_incarnation);
    req.set_max_wait_ms(kPollWaitMs);
    req.set_subscriber_node_id(n.book.id().Binary());
    in_flight_.fetch_add(1);
    (new NodeStream(this, &n, std::move(req)))->Start();
  }

  void OnStreamEnd(Node& n, const absl::Status& s) {
    in_flight_.fetch_sub(1);
    if (stopping_.load()) return;
    if (!s.ok() && !Retryable(s)) Fail(s, /*fatal=*/false);
    n.retry = loop_.RunAfter(kPollRetry, [this, &n] { Subscribe(n); });
  }

  void OnPollReply(Node& n, const grpc::ByteBuffer& reply) {
    if (stopping_.load()) return;
    absl::StatusOr<PollHeader> h = ReadPollHeader(reply);
    if (!h.ok()) return Fail(h.status(), /*fatal=*/false);
    polls_.fetch_add(1, std::memory_order_relaxed);
    poll_messages_.fetch_add(h->messages, std::memory_order_relaxed);
    poll_bytes_.fetch_add(static_cast<int64_t>(reply.Length()), std::memory_order_relaxed);
    n.poll_incarnation = h->gcs_incarnation;
    n.poll_sequence = h->last_sequence;
    SendKeepalive(n);
    if (!h->gap) return;
    poll_gaps_.fetch_add(1, std::memory_order_relaxed);
    Refresh(n);
  }

  // As a raylet holding its stream: while node events come, a sign of life
  // at least every kKeepalive (a report that carries no view).
  void SendKeepalive(Node& n) {
    if (!n.registered || n.keepalive_in_flight || absl::Now() - n.last_report < kKeepalive) return;
    n.keepalive_in_flight = true;
    n.last_report = absl::Now();
    rpc::ReportResourcesRequest req;
    req.mutable_resources()->set_node_id(n.book.id().Binary());
    req.set_keepalive(true);
    in_flight_.fetch_add(1);
    Call<rpc::ReportResourcesReply>(req, MANTA_SIM_CALL(resources, ReportResources),
                                    [this, &n](const absl::Status& s, rpc::ReportResourcesReply&& reply) {
                                      in_flight_.fetch_sub(1);
                                      n.keepalive_in_flight = false;
                                      keepalives_.fetch_add(1, std::memory_order_relaxed);
                                      if (!s.ok() && !Retryable(s)) Fail(s, /*fatal=*/false);
                                      if (s.ok() && !reply.known_node()) Register(n);
                                    });
  }

  // After a gap, as a raylet: the node table, then every node's resources.
  void Refresh(Node& n) {
    in_flight_.fetch_add(1);
    Call<rpc::GetAllNodeInfoReply>(
        rpc::GetAllNodeInfoRequest(), MANTA_SIM_CALL(nodes, GetAllNodeInfo),
        [this, &n](const absl::Status& s, rpc::GetAllNodeInfoReply&&) {
          in_flight_.fetch_sub(1);
          if (stopping_.load()) return;
          if (!s.ok()) return;
          in_flight_.fetch_add(1);
          Call<rpc::GetClusterResourcesReply>(
              rpc::GetClusterResourcesRequest(), MANTA_SIM_CALL(resources, GetClusterResources),
              [this](const absl::Status&, rpc::GetClusterResourcesReply&&) { in_flight_.fetch_sub(1); });
        });
  }

  // A call to the GCS with the token and kSimCallTimeout; `callback` runs on the loop.
  template <typename Reply, typename Request, typename Start>
  void Call(Request request, Start start, rpc::ReplyCallback<Reply> callback) {
    rpc::UnaryCall<Reply>(&loop_, options_.token, kSimCallTimeout, std::move(request), std::move(start),
                          std::move(callback));
  }

  void Fail(const absl::Status& s, bool fatal) {
    errors_.fetch_add(1);
    {
      absl::MutexLock lock(&mu_);
      if (first_error_.ok()) first_error_ = s;
    }
    if (fatal && !fatal_.exchange(true) && !all_registered_.HasBeenNotified()) all_registered_.Notify();
  }

  absl::Status FirstError() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

  const SimOptions options_;
  RayletService raylets_;
  EventLoop loop_;

  // Constant after Start.
  std::unique_ptr<grpc::Server> server_;
  int worker_port_ = 0;  // of the workers' process
  pid_t workers_pid_ = -1;
  std::vector<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_map<int, Node*> by_port_;
  std::thread loop_thread_;

  // Loop thread only.
  std::unique_ptr<EventLoop::Timer> report_timer_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> fatal_{false};
  absl::Notification all_registered_;  // or a registration failed for good
  std::atomic<int> in_flight_{0};
  bool abandoned_ = false;
  std::atomic<int64_t> registered_{0}, register_retries_{0}, late_registrations_{0}, health_checks_{0},
      health_checks_late_{0}, health_check_gaps_{0}, reports_{0}, keepalives_{0}, polls_{0}, poll_messages_{0},
      poll_bytes_{0}, poll_gaps_{0}, leases_granted_{0}, leases_rejected_{0}, bundle_calls_{0}, errors_{0};
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

SimulatedRaylets::SimulatedRaylets(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SimulatedRaylets::~SimulatedRaylets() {
  Stop();
  // Calls still in flight would post to the destroyed loop: keep it.
  if (impl_->abandoned()) impl_.release();
}

absl::StatusOr<std::unique_ptr<SimulatedRaylets>> SimulatedRaylets::Start(SimOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) {
    impl->Stop();
    return s;
  }
  return std::unique_ptr<SimulatedRaylets>(new SimulatedRaylets(std::move(impl)));
}

absl::Status SimulatedRaylets::RegisterAll(absl::Duration timeout) { return impl_->RegisterAll(timeout); }
absl::Status SimulatedRaylets::WaitReported(absl::Duration timeout) { return impl_->WaitReported(timeout); }
SimStats SimulatedRaylets::stats() const { return impl_->stats(); }
absl::Status SimulatedRaylets::Healthy() const { return impl_->Healthy(); }
void SimulatedRaylets::Stop() { impl_->Stop(); }

#undef MANTA_SIM_CALL

}  // namespace manta::bench
