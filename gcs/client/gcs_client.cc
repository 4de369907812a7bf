#include "gcs/client/gcs_client.h"

#include "common/rpc/client_call.h"
#include "common/rpc/reply_cache.h"
#include "common/rpc/tsan_handoff.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::gcs {

namespace {

// GcsClient::Subscribe by polls: each reply's last_sequence is the next
// poll's cursor.
class PollingSubscription final : public GcsClient::Subscription {
 public:
  PollingSubscription(GcsClient* gcs, rpc::PollRequest request, std::function<void(rpc::PollReply&&)> on_reply,
                      std::function<void(const absl::Status&)> on_end)
      : gcs_(gcs), request_(std::move(request)), on_reply_(std::move(on_reply)), on_end_(std::move(on_end)) {}
  ~PollingSubscription() override { *live_ = false; }

  void Poll() {
    gcs_->Poll(request_, [this, live = live_](const absl::Status& s, rpc::PollReply&& reply) {
      if (!*live) return;
      // Copies: the owner may destroy this subscription from inside either.
      if (!s.ok()) {
        auto on_end = on_end_;
        return on_end(s);
      }
      request_.set_after_sequence(reply.last_sequence());
      request_.set_gcs_incarnation(reply.gcs_incarnation());
      auto on_reply = on_reply_;
      on_reply(std::move(reply));
      if (*live) Poll();
    });
  }

 private:
  GcsClient* const gcs_;
  rpc::PollRequest request_;
  const std::function<void(rpc::PollReply&&)> on_reply_;
  const std::function<void(const absl::Status&)> on_end_;
  const std::shared_ptr<bool> live_ = std::make_shared<bool>(true);  // on the loop
};

// The client end of a Subscribe stream. gRPC's callbacks post to the
// owner's loop, where `live` keeps them from running once the handle is
// gone. The handle and the call each hold it: a cancel never meets a
// destroyed context. The next read starts once the loop has taken a reply,
// so a busy owner leaves replies to merge at the GCS rather than queued here
// (a hold keeps the call from ending in between).
class SubscribeCall final : public grpc::ClientReadReactor<rpc::PollReply>,
                            public std::enable_shared_from_this<SubscribeCall> {
 public:
  SubscribeCall(std::shared_ptr<EventLoop::Mailbox> mailbox, std::function<void(rpc::PollReply&&)> on_reply,
                std::function<void(const absl::Status&)> on_end)
      : mailbox_(std::move(mailbox)), on_reply_(std::move(on_reply)), on_end_(std::move(on_end)) {}

  void Start(rpc::PubSubGcsService::Stub* stub, const std::string& token, rpc::PollRequest request) {
    request_ = std::move(request);
    rpc::PrepareContext(&ctx_, token, absl::InfiniteDuration());
    self_ = shared_from_this();
    MANTA_GRPC_HANDOFF_BEFORE();
    stub->async()->Subscribe(&ctx_, &request_, this);
    StartRead(&reply_);
    StartCall();
  }
  // On the loop: no callback runs after this.
  void Cancel() {
    *live_ = false;
    ctx_.TryCancel();
  }

  void OnReadDone(bool ok) override {
    MANTA_GRPC_HANDOFF_AFTER();
    if (!ok) return;  // OnDone follows
    AddHold();
    auto self = shared_from_this();
    // Lets the call end once the delivery ran (after its read started) or
    // was dropped with the loop.
    std::shared_ptr<void> hold(nullptr, [self](void*) { self->RemoveHold(); });
    mailbox_->Post([self, hold, reply = std::move(reply_)]() mutable {
      if (*self->live_) self->on_reply_(std::move(reply));
      self->reply_.Clear();
      MANTA_GRPC_HANDOFF_BEFORE();
      self->StartRead(&self->reply_);
    });
  }
  void OnDone(const grpc::Status& status) override {
    MANTA_GRPC_HANDOFF_AFTER();
    mailbox_->Post([live = live_, cb = on_end_, s = rpc::ToAbslStatus(status)] {
      if (*live) cb(s);
    });
    self_.reset();  // last: may destroy this
  }

 private:
  const std::shared_ptr<EventLoop::Mailbox> mailbox_;
  const std::function<void(rpc::PollReply&&)> on_reply_;
  const std::function<void(const absl::Status&)> on_end_;
  const std::shared_ptr<bool> live_ = std::make_shared<bool>(true);  // on the loop
  std::shared_ptr<SubscribeCall> self_;                              // until OnDone
  grpc::ClientContext ctx_;
  rpc::PollRequest request_;
  rpc::PollReply reply_;
};

class StreamSubscription final : public GcsClient::Subscription {
 public:
  explicit StreamSubscription(std::shared_ptr<SubscribeCall> call) : call_(std::move(call)) {}
  ~StreamSubscription() override { call_->Cancel(); }

