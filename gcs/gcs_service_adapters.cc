#include "gcs/gcs_service_adapters.h"

#include <grpcpp/server_builder.h>

#include <atomic>
#include <optional>

#include "common/rpc/grpc_util.h"
#include "common/rpc/server_call.h"
#include "common/rpc/tsan_handoff.h"
#include "gcs/actor_manager.h"
#include "gcs/actor_scheduler.h"
#include "gcs/health_check_manager.h"
#include "gcs/job_manager.h"
#include "gcs/kv_manager.h"
#include "gcs/node_manager.h"
#include "gcs/placement_group_manager.h"
#include "gcs/publisher.h"
#include "gcs/resource_manager.h"
#include "gcs/task_event_manager.h"
#include "gcs/train_run_manager.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::gcs {
namespace {

// One unary method: check the token, post to the loop, run the manager's
// handler there.
#define MANTA_GCS_HANDLER(Method, Req, Reply, manager, handler)                                                      \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const rpc::Req* req, rpc::Reply* reply)         \
      override {                                                                                                     \
    return rpc::Dispatch(ctx, context_->loop, context_->token, [m = context_->manager, req, reply](rpc::Done done) { \
      m->handler(*req, reply, std::move(done));                                                                      \
    });                                                                                                              \
  }

class NodeInfoService : public rpc::NodeInfoGcsService::CallbackService {
 public:
  explicit NodeInfoService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(GetClusterId, GetClusterIdRequest, GetClusterIdReply, nodes, HandleGetClusterId)
  MANTA_GCS_HANDLER(RegisterNode, RegisterNodeRequest, RegisterNodeReply, nodes, HandleRegisterNode)
  MANTA_GCS_HANDLER(UnregisterNode, UnregisterNodeRequest, UnregisterNodeReply, nodes, HandleUnregisterNode)
  MANTA_GCS_HANDLER(GetAllNodeInfo, GetAllNodeInfoRequest, GetAllNodeInfoReply, nodes, HandleGetAllNodeInfo)
  MANTA_GCS_HANDLER(DrainNode, DrainNodeRequest, DrainNodeReply, nodes, HandleDrainNode)

 private:
  const GcsServiceContext* const context_;
};

class ResourceService : public rpc::NodeResourceGcsService::CallbackService {
 public:
  explicit ResourceService(const GcsServiceContext* context) : context_(context) {}
  // Both also involve the actor and placement group schedulers: a report
  // may free room for a waiting actor or group, and those are demands too.
  grpc::ServerUnaryReactor* ReportResources(grpc::CallbackServerContext* ctx, const rpc::ReportResourcesRequest* req,
                                            rpc::ReportResourcesReply* reply) override {
    return rpc::Dispatch(ctx, context_->loop, context_->token, [c = context_, req, reply](rpc::Done done) {
      c->resources->HandleReportResources(*req, reply, [c, req, reply, done = std::move(done)](const absl::Status& s) {
        // Before done(): the request and reply are freed once the call
        // finishes. A malformed node_id has already failed the call.
        auto node = NodeId::FromBinary(req->resources().node_id());
        const bool known = s.ok() && node.ok() && reply->known_node();
        const bool keepalive = req->keepalive();
        done(s);
        if (!known) return;
        if (c->health != nullptr && !c->shutting_down()) c->health->Alive(*node);
        if (!keepalive) c->on_resources_changed(*node);
      });
    });
  }
  grpc::ServerUnaryReactor* GetClusterResources(grpc::CallbackServerContext* ctx,
                                                const rpc::GetClusterResourcesRequest* req,
                                                rpc::GetClusterResourcesReply* reply) override {
    return rpc::Dispatch(ctx, context_->loop, context_->token, [c = context_, req, reply](rpc::Done done) {
      c->resources->HandleGetClusterResources(*req, reply, [c, reply, done = std::move(done)](const absl::Status& s) {
        if (s.ok()) {
          c->actor_scheduler->AppendDemands(reply);
          c->pgs->AppendPending(reply);
        }
        done(s);
      });
    });
  }

 private:
  const GcsServiceContext* const context_;
};

class KvService : public rpc::InternalKvGcsService::CallbackService {
 public:
  explicit KvService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(Put, KvPutRequest, KvPutReply, kv, HandlePut)
  MANTA_GCS_HANDLER(Get, KvGetRequest, KvGetReply, kv, HandleGet)
  MANTA_GCS_HANDLER(Del, KvDelRequest, KvDelReply, kv, HandleDel)
  MANTA_GCS_HANDLER(Keys, KvKeysRequest, KvKeysReply, kv, HandleKeys)

