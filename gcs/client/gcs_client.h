// GcsClient: the one way to the GCS — nodes, resources, actors, placement
// groups, jobs, task events, training runs, KV and pub/sub — as asynchronous calls whose callbacks run
// on the owner's EventLoop, never inline. Two implementations: over gRPC
// (MakeGrpcGcsClient: every call has a deadline and carries the cluster
// token; calls idempotent on the GCS — UnregisterNode, DrainNode, KvPut,
// ReportWorkerFailure, RegisterActor — are made again when their
// connection breaks; a registration patiently, as a GCS restart takes time), and FakeGcsClient (fake_gcs_client.h), the
// GCS's tables in memory, for unit tests. Call from the loop thread only.
//
//   std::unique_ptr<GcsClient> gcs = MakeGrpcGcsClient(&loop, "127.0.0.1:6379", token);
//   gcs->RegisterNode(request, [](const absl::Status& s, rpc::RegisterNodeReply r) { ... });
//
// Threads that may block (a user's thread in the core worker, the CLI, the
// dashboard's job store) call through SyncGcsClient (sync_gcs_client.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class GcsClient {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  virtual ~GcsClient() = default;

  // ---- nodes ----
  virtual void GetClusterId(Callback<rpc::GetClusterIdReply> cb) = 0;
  virtual void RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb) = 0;
  virtual void UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration timeout,
                              Callback<rpc::UnregisterNodeReply> cb) = 0;
  // A raylet drains itself (SIGTERM with a drain grace).
  virtual void DrainNode(const rpc::DrainNodeRequest& request, absl::Duration timeout,
                         Callback<rpc::DrainNodeReply> cb) = 0;
  virtual void GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb) = 0;
  // ---- resources ----
  virtual void ReportResources(const rpc::ReportResourcesRequest& request, Callback<rpc::ReportResourcesReply> cb) = 0;
  virtual void GetClusterResources(const rpc::GetClusterResourcesRequest& request,
                                   Callback<rpc::GetClusterResourcesReply> cb) = 0;
  // ---- pub/sub ----
  // A long poll: answered when there are messages, or after the request's
  // max_wait_ms (the deadline is that plus the call timeout).
  virtual void Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb) = 0;
  // A poll that stays (raylets): `on_reply` gets each reply in order, as a
  // poll from the previous reply's last_sequence would (the GCS moves the
  // cursor on), and an empty one each max_wait_ms when nothing is new;
  // `on_end` once, when the stream ends: the GCS stopped, refused it or was
  // unreachable. Both on the loop, never after the handle is destroyed,
  // which ends the stream. Over gRPC one Subscribe stream; by default (the
  // fake) a poll after each reply.
  class Subscription {
   public:
    virtual ~Subscription() = default;
  };
  virtual std::unique_ptr<Subscription> Subscribe(const rpc::PollRequest& request,
                                                  std::function<void(rpc::PollReply&&)> on_reply,
                                                  std::function<void(const absl::Status&)> on_end);
  // A raylet forwards worker output to the job's LOGS channel.
  virtual void PublishLogs(const rpc::PublishLogsRequest& request, Callback<rpc::PublishLogsReply> cb) = 0;
  // ---- KV ----
  // A request without request_id gets one, so a retry is answered as the
  // first attempt was.
  virtual void KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb) = 0;
  virtual void KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb) = 0;
  virtual void KvDel(const rpc::KvDelRequest& request, Callback<rpc::KvDelReply> cb) = 0;
  virtual void KvKeys(const rpc::KvKeysRequest& request, Callback<rpc::KvKeysReply> cb) = 0;
  // ---- actors ----
  virtual void RegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) = 0;
  virtual void GetActorInfo(const rpc::GetActorInfoRequest& request, Callback<rpc::GetActorInfoReply> cb) = 0;
  // NotFound when no live actor has the name in the namespace.
  virtual void GetNamedActor(const rpc::GetNamedActorRequest& request, Callback<rpc::GetNamedActorReply> cb) = 0;
  // With a request_id, a kill made again (with restart) restarts once.
  virtual void KillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) = 0;
  virtual void ListActors(const rpc::ListActorsRequest& request, Callback<rpc::ListActorsReply> cb) = 0;
  // A raylet reports that one of its workers exited.
  virtual void ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                   Callback<rpc::ReportWorkerFailureReply> cb) = 0;
  // ---- placement groups ----
  // A raylet asks whether a group its waiting leases name still exists.
  virtual void GetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                                 Callback<rpc::GetPlacementGroupReply> cb) = 0;
  // AlreadyExists when the name (or the id) is taken.
  virtual void CreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                    Callback<rpc::CreatePlacementGroupReply> cb) = 0;
  // Answered once the group's nodes have returned its bundles: `timeout`.
  virtual void RemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request, absl::Duration timeout,
                                    Callback<rpc::RemovePlacementGroupReply> cb) = 0;
  // Held until the group is ready or the request's timeout_ms has passed
  // (the deadline is that plus the call timeout).
  virtual void WaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                                       Callback<rpc::WaitPlacementGroupReadyReply> cb) = 0;
  virtual void ListPlacementGroups(const rpc::ListPlacementGroupsRequest& request,
                                   Callback<rpc::ListPlacementGroupsReply> cb) = 0;
  // ---- task events ----
  virtual void AddTaskEvents(const rpc::AddTaskEventsRequest& request, Callback<rpc::AddTaskEventsReply> cb) = 0;
  virtual void ListTasks(const rpc::ListTasksRequest& request, Callback<rpc::ListTasksReply> cb) = 0;
  // ---- training runs ----
  virtual void ReportTrainRun(const rpc::ReportTrainRunRequest& request, Callback<rpc::ReportTrainRunReply> cb) = 0;
  virtual void ListTrainRuns(const rpc::ListTrainRunsRequest& request, Callback<rpc::ListTrainRunsReply> cb) = 0;
  // ---- jobs ----
  virtual void AddJob(const rpc::AddJobRequest& request, Callback<rpc::AddJobReply> cb) = 0;
  virtual void MarkJobFinished(const rpc::MarkJobFinishedRequest& request, Callback<rpc::MarkJobFinishedReply> cb) = 0;
  // With request.job_id set: that job only (no entry when unknown).
  virtual void GetAllJobInfo(const rpc::GetAllJobInfoRequest& request, Callback<rpc::GetAllJobInfoReply> cb) = 0;
};

// The gRPC implementation, on `loop`, to the GCS at `address` ("ip:port").
// `timeout`: each call's deadline (a poll's comes on top of its wait).
std::unique_ptr<GcsClient> MakeGrpcGcsClient(EventLoop* loop, const std::string& address, std::string token,
                                             absl::Duration timeout = absl::Seconds(5));

}  // namespace manta::gcs