 private:
  const std::shared_ptr<SubscribeCall> call_;
};

template <typename Reply>
using Callback = GcsClient::Callback<Reply>;

// The stubs and how calls are made on them.
class Stubs {
 public:
  Stubs(EventLoop* loop, const std::string& address, std::string token, absl::Duration timeout)
      : loop(loop), token(std::move(token)), timeout(timeout) {
    auto channel = rpc::MakeChannel(address);
    nodes = rpc::NodeInfoGcsService::NewStub(channel);
    resources = rpc::NodeResourceGcsService::NewStub(channel);
    kv = rpc::InternalKvGcsService::NewStub(channel);
    pubsub = rpc::PubSubGcsService::NewStub(channel);
    actors = rpc::ActorGcsService::NewStub(channel);
    task_events = rpc::TaskEventGcsService::NewStub(channel);
    placement_groups = rpc::PlacementGroupGcsService::NewStub(channel);
    jobs = rpc::JobGcsService::NewStub(channel);
    train_runs = rpc::TrainRunGcsService::NewStub(channel);
  }

  template <typename Reply, typename Request, typename Start>
  void Call(Start start, Request request, absl::Duration deadline, Callback<Reply> cb) {
    MANTA_CHECK_THREAD(loop->thread_checker());
    rpc::UnaryCall<Reply>(loop, token, deadline, std::move(request), std::move(start), std::move(cb));
  }
  // For methods idempotent on the GCS: made again when the connection broke.
  template <typename Reply, typename Request, typename Start>
  void RetryingCall(Start start, Request request, absl::Duration deadline, Callback<Reply> cb,
                    rpc::RetryPolicy policy = rpc::RetryPolicy{}) {
    MANTA_CHECK_THREAD(loop->thread_checker());
    rpc::RetryingUnaryCall<Reply>(loop, token, deadline, policy, std::move(request), std::move(start), std::move(cb));
  }

  EventLoop* const loop;
  const std::string token;
  const absl::Duration timeout;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes;
  std::unique_ptr<rpc::NodeResourceGcsService::Stub> resources;
  std::unique_ptr<rpc::InternalKvGcsService::Stub> kv;
  std::unique_ptr<rpc::PubSubGcsService::Stub> pubsub;
  std::unique_ptr<rpc::ActorGcsService::Stub> actors;
  std::unique_ptr<rpc::TaskEventGcsService::Stub> task_events;
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> placement_groups;
  std::unique_ptr<rpc::JobGcsService::Stub> jobs;
  std::unique_ptr<rpc::TrainRunGcsService::Stub> train_runs;
};

class GrpcGcsClient final : public GcsClient {
 public:
  GrpcGcsClient(EventLoop* loop, const std::string& address, std::string token, absl::Duration timeout)
      : stubs_(loop, address, std::move(token), timeout) {}

// A start function for rpc::UnaryCall on `stub`'s callback `Method`.
#define MANTA_ASYNC(stub_member, Method)                                            \
  [stub = stubs_.stub_member.get()](auto* ctx, auto* req, auto* reply, auto done) { \
    stub->async()->Method(ctx, req, reply, std::move(done));                        \
  }

  void GetClusterId(Callback<rpc::GetClusterIdReply> cb) override {
    stubs_.Call<rpc::GetClusterIdReply>(MANTA_ASYNC(nodes, GetClusterId), rpc::GetClusterIdRequest(), stubs_.timeout,
                                        std::move(cb));
  }

  void RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb) override {
    stubs_.Call<rpc::RegisterNodeReply>(MANTA_ASYNC(nodes, RegisterNode), request, stubs_.timeout, std::move(cb));
  }