 private:
  const GcsServiceContext* const context_;
};

class ActorService : public rpc::ActorGcsService::CallbackService {
 public:
  explicit ActorService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(ReportWorkerFailure, ReportWorkerFailureRequest, ReportWorkerFailureReply, actors,
                    HandleReportWorkerFailure)
  MANTA_GCS_HANDLER(RegisterActor, RegisterActorRequest, RegisterActorReply, actors, HandleRegisterActor)
  MANTA_GCS_HANDLER(GetActorInfo, GetActorInfoRequest, GetActorInfoReply, actors, HandleGetActorInfo)
  MANTA_GCS_HANDLER(GetNamedActor, GetNamedActorRequest, GetNamedActorReply, actors, HandleGetNamedActor)
  MANTA_GCS_HANDLER(ListActors, ListActorsRequest, ListActorsReply, actors, HandleListActors)
  MANTA_GCS_HANDLER(KillActor, KillActorRequest, KillActorReply, actors, HandleKillActor)

 private:
  const GcsServiceContext* const context_;
};

class JobService : public rpc::JobGcsService::CallbackService {
 public:
  explicit JobService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(AddJob, AddJobRequest, AddJobReply, jobs, HandleAddJob)
  MANTA_GCS_HANDLER(MarkJobFinished, MarkJobFinishedRequest, MarkJobFinishedReply, jobs, HandleMarkJobFinished)
  MANTA_GCS_HANDLER(GetAllJobInfo, GetAllJobInfoRequest, GetAllJobInfoReply, jobs, HandleGetAllJobInfo)

 private:
  const GcsServiceContext* const context_;
};

class TaskEventService : public rpc::TaskEventGcsService::CallbackService {
 public:
  explicit TaskEventService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(AddTaskEvents, AddTaskEventsRequest, AddTaskEventsReply, task_events, HandleAddTaskEvents)
  MANTA_GCS_HANDLER(ListTasks, ListTasksRequest, ListTasksReply, task_events, HandleListTasks)
  MANTA_GCS_HANDLER(PublishLogs, PublishLogsRequest, PublishLogsReply, task_events, HandlePublishLogs)

 private:
  const GcsServiceContext* const context_;
};

class PlacementGroupService : public rpc::PlacementGroupGcsService::CallbackService {
 public:
  explicit PlacementGroupService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(CreatePlacementGroup, CreatePlacementGroupRequest, CreatePlacementGroupReply, pgs,
                    HandleCreatePlacementGroup)
  MANTA_GCS_HANDLER(RemovePlacementGroup, RemovePlacementGroupRequest, RemovePlacementGroupReply, pgs,
                    HandleRemovePlacementGroup)
  MANTA_GCS_HANDLER(GetPlacementGroup, GetPlacementGroupRequest, GetPlacementGroupReply, pgs, HandleGetPlacementGroup)
  MANTA_GCS_HANDLER(ListPlacementGroups, ListPlacementGroupsRequest, ListPlacementGroupsReply, pgs,
                    HandleListPlacementGroups)
  MANTA_GCS_HANDLER(WaitPlacementGroupReady, WaitPlacementGroupReadyRequest, WaitPlacementGroupReadyReply, pgs,
                    HandleWaitPlacementGroupReady)

 private:
  const GcsServiceContext* const context_;
};

class TrainRunService : public rpc::TrainRunGcsService::CallbackService {
 public:
  explicit TrainRunService(const GcsServiceContext* context) : context_(context) {}
  MANTA_GCS_HANDLER(ReportTrainRun, ReportTrainRunRequest, ReportTrainRunReply, train_runs, HandleReportTrainRun)
  MANTA_GCS_HANDLER(ListTrainRuns, ListTrainRunsRequest, ListTrainRunsReply, train_runs, HandleListTrainRuns)

