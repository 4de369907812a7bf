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
        bool changed = s.ok() && node.ok() && reply->known_node();
        done(s);
        if (changed) c->on_resources_changed(*node);
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

// Polls get their own reactor: a held poll whose connection drops is the
// fastest sign that its raylet (subscriber_node_id) or driver
// (subscriber_job_id) died. Malformed subscriber ids are ignored here; the
// publisher answers them INVALID_ARGUMENT.
class PollReactor : public grpc::ServerUnaryReactor {
 public:
  PollReactor(const GcsServiceContext* context, const rpc::PollRequest& req) : context_(context) {
    if (auto node = NodeId::FromBinary(req.subscriber_node_id()); node.ok()) node_ = *node;
    if (auto job = JobId::FromBinary(req.subscriber_job_id()); job.ok()) job_ = *job;
  }
  // On the loop thread, before the poll is handled.
  void Started() {
    if (context_->shutting_down()) return;
    if (job_.has_value()) context_->jobs->OnDriverPollStarted(*job_);
    if (node_.has_value() && context_->health != nullptr) context_->health->PollStarted(*node_);
  }
  // On the loop thread, as the poll is answered.
  void Answered() {
    if (node_.has_value() && context_->health != nullptr && !context_->shutting_down()) {
      context_->health->PollAnswered(*node_);
    }
  }
  void OnCancel() override {
    MANTA_GRPC_HANDOFF_AFTER();
    cancelled_ = true;
    if (!node_.has_value()) return;
    context_->loop->Post([c = context_, node = *node_] {
      if (c->health != nullptr && !c->shutting_down()) c->health->Suspect(node);
    });
  }
  void OnDone() override {
    MANTA_GRPC_HANDOFF_AFTER();
    if (job_.has_value()) {
      context_->loop->Post([c = context_, job = *job_, lost = cancelled_.load()] {
        if (!c->shutting_down()) c->jobs->OnDriverPollEnded(job, lost);
      });
    }
    delete this;
  }

 private:
  const GcsServiceContext* const context_;
  std::optional<NodeId> node_;
  std::optional<JobId> job_;
  std::atomic<bool> cancelled_{false};
};

class PubSubService : public rpc::PubSubGcsService::CallbackService {
 public:
  explicit PubSubService(const GcsServiceContext* context) : context_(context) {}
  grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* ctx, const rpc::PollRequest* req,
                                 rpc::PollReply* reply) override {
    grpc::Status auth = rpc::CheckAuth(*ctx, context_->token);
    if (!auth.ok()) {
      rpc::PollRequest unauthenticated;
      auto* reactor = new PollReactor(context_, unauthenticated);
      reactor->Finish(auth);
      return reactor;
    }
    auto* reactor = new PollReactor(context_, *req);
    context_->loop->Post([c = context_, req, reply, reactor] {
      reactor->Started();
      c->publisher->HandlePoll(*req, reply, [reactor](const absl::Status& s) {
        reactor->Answered();
        MANTA_GRPC_HANDOFF_BEFORE();  // OnDone reads the reactor on gRPC's thread
        reactor->Finish(rpc::ToGrpcStatus(s));
      });
    });
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