  void UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration timeout,
                      Callback<rpc::UnregisterNodeReply> cb) override {
    stubs_.RetryingCall<rpc::UnregisterNodeReply>(MANTA_ASYNC(nodes, UnregisterNode), request, timeout, std::move(cb));
  }

  void DrainNode(const rpc::DrainNodeRequest& request, absl::Duration timeout,
                 Callback<rpc::DrainNodeReply> cb) override {
    stubs_.RetryingCall<rpc::DrainNodeReply>(MANTA_ASYNC(nodes, DrainNode), request, timeout, std::move(cb));
  }

  void GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb) override {
    stubs_.Call<rpc::GetAllNodeInfoReply>(MANTA_ASYNC(nodes, GetAllNodeInfo), request, stubs_.timeout, std::move(cb));
  }

  void ReportResources(const rpc::ReportResourcesRequest& request, Callback<rpc::ReportResourcesReply> cb) override {
    stubs_.Call<rpc::ReportResourcesReply>(MANTA_ASYNC(resources, ReportResources), request, stubs_.timeout,
                                           std::move(cb));
  }

  void GetClusterResources(const rpc::GetClusterResourcesRequest& request,
                           Callback<rpc::GetClusterResourcesReply> cb) override {
    stubs_.Call<rpc::GetClusterResourcesReply>(MANTA_ASYNC(resources, GetClusterResources), request, stubs_.timeout,
                                               std::move(cb));
  }

  void Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb) override {
    stubs_.Call<rpc::PollReply>(MANTA_ASYNC(pubsub, Poll), request,
                                stubs_.timeout + absl::Milliseconds(request.max_wait_ms()), std::move(cb));
  }

  std::unique_ptr<Subscription> Subscribe(const rpc::PollRequest& request,
                                          std::function<void(rpc::PollReply&&)> on_reply,
                                          std::function<void(const absl::Status&)> on_end) override {
    MANTA_CHECK_THREAD(stubs_.loop->thread_checker());
    auto call = std::make_shared<SubscribeCall>(stubs_.loop->mailbox(), std::move(on_reply), std::move(on_end));
    call->Start(stubs_.pubsub.get(), stubs_.token, request);
    return std::make_unique<StreamSubscription>(std::move(call));
  }

  void KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb) override {
    rpc::KvPutRequest req = request;
    if (req.request_id().empty()) req.set_request_id(rpc::NewRequestId());
    stubs_.RetryingCall<rpc::KvPutReply>(MANTA_ASYNC(kv, Put), std::move(req), stubs_.timeout, std::move(cb));
  }

  void KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb) override {
    stubs_.Call<rpc::KvGetReply>(MANTA_ASYNC(kv, Get), request, stubs_.timeout, std::move(cb));
  }

  void KvDel(const rpc::KvDelRequest& request, Callback<rpc::KvDelReply> cb) override {
    stubs_.Call<rpc::KvDelReply>(MANTA_ASYNC(kv, Del), request, stubs_.timeout, std::move(cb));
  }

  void KvKeys(const rpc::KvKeysRequest& request, Callback<rpc::KvKeysReply> cb) override {
    stubs_.Call<rpc::KvKeysReply>(MANTA_ASYNC(kv, Keys), request, stubs_.timeout, std::move(cb));
  }

  void ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                           Callback<rpc::ReportWorkerFailureReply> cb) override {
    stubs_.RetryingCall<rpc::ReportWorkerFailureReply>(MANTA_ASYNC(actors, ReportWorkerFailure), request,
                                                       stubs_.timeout, std::move(cb));
  }

  void PublishLogs(const rpc::PublishLogsRequest& request, Callback<rpc::PublishLogsReply> cb) override {
    stubs_.Call<rpc::PublishLogsReply>(MANTA_ASYNC(task_events, PublishLogs), request, stubs_.timeout, std::move(cb));
  }

  void GetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                         Callback<rpc::GetPlacementGroupReply> cb) override {
    stubs_.Call<rpc::GetPlacementGroupReply>(MANTA_ASYNC(placement_groups, GetPlacementGroup), request, stubs_.timeout,
                                             std::move(cb));
  }

  void RegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) override {
    stubs_.RetryingCall<rpc::RegisterActorReply>(MANTA_ASYNC(actors, RegisterActor), request, stubs_.timeout,
                                                 std::move(cb), rpc::RetryPolicy::Patient());
  }

  void GetActorInfo(const rpc::GetActorInfoRequest& request, Callback<rpc::GetActorInfoReply> cb) override {
    stubs_.Call<rpc::GetActorInfoReply>(MANTA_ASYNC(actors, GetActorInfo), request, stubs_.timeout, std::move(cb));
  }

  void GetNamedActor(const rpc::GetNamedActorRequest& request, Callback<rpc::GetNamedActorReply> cb) override {
    stubs_.Call<rpc::GetNamedActorReply>(MANTA_ASYNC(actors, GetNamedActor), request, stubs_.timeout, std::move(cb));
  }

  void KillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) override {
    stubs_.Call<rpc::KillActorReply>(MANTA_ASYNC(actors, KillActor), request, stubs_.timeout, std::move(cb));
  }

  void ListActors(const rpc::ListActorsRequest& request, Callback<rpc::ListActorsReply> cb) override {
    stubs_.Call<rpc::ListActorsReply>(MANTA_ASYNC(actors, ListActors), request, stubs_.timeout, std::move(cb));
  }

  void CreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                            Callback<rpc::CreatePlacementGroupReply> cb) override {
    // A create that waits for the group is held that long at the GCS.
    stubs_.Call<rpc::CreatePlacementGroupReply>(MANTA_ASYNC(placement_groups, CreatePlacementGroup), request,
                                                stubs_.timeout + absl::Milliseconds(request.wait_ready_ms()),
                                                std::move(cb));
  }

  void RemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request, absl::Duration timeout,
                            Callback<rpc::RemovePlacementGroupReply> cb) override {
    stubs_.Call<rpc::RemovePlacementGroupReply>(MANTA_ASYNC(placement_groups, RemovePlacementGroup), request, timeout,
                                                std::move(cb));
  }

  void WaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                               Callback<rpc::WaitPlacementGroupReadyReply> cb) override {
    stubs_.Call<rpc::WaitPlacementGroupReadyReply>(MANTA_ASYNC(placement_groups, WaitPlacementGroupReady), request,
                                                   stubs_.timeout + absl::Milliseconds(request.timeout_ms()),
                                                   std::move(cb));
  }

  void ListPlacementGroups(const rpc::ListPlacementGroupsRequest& request,
                           Callback<rpc::ListPlacementGroupsReply> cb) override {
    stubs_.Call<rpc::ListPlacementGroupsReply>(MANTA_ASYNC(placement_groups, ListPlacementGroups), request,
                                               stubs_.timeout, std::move(cb));
  }

  void AddTaskEvents(const rpc::AddTaskEventsRequest& request, Callback<rpc::AddTaskEventsReply> cb) override {
    stubs_.Call<rpc::AddTaskEventsReply>(MANTA_ASYNC(task_events, AddTaskEvents), request, stubs_.timeout,
                                         std::move(cb));
  }

  void ListTasks(const rpc::ListTasksRequest& request, Callback<rpc::ListTasksReply> cb) override {
    stubs_.Call<rpc::ListTasksReply>(MANTA_ASYNC(task_events, ListTasks), request, stubs_.timeout, std::move(cb));
  }

  void ReportTrainRun(const rpc::ReportTrainRunRequest& request, Callback<rpc::ReportTrainRunReply> cb) override {
    stubs_.Call<rpc::ReportTrainRunReply>(MANTA_ASYNC(train_runs, ReportTrainRun), request, stubs_.timeout,
                                          std::move(cb));
  }

  void ListTrainRuns(const rpc::ListTrainRunsRequest& request, Callback<rpc::ListTrainRunsReply> cb) override {
    stubs_.Call<rpc::ListTrainRunsReply>(MANTA_ASYNC(train_runs, ListTrainRuns), request, stubs_.timeout,
                                         std::move(cb));
  }

  void AddJob(const rpc::AddJobRequest& request, Callback<rpc::AddJobReply> cb) override {
    stubs_.Call<rpc::AddJobReply>(MANTA_ASYNC(jobs, AddJob), request, stubs_.timeout, std::move(cb));
  }

  void MarkJobFinished(const rpc::MarkJobFinishedRequest& request, Callback<rpc::MarkJobFinishedReply> cb) override {
    stubs_.Call<rpc::MarkJobFinishedReply>(MANTA_ASYNC(jobs, MarkJobFinished), request, stubs_.timeout, std::move(cb));
  }

  void GetAllJobInfo(const rpc::GetAllJobInfoRequest& request, Callback<rpc::GetAllJobInfoReply> cb) override {
    stubs_.Call<rpc::GetAllJobInfoReply>(MANTA_ASYNC(jobs, GetAllJobInfo), request, stubs_.timeout, std::move(cb));
  }

 private:
  Stubs stubs_;
};

}  // namespace

std::unique_ptr<GcsClient::Subscription> GcsClient::Subscribe(const rpc::PollRequest& request,
                                                              std::function<void(rpc::PollReply&&)> on_reply,
                                                              std::function<void(const absl::Status&)> on_end) {
  auto subscription = std::make_unique<PollingSubscription>(this, request, std::move(on_reply), std::move(on_end));
  subscription->Poll();
  return subscription;
}

std::unique_ptr<GcsClient> MakeGrpcGcsClient(EventLoop* loop, const std::string& address, std::string token,
                                             absl::Duration timeout) {
  return std::make_unique<GrpcGcsClient>(loop, address, std::move(token), timeout);
}

#undef MANTA_ASYNC

}  // namespace manta::gcs