 private:
  const GcsServiceContext* const context_;
};

#undef MANTA_GCS_HANDLER

// Who holds a poll or a stream, from its request: a held poll whose
// connection drops is the fastest sign that its raylet (subscriber_node_id)
// or driver (subscriber_job_id) died. Malformed subscriber ids are ignored
// here; the publisher answers them INVALID_ARGUMENT. Methods other than the
// constructor: on the loop thread.
class PollSubscriber {
 public:
  PollSubscriber(const GcsServiceContext* context, const rpc::PollRequest& req) : context_(context) {
    if (auto node = NodeId::FromBinary(req.subscriber_node_id()); node.ok()) node_ = *node;
    if (auto job = JobId::FromBinary(req.subscriber_job_id()); job.ok()) job_ = *job;
  }
  bool watches_node() const { return node_.has_value(); }
  bool watches_job() const { return job_.has_value(); }
  // Before the poll is handled.
  void Started() const {
    if (context_->shutting_down()) return;
    if (job_.has_value()) context_->jobs->OnDriverPollStarted(*job_);
    if (node_.has_value() && context_->health != nullptr) context_->health->PollStarted(*node_);
  }
  // As the poll is answered or the stream ends.
  void Answered() const {
    if (node_.has_value() && context_->health != nullptr && !context_->shutting_down()) {
      context_->health->PollAnswered(*node_);
    }
  }
  // Its connection dropped.
  void Cancelled() const {
    if (node_.has_value() && context_->health != nullptr && !context_->shutting_down())
      context_->health->Suspect(*node_);
  }
  // The call is over; `lost` when its connection dropped.
  void Ended(bool lost) const {
    if (job_.has_value() && !context_->shutting_down()) context_->jobs->OnDriverPollEnded(*job_, lost);
  }

 private:
  const GcsServiceContext* const context_;
  std::optional<NodeId> node_;
  std::optional<JobId> job_;
};

class PollReactor : public grpc::ServerUnaryReactor {
 public:
  PollReactor(const GcsServiceContext* context, const rpc::PollRequest& req)
      : context_(context), subscriber_(context, req) {}
  const PollSubscriber& subscriber() const { return subscriber_; }
  void OnCancel() override {
    MANTA_GRPC_HANDOFF_AFTER();
    cancelled_ = true;
    if (subscriber_.watches_node()) context_->loop->Post([s = subscriber_] { s.Cancelled(); });
  }
  void OnDone() override {
    MANTA_GRPC_HANDOFF_AFTER();
    if (subscriber_.watches_job()) {
      context_->loop->Post([s = subscriber_, lost = cancelled_.load()] { s.Ended(lost); });
    }
    delete this;
  }

 private:
  const GcsServiceContext* const context_;
  PollSubscriber subscriber_;
  std::atomic<bool> cancelled_{false};
};

// A Subscribe stream. Its state lives on the loop (SubscribeState); the
// reactor only forwards gRPC's callbacks there. The loop calls Finish once,
// never while a write is in flight, and touches the reactor no more after;
// gRPC calls OnDone only after Finish, so no posted callback outlives it in use.
class SubscribeReactor;
struct SubscribeState {
  SubscribeState(const GcsServiceContext* c, const rpc::PollRequest& req) : context(c), subscriber(c, req) {}
  const GcsServiceContext* const context;
  const PollSubscriber subscriber;
  SubscribeReactor* reactor = nullptr;
  int64_t id = 0;          // the publisher's, while subscribed
  grpc::ByteBuffer reply;  // the write in flight
  bool writing = false;
  bool finished = false;
  std::optional<grpc::Status> finish_after_write;
  bool lost = false;
};

// A reply the publisher serialized once for every stream at its cursor,
// written without a copy: the slice holds the bytes until gRPC is done.
grpc::ByteBuffer SharedBytes(std::shared_ptr<const std::string> bytes) {
  auto* held = new std::shared_ptr<const std::string>(std::move(bytes));
  grpc::Slice slice(
      const_cast<char*>((*held)->data()), (*held)->size(),
      [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); }, held);
  return grpc::ByteBuffer(&slice, 1);
}

class SubscribeReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit SubscribeReactor(std::shared_ptr<SubscribeState> state) : state_(std::move(state)) {
    state_->reactor = this;
  }

  // On the loop: subscribes, or ends the stream with the publisher's refusal.
  static void Begin(const std::shared_ptr<SubscribeState>& state, const rpc::PollRequest& request) {
    state->subscriber.Started();
    absl::StatusOr<int64_t> id = state->context->publisher->Subscribe(
        request,
        [weak = std::weak_ptr<SubscribeState>(state)](std::shared_ptr<const std::string> reply) {
          auto s = weak.lock();
          if (s == nullptr) return;
          s->reply = SharedBytes(std::move(reply));
          s->writing = true;
          MANTA_GRPC_HANDOFF_BEFORE();
          s->reactor->StartWrite(&s->reply);
        },
        [weak = std::weak_ptr<SubscribeState>(state)] {
          if (auto s = weak.lock()) End(s, grpc::Status::OK);
        });
    if (!id.ok()) return End(state, rpc::ToGrpcStatus(id.status()));
    state->id = *id;
  }

  // On the loop: leaves the publisher and finishes, after the write in flight.
  static void End(const std::shared_ptr<SubscribeState>& state, grpc::Status status) {
    if (state->finished || state->finish_after_write.has_value()) return;
    if (state->id != 0) state->context->publisher->Unsubscribe(state->id);
    state->id = 0;
    state->subscriber.Answered();
    if (state->writing) {
      state->finish_after_write = std::move(status);
      return;
    }
    state->finished = true;
    MANTA_GRPC_HANDOFF_BEFORE();
    state->reactor->Finish(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    MANTA_GRPC_HANDOFF_AFTER();
    state_->context->loop->Post([state = state_, ok] {
      state->writing = false;
      if (state->finish_after_write.has_value()) {
        state->finished = true;
        MANTA_GRPC_HANDOFF_BEFORE();
        return state->reactor->Finish(*state->finish_after_write);
      }
      if (!ok) return End(state, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the subscriber went away"));
      if (state->id != 0) state->context->publisher->Sent(state->id);
    });
  }
  void OnCancel() override {
    MANTA_GRPC_HANDOFF_AFTER();
    state_->context->loop->Post([state = state_] {
      state->lost = true;
      state->subscriber.Cancelled();
      End(state, grpc::Status::CANCELLED);
    });
  }
  void OnDone() override {
    MANTA_GRPC_HANDOFF_AFTER();
    state_->context->loop->Post([state = std::move(state_)] { state->subscriber.Ended(state->lost); });
    delete this;
  }

 private:
  std::shared_ptr<SubscribeState> state_;
};

// Subscribe is raw: its replies are written as the publisher serialized them.
class PubSubService : public rpc::PubSubGcsService::WithRawCallbackMethod_Subscribe<
                          rpc::PubSubGcsService::WithCallbackMethod_Poll<rpc::PubSubGcsService::Service>> {
 public:
  explicit PubSubService(const GcsServiceContext* context) : context_(context) {}
  grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* ctx, const rpc::PollRequest* req,
                                 rpc::PollReply* reply) override {
    grpc::Status auth = rpc::CheckAuth(*ctx, context_->token);
    if (!auth.ok()) {
      auto* reactor = new PollReactor(context_, rpc::PollRequest());
      reactor->Finish(auth);
      return reactor;
    }
    auto* reactor = new PollReactor(context_, *req);
    context_->loop->Post([c = context_, req, reply, reactor] {
      reactor->subscriber().Started();
      c->publisher->HandlePoll(*req, reply, [reactor](const absl::Status& s) {
        reactor->subscriber().Answered();
        MANTA_GRPC_HANDOFF_BEFORE();  // OnDone reads the reactor on gRPC's thread
        reactor->Finish(rpc::ToGrpcStatus(s));
      });
    });
    return reactor;
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Subscribe(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* raw) override {
    rpc::PollRequest req;
    grpc::Status status = rpc::CheckAuth(*ctx, context_->token);
    if (status.ok()) {
      grpc::ByteBuffer copy = *raw;  // Deserialize consumes it
      if (!grpc::SerializationTraits<rpc::PollRequest>::Deserialize(&copy, &req).ok()) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed PollRequest");
      }
    }
    auto state = std::make_shared<SubscribeState>(context_, status.ok() ? req : rpc::PollRequest());
    auto* reactor = new SubscribeReactor(state);
    if (!status.ok()) {
      state->finished = true;
      reactor->Finish(status);
      return reactor;
    }
    context_->loop->Post([state, req = std::move(req)] { SubscribeReactor::Begin(state, req); });
    return reactor;
  }

 private:
  const GcsServiceContext* const context_;
};

}  // namespace

GcsServices::GcsServices(GcsServiceContext context) : context_(std::move(context)) {
  services_.push_back(std::make_unique<NodeInfoService>(&context_));
  services_.push_back(std::make_unique<ResourceService>(&context_));
  services_.push_back(std::make_unique<KvService>(&context_));
  services_.push_back(std::make_unique<PubSubService>(&context_));
  services_.push_back(std::make_unique<ActorService>(&context_));
  services_.push_back(std::make_unique<JobService>(&context_));
  services_.push_back(std::make_unique<TaskEventService>(&context_));
  services_.push_back(std::make_unique<PlacementGroupService>(&context_));
  services_.push_back(std::make_unique<TrainRunService>(&context_));
}

GcsServices::~GcsServices() = default;

void GcsServices::RegisterWith(grpc::ServerBuilder* builder) {
  for (const auto& service : services_) builder->RegisterService(service.get());
}

}  // namespace manta::gcs
