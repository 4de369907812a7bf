// The managers of a GCS wired as GcsServer wires them, over an in-memory
// store and fake raylet and worker clients: for tests and fuzz targets that
// call the handlers directly, with no gRPC in between.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gcs/actor_manager.h"
#include "gcs/fake_core_worker_client.h"
#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/job_manager.h"
#include "gcs/kv_manager.h"
#include "gcs/node_manager.h"
#include "gcs/placement_group_manager.h"
#include "gcs/resource_manager.h"
#include "gcs/task_event_manager.h"
#include "gcs/test_util.h"
#include "gcs/train_run_manager.h"

namespace manta::gcs {

class TestManagers {
 public:
  TestManagers() {
    actor_scheduler_ = std::make_unique<ActorScheduler>([this](const NodeId& n) { return resources_.Get(n); },
                                                        &raylets_, &workers_, timers_.RunAfter());
    actors_ = std::make_unique<ActorManager>(&store_, &pub_, actor_scheduler_.get(), &raylets_, &workers_, &jobs_);
    pg_scheduler_ = std::make_unique<PlacementGroupScheduler>(
        [this](const NodeId& n) { return resources_.Get(n); },
        [this](const rpc::NodeResources& r) { resources_.Apply(r); }, &raylets_);
    pgs_ = std::make_unique<PlacementGroupManager>(&store_, &pub_, pg_scheduler_.get(), &raylets_, timers_.RunAfter());
    nodes_.AddNodeAddedListener([this](const rpc::NodeInfo& info) {
      resources_.OnNodeAdded(info);
      actor_scheduler_->OnNodeAdded(info);
      pgs_->OnNodeAdded(info);
    });
    for (absl::Status s : {jobs_.Initialize(), actors_->Initialize(), pgs_->Initialize()}) {
      if (!s.ok()) {
        std::fprintf(stderr, "the GCS managers did not initialize: %s\n", s.ToString().c_str());
        std::abort();
      }
    }
  }

  static void MakeNodeInfo(const NodeId& id, const std::map<std::string, double>& total, rpc::NodeInfo* n) {
    n->set_node_id(id.Binary());
    n->set_node_ip("10.0.0.2");
    n->set_node_manager_port(7000);
    n->mutable_resources_total()->insert(total.begin(), total.end());
  }

  // Answers what the managers asked of raylets: syncs, prepares and commits
  // succeed, cancels are counted and answered.
  void AnswerRaylets() {
    while (!raylets_.releases.empty() || !raylets_.prepares.empty() || !raylets_.commits.empty() ||
           !raylets_.cancels.empty()) {
      for (auto& c : std::exchange(raylets_.releases, {})) c.cb(absl::OkStatus(), {});
      for (auto& c : std::exchange(raylets_.prepares, {})) {
        rpc::PrepareBundlesReply reply;
        reply.set_success(true);
        reply.set_committed(c.request.commit());
        c.cb(absl::OkStatus(), std::move(reply));
      }
      for (auto& c : std::exchange(raylets_.commits, {})) c.cb(absl::OkStatus(), {});
      for (auto& c : std::exchange(raylets_.cancels, {})) {
        ++cancels_;
        c.cb(absl::OkStatus(), {});
      }
      Pump(loop_);
    }
  }

  // Everything the managers hold or have told anyone, as text.
  std::string Snapshot() {
    std::string out;
    rpc::GetAllNodeInfoReply nodes;
    nodes_.HandleGetAllNodeInfo({}, &nodes, [](const absl::Status&) {});
    rpc::GetClusterResourcesReply resources;
    resources_.HandleGetClusterResources({}, &resources, [](const absl::Status&) {});
    rpc::KvKeysRequest keys_req;
    rpc::KvKeysReply keys;
    kv_.HandleKeys(keys_req, &keys, [](const absl::Status&) {});
    rpc::GetAllJobInfoReply jobs;
    jobs_.HandleGetAllJobInfo({}, &jobs, [](const absl::Status&) {});
    rpc::ListActorsReply actors;
    actors_->HandleListActors({}, &actors, [](const absl::Status&) {});
    rpc::ListPlacementGroupsReply groups;
    pgs_->HandleListPlacementGroups({}, &groups, [](const absl::Status&) {});
    rpc::ListTasksReply tasks;
    task_events_.HandleListTasks({}, &tasks, [](const absl::Status&) {});
    rpc::ListTrainRunsRequest runs_req;
    runs_req.set_with_metrics(true);
    rpc::ListTrainRunsReply runs;
    train_runs_.HandleListTrainRuns(runs_req, &runs, [](const absl::Status&) {});
    for (const google::protobuf::Message* m : std::initializer_list<const google::protobuf::Message*>{
             &nodes, &resources, &keys, &jobs, &actors, &groups, &tasks, &runs}) {
      out += m->DebugString();
    }
    absl::StrAppend(&out, "published=", pub_.last_sequence(), " leases=", raylets_.leases.size(),
                    " returned=", raylets_.returned.size(), " killed_jobs=", raylets_.killed_jobs.size(),
                    " prepares=", raylets_.prepares.size(), " commits=", raylets_.commits.size(), " cancels=", cancels_,
                    " drains=", raylets_.drains.size(), " pushes=", workers_.pushes.size(),
                    " worker_kills=", workers_.kills.size(), " exits=", workers_.exits.size());
    return out;
  }

 protected:
  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeRayletClientPool raylets_;
  FakeCoreWorkerClientPool workers_;
  FakeTimers timers_;
  NodeManager nodes_{&store_, &pub_, ClusterId::FromRandom(), "inc", &raylets_};
  ResourceManager resources_{&nodes_, &pub_, timers_.RunAfter()};
  KvManager kv_{&store_};
  JobManager jobs_{&store_, &pub_, &raylets_, [] { return std::vector<rpc::NodeInfo>(); }, timers_.RunAfter()};
  TaskEventManager task_events_{&pub_};
  TrainRunManager train_runs_{&store_, &jobs_};
  std::unique_ptr<ActorScheduler> actor_scheduler_;
  std::unique_ptr<ActorManager> actors_;
  std::unique_ptr<PlacementGroupScheduler> pg_scheduler_;
  std::unique_ptr<PlacementGroupManager> pgs_;
  int cancels_ = 0;
};

}  // namespace manta::gcs
