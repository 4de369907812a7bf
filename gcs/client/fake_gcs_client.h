// FakeGcsClient: the GCS's tables in memory behind the GcsClient interface,
// for unit tests of what talks to the GCS (the raylet's GCS link, the
// submitters). Replies come on the loop, never inline, as gRPC's would.
//
// What it keeps: the cluster id and incarnation, the node table (a dead
// node cannot register again, a node naming another cluster is refused),
// resource reports, the pub/sub log (NODE_INFO, NODE_RESOURCES, ACTOR) with
// held polls, KV, actors, placement groups, jobs, task events and training
// runs. What the test controls:
// reachability (every call fails UNAVAILABLE while down), a restart (a new
// incarnation; the tables stay, as they do with persistent storage),
// serving another cluster, declaring a node dead, and how many times each
// method was called.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "gcs/client/gcs_client.h"

namespace manta::gcs {

class FakeGcsClient : public GcsClient {
 public:
  explicit FakeGcsClient(EventLoop* loop);
  ~FakeGcsClient() override;

  // ---- GcsClient ----
  void GetClusterId(Callback<rpc::GetClusterIdReply> cb) override;
  void RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb) override;
  void UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration timeout,
                      Callback<rpc::UnregisterNodeReply> cb) override;
  void DrainNode(const rpc::DrainNodeRequest& request, absl::Duration timeout,
                 Callback<rpc::DrainNodeReply> cb) override;
  void GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb) override;
  void ReportResources(const rpc::ReportResourcesRequest& request, Callback<rpc::ReportResourcesReply> cb) override;
  void GetClusterResources(const rpc::GetClusterResourcesRequest& request,
                           Callback<rpc::GetClusterResourcesReply> cb) override;
  void Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb) override;
  void PublishLogs(const rpc::PublishLogsRequest& request, Callback<rpc::PublishLogsReply> cb) override;
  void KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb) override;
  void KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb) override;
  void KvDel(const rpc::KvDelRequest& request, Callback<rpc::KvDelReply> cb) override;
  void KvKeys(const rpc::KvKeysRequest& request, Callback<rpc::KvKeysReply> cb) override;
  void RegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) override;
  void GetActorInfo(const rpc::GetActorInfoRequest& request, Callback<rpc::GetActorInfoReply> cb) override;
  void GetNamedActor(const rpc::GetNamedActorRequest& request, Callback<rpc::GetNamedActorReply> cb) override;
  // Without restart the actor is DEAD; with, RESTARTING (published).
  void KillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) override;
  void ListActors(const rpc::ListActorsRequest& request, Callback<rpc::ListActorsReply> cb) override;
  void ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                           Callback<rpc::ReportWorkerFailureReply> cb) override;
  void GetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                         Callback<rpc::GetPlacementGroupReply> cb) override;
  // The fake places nothing: a group is CREATED at once (PutPlacementGroup
  // sets any other state), and a wait is answered at once.
  void CreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                            Callback<rpc::CreatePlacementGroupReply> cb) override;
  void RemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request, absl::Duration timeout,
                            Callback<rpc::RemovePlacementGroupReply> cb) override;
  void WaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                               Callback<rpc::WaitPlacementGroupReadyReply> cb) override;
  void ListPlacementGroups(const rpc::ListPlacementGroupsRequest& request,
                           Callback<rpc::ListPlacementGroupsReply> cb) override;
  void AddTaskEvents(const rpc::AddTaskEventsRequest& request, Callback<rpc::AddTaskEventsReply> cb) override;
  void ListTasks(const rpc::ListTasksRequest& request, Callback<rpc::ListTasksReply> cb) override;
  void ReportTrainRun(const rpc::ReportTrainRunRequest& request, Callback<rpc::ReportTrainRunReply> cb) override;
  void ListTrainRuns(const rpc::ListTrainRunsRequest& request, Callback<rpc::ListTrainRunsReply> cb) override;
  void AddJob(const rpc::AddJobRequest& request, Callback<rpc::AddJobReply> cb) override;
  void MarkJobFinished(const rpc::MarkJobFinishedRequest& request, Callback<rpc::MarkJobFinishedReply> cb) override;
  void GetAllJobInfo(const rpc::GetAllJobInfoRequest& request, Callback<rpc::GetAllJobInfoReply> cb) override;

  // ---- control (loop thread) ----
  // Down: every call fails UNAVAILABLE and held polls end so.
  void SetReachable(bool reachable);
  // A new incarnation; held polls end with it.
  void Restart();
  // From now on the GCS serves another cluster (a wiped store).
  void ServeAnotherCluster();
  // The node is DEAD (published), as the health checker declares it.
  void DeclareDead(const std::string& node_id, const std::string& reason);
  // The next call of `method` fails with `status` (once).
  void FailNext(const std::string& method, absl::Status status) { fail_next_[method] = std::move(status); }
  // The next call of `method` is answered only at ReleaseDelayed() (once).
  void DelayNext(const std::string& method) { delay_next_.insert(method); }
  void ReleaseDelayed();
  int delayed() const { return static_cast<int>(delayed_.size()); }
  // Publishes a message, answering held polls.
  void Publish(rpc::PubMessage message);
  // Drops the retained messages up to `sequence`: a poll from before gets a gap.
  void ForgetUpTo(int64_t sequence);
  void PutActor(const rpc::ActorInfo& info);
  void PutPlacementGroup(const rpc::PlacementGroupInfo& info);

  // ---- inspection (loop thread) ----
  const std::string& cluster_id() const { return cluster_id_; }
  const std::string& incarnation() const { return incarnation_; }
  // The node's entry; nullptr when it never registered.
  const rpc::NodeInfo* node(const std::string& node_id) const;
  int calls(const std::string& method) const;
  int held_polls() const { return static_cast<int>(held_.size()); }
  int64_t last_sequence() const { return next_sequence_ - 1; }
  // ReportResources calls that were only a sign of life.
  int keepalives() const { return keepalives_; }
  const std::vector<rpc::ReportWorkerFailureRequest>& worker_failures() const { return worker_failures_; }

 private:
  struct HeldPoll {
    rpc::PollRequest request;
    Callback<rpc::PollReply> cb;
    std::unique_ptr<EventLoop::Timer> timer;
  };
  // Counts the call; false (and answers UNAVAILABLE) while unreachable.
  template <typename Reply>
  bool Admit(const std::string& method, Callback<Reply>& cb);
  template <typename Reply>
  void Answer(Callback<Reply> cb, absl::Status s, Reply reply);
  // The reply to `request` from what is retained; empty messages when
  // nothing is new.
  rpc::PollReply Collect(const rpc::PollRequest& request) const;
  void AnswerHeld();
  void EndHeld(const absl::Status& s);
  void PublishNode(const rpc::NodeInfo& info);
  // By id, or (id empty) the group not removed with the name in the namespace.
  const rpc::PlacementGroupInfo* FindGroup(const std::string& id, const std::string& name,
                                           const std::string& ray_namespace) const;

  EventLoop* const loop_;
  std::string cluster_id_;
  std::string incarnation_;
  bool reachable_ = true;
  std::map<std::string, int> calls_;
  std::map<std::string, absl::Status> fail_next_;
  std::set<std::string> delay_next_;
  int keepalives_ = 0;
  std::vector<std::function<void()>> delayed_;             // answers held back
  std::map<std::string, rpc::NodeInfo> nodes_;             // by binary id
  std::map<std::string, rpc::NodeResources> resources_;    // by binary id
  std::map<std::string, std::string> kv_;                  // ns + '\0' + key
  std::map<std::string, rpc::ActorInfo> actors_;           // by binary id
  std::map<std::string, rpc::PlacementGroupInfo> groups_;  // by binary id
  std::map<std::string, rpc::JobInfo> jobs_;               // by binary id
  std::map<std::string, rpc::TaskEvent> tasks_;            // the latest, by task id
  std::map<std::string, rpc::TrainRunInfo> train_runs_;    // by run id
  std::vector<rpc::ReportWorkerFailureRequest> worker_failures_;
  std::deque<rpc::PubMessage> log_;  // retained, by sequence
  int64_t next_sequence_ = 1;
  int64_t forgotten_up_to_ = 0;
  std::vector<std::unique_ptr<HeldPoll>> held_;
  int next_job_ = 1;
};

}  // namespace manta::gcs
