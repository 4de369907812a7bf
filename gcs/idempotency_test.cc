// Every mutating GCS handler, called twice with the same request (a retry
// whose reply was lost): the second call answers as the first did and
// changes nothing — no second node, job, actor, group, kill, restart or
// publication, and no second call to a raylet or worker.
#include "absl/strings/str_cat.h"
#include "gcs/test_managers.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using google::protobuf::util::MessageDifferencer;

// The managers of a GCS, wired as GcsServer wires them, over fakes.
class IdempotencyTest : public ::testing::Test, protected TestManagers {
 protected:
  // Calls `handle` twice with the same request and checks that the second
  // call answered as the first and left Snapshot() as the first left it.
  // `settle` runs after each call (answers what the call started).
  template <typename Reply>
  Reply Twice(const std::function<void(Reply*, rpc::Done)>& handle, const std::function<void()>& settle = {}) {
    Reply first, second;
    absl::Status s1 = absl::UnknownError("no reply"), s2 = absl::UnknownError("no reply");
    handle(&first, [&s1](const absl::Status& s) { s1 = s; });
    Pump(loop_);
    if (settle) settle();
    std::string after_first = Snapshot();
    handle(&second, [&s2](const absl::Status& s) { s2 = s; });
    Pump(loop_);
    if (settle) settle();
    EXPECT_EQ(s1, s2);
    EXPECT_TRUE(MessageDifferencer::Equals(first, second)) << first.DebugString() << " vs " << second.DebugString();
    EXPECT_EQ(after_first, Snapshot());
    return first;
  }

  NodeId AddNode(std::map<std::string, double> total = {{"CPU", 4}}) {
    NodeId id = NodeId::FromRandom();
    rpc::RegisterNodeRequest req;
    MakeNodeInfo(id, total, req.mutable_node_info());
    rpc::RegisterNodeReply reply;
    nodes_.HandleRegisterNode(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
    Pump(loop_);
    AnswerRaylets();
    return id;
  }
  rpc::TaskSpec ActorSpec(int max_restarts) {
    rpc::TaskSpec s;
    s.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    s.set_actor_id(ActorId::FromRandom().Binary());
    s.set_job_id(JobIdFromInt(1).Binary());
    s.set_function_name("Counter::Create");
    (*s.mutable_resources())["CPU"] = 1;
    s.mutable_actor_creation()->set_max_restarts(max_restarts);
    return s;
  }
  // Registers an actor and brings it up on a granted lease.
  rpc::TaskSpec AliveActor(int max_restarts) {
    rpc::TaskSpec spec = ActorSpec(max_restarts);
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = spec;
    rpc::RegisterActorReply reply;
    actors_->HandleRegisterActor(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
    Pump(loop_);
    GrantAndCreate();
    EXPECT_EQ(actors_->Get(*ActorId::FromBinary(spec.actor_id()))->state(), rpc::ActorInfo::ALIVE);
    return spec;
  }
  void GrantAndCreate() {
    auto lease = raylets_.PopLease();
    rpc::RequestWorkerLeaseReply granted;
    granted.set_outcome(rpc::RequestWorkerLeaseReply::GRANTED);
    granted.mutable_worker_address()->set_ip("10.0.0.2");
    granted.mutable_worker_address()->set_port(9000 + next_port_++);
    granted.mutable_worker_address()->set_worker_id(WorkerId::FromRandom().Binary());
    granted.set_worker_pid(100);
    lease.cb(absl::OkStatus(), std::move(granted));
    workers_.PopPush().cb(absl::OkStatus(), {});
  }

  int next_port_ = 0;
};

// ---------------------------------------------------------------- nodes

TEST_F(IdempotencyTest, RegisterNode) {
  rpc::RegisterNodeRequest req;
  MakeNodeInfo(NodeId::FromRandom(), {{"CPU", 2}}, req.mutable_node_info());
  auto reply = Twice<rpc::RegisterNodeReply>(
      [&](auto* reply, rpc::Done done) { nodes_.HandleRegisterNode(req, reply, std::move(done)); },
      [this] { AnswerRaylets(); });
  EXPECT_FALSE(reply.cluster_id().empty());
  EXPECT_EQ(nodes_.num_alive(), 1u);
}

TEST_F(IdempotencyTest, UnregisterNode) {
  NodeId node = AddNode();
  rpc::UnregisterNodeRequest req;
  req.set_node_id(node.Binary());
  req.set_reason("done");
  Twice<rpc::UnregisterNodeReply>(
      [&](auto* reply, rpc::Done done) { nodes_.HandleUnregisterNode(req, reply, std::move(done)); });
  EXPECT_EQ(nodes_.num_alive(), 0u);
}

TEST_F(IdempotencyTest, DrainNode) {
  NodeId node = AddNode();
  rpc::DrainNodeRequest req;
  req.set_node_id(node.Binary());
  req.set_reason("preemption");
  req.set_deadline_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(1)));
  auto reply = Twice<rpc::DrainNodeReply>(
      [&](auto* reply, rpc::Done done) { nodes_.HandleDrainNode(req, reply, std::move(done)); });
  EXPECT_TRUE(reply.accepted());
  EXPECT_TRUE(nodes_.GetAliveNode(node)->draining());
  EXPECT_EQ(raylets_.drains.size(), 1u);
}

TEST_F(IdempotencyTest, ReportResources) {
  NodeId node = AddNode({{"CPU", 4}});
  rpc::ReportResourcesRequest req;
  req.mutable_resources()->set_node_id(node.Binary());
  req.mutable_resources()->set_version(7);
  (*req.mutable_resources()->mutable_total())["CPU"] = 4;
  (*req.mutable_resources()->mutable_available())["CPU"] = 1;
  (*req.add_demands()->mutable_shape())["CPU"] = 2;
  auto reply = Twice<rpc::ReportResourcesReply>(
      [&](auto* reply, rpc::Done done) { resources_.HandleReportResources(req, reply, std::move(done)); });
  EXPECT_TRUE(reply.known_node());
  EXPECT_EQ(resources_.Get(node)->available().at("CPU"), 1);
}

// ---------------------------------------------------------------- key/value

TEST_F(IdempotencyTest, KvPutAndDel) {
  rpc::KvPutRequest put;
  put.set_ns("ns");
  put.set_key("k");
  put.set_value("v1");
  put.set_request_id(rpc::NewRequestId());
  auto added = Twice<rpc::KvPutReply>([&](auto* reply, rpc::Done done) { kv_.HandlePut(put, reply, std::move(done)); });
  EXPECT_TRUE(added.added());  // the retry too, though the key now exists
  put.set_overwrite(true);
  put.set_value("v2");
  put.set_request_id(rpc::NewRequestId());
  Twice<rpc::KvPutReply>([&](auto* reply, rpc::Done done) { kv_.HandlePut(put, reply, std::move(done)); });
  EXPECT_EQ(*kv_.Find("ns", "k"), "v2");

  rpc::KvDelRequest del;
  del.set_ns("ns");
  del.set_key("k");
  del.set_request_id(rpc::NewRequestId());
  auto deleted =
      Twice<rpc::KvDelReply>([&](auto* reply, rpc::Done done) { kv_.HandleDel(del, reply, std::move(done)); });
  EXPECT_EQ(deleted.deleted(), 1);
  EXPECT_EQ(kv_.Find("ns", "k"), nullptr);
}

// ---------------------------------------------------------------- jobs

TEST_F(IdempotencyTest, AddJobAndMarkJobFinished) {
  rpc::AddJobRequest add;
  add.mutable_job()->mutable_driver_address()->set_worker_id(WorkerId::FromRandom().Binary());
  add.mutable_job()->set_driver_pid(42);
  auto job =
      Twice<rpc::AddJobReply>([&](auto* reply, rpc::Done done) { jobs_.HandleAddJob(add, reply, std::move(done)); });
  ASSERT_FALSE(job.job_id().empty());
  // Another driver gets another job.
  rpc::AddJobRequest other = add;
  other.mutable_job()->mutable_driver_address()->set_worker_id(WorkerId::FromRandom().Binary());
  rpc::AddJobReply other_reply;
  jobs_.HandleAddJob(other, &other_reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
  Pump(loop_);
  EXPECT_NE(other_reply.job_id(), job.job_id());

  rpc::MarkJobFinishedRequest finish;
  finish.set_job_id(job.job_id());
  Twice<rpc::MarkJobFinishedReply>(
      [&](auto* reply, rpc::Done done) { jobs_.HandleMarkJobFinished(finish, reply, std::move(done)); });
  EXPECT_TRUE(jobs_.IsFinished(*JobId::FromBinary(job.job_id())));
}

// ---------------------------------------------------------------- actors

TEST_F(IdempotencyTest, RegisterActor) {
  AddNode();
  rpc::RegisterActorRequest req;
  *req.mutable_creation_task() = ActorSpec(0);
  auto reply = Twice<rpc::RegisterActorReply>(
      [&](auto* reply, rpc::Done done) { actors_->HandleRegisterActor(req, reply, std::move(done)); });
  EXPECT_EQ(reply.actor().actor_id(), req.creation_task().actor_id());
  EXPECT_EQ(raylets_.leases.size(), 1u);  // scheduled once
}

TEST_F(IdempotencyTest, KillActorWithRestartRestartsOnce) {
  AddNode();
  rpc::TaskSpec spec = AliveActor(/*max_restarts=*/1);
  rpc::KillActorRequest req;
  req.set_actor_id(spec.actor_id());
  req.set_request_id(rpc::NewRequestId());
  Twice<rpc::KillActorReply>(
      [&](auto* reply, rpc::Done done) { actors_->HandleKillActor(req, reply, std::move(done)); });
  const rpc::ActorInfo* info = actors_->Get(*ActorId::FromBinary(spec.actor_id()));
  EXPECT_EQ(info->state(), rpc::ActorInfo::RESTARTING);  // not DEAD: one restart of one spent
  EXPECT_EQ(info->num_restarts(), 1);
}

TEST_F(IdempotencyTest, KillActorForGood) {
  AddNode();
  rpc::TaskSpec spec = AliveActor(/*max_restarts=*/3);
  rpc::KillActorRequest req;
  req.set_actor_id(spec.actor_id());
  req.set_no_restart(true);
  req.set_request_id(rpc::NewRequestId());
  Twice<rpc::KillActorReply>(
      [&](auto* reply, rpc::Done done) { actors_->HandleKillActor(req, reply, std::move(done)); });
  EXPECT_EQ(actors_->Get(*ActorId::FromBinary(spec.actor_id()))->state(), rpc::ActorInfo::DEAD);
}

TEST_F(IdempotencyTest, ReportWorkerFailureRestartsOnce) {
  AddNode();
  rpc::TaskSpec spec = AliveActor(/*max_restarts=*/5);
  const rpc::ActorInfo* info = actors_->Get(*ActorId::FromBinary(spec.actor_id()));
  rpc::ReportWorkerFailureRequest req;
  req.set_worker_id(info->address().worker_id());
  req.set_exit_detail("killed by signal 9");
  Twice<rpc::ReportWorkerFailureReply>(
      [&](auto* reply, rpc::Done done) { actors_->HandleReportWorkerFailure(req, reply, std::move(done)); });
  EXPECT_EQ(info->num_restarts(), 1);
}

// ---------------------------------------------------------------- placement groups

TEST_F(IdempotencyTest, CreateAndRemovePlacementGroup) {
  AddNode({{"CPU", 4}});
  rpc::CreatePlacementGroupRequest create;
  rpc::PlacementGroupInfo* spec = create.mutable_spec();
  spec->set_placement_group_id(PlacementGroupId::FromRandom().Binary());
  spec->set_strategy(rpc::PlacementGroupInfo::PACK);
  for (int i = 0; i < 2; ++i) {
    rpc::Bundle* b = spec->add_bundles();
    b->set_index(i);
    (*b->mutable_resources())["CPU"] = 1;
  }
  // The retry comes while the first attempt is being placed.
  auto reply = Twice<rpc::CreatePlacementGroupReply>(
      [&](auto* reply, rpc::Done done) { pgs_->HandleCreatePlacementGroup(create, reply, std::move(done)); });
  EXPECT_EQ(reply.placement_group().placement_group_id(), spec->placement_group_id());
  AnswerRaylets();
  PlacementGroupId id = *PlacementGroupId::FromBinary(spec->placement_group_id());
  EXPECT_EQ(pgs_->Get(id)->state(), rpc::PlacementGroupInfo::CREATED);
  // A retry once it is placed gets the group as it is; nothing is reserved again.
  std::string placed = Snapshot();
  rpc::CreatePlacementGroupReply late;
  pgs_->HandleCreatePlacementGroup(create, &late, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
  Pump(loop_);
  EXPECT_EQ(late.placement_group().state(), rpc::PlacementGroupInfo::CREATED);
  EXPECT_TRUE(raylets_.prepares.empty());
  EXPECT_EQ(Snapshot(), placed);

  rpc::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(spec->placement_group_id());
  Twice<rpc::RemovePlacementGroupReply>(
      [&](auto* reply, rpc::Done done) { pgs_->HandleRemovePlacementGroup(remove, reply, std::move(done)); },
      [this] { AnswerRaylets(); });
  EXPECT_EQ(pgs_->Get(id)->state(), rpc::PlacementGroupInfo::REMOVED);
  EXPECT_EQ(cancels_, 1);  // its node returned the bundles once
}

// ---------------------------------------------------------------- task events and train runs

TEST_F(IdempotencyTest, AddTaskEvents) {
  rpc::AddTaskEventsRequest req;
  rpc::TaskEvent* e = req.add_events();
  e->set_task_id(TaskId::FromRandom().Binary());
  e->set_job_id(JobIdFromInt(1).Binary());
  e->set_name("f");
  e->set_state(rpc::TaskEvent::FINISHED);
  (*e->mutable_resources())["CPU"] = 1;
  Twice<rpc::AddTaskEventsReply>(
      [&](auto* reply, rpc::Done done) { task_events_.HandleAddTaskEvents(req, reply, std::move(done)); });
}

TEST_F(IdempotencyTest, ReportTrainRunAppendsMetricsOnce) {
  rpc::AddJobReply job;
  jobs_.HandleAddJob({}, &job, [](const absl::Status&) {});
  Pump(loop_);
  rpc::ReportTrainRunRequest req;
  rpc::TrainRunInfo* run = req.mutable_run();
  run->set_run_id(std::string(32, 'a'));
  run->set_name("run");
  run->set_job_id(job.job_id());
  run->set_state(rpc::TrainRunInfo::RUNNING);
  run->set_version(1);
  rpc::TrainMetricPoint* p = req.add_new_metrics();
  p->set_step(1);
  (*p->mutable_metrics())["loss"] = 0.5;
  Twice<rpc::ReportTrainRunReply>(
      [&](auto* reply, rpc::Done done) { train_runs_.HandleReportTrainRun(req, reply, std::move(done)); });
  EXPECT_EQ(train_runs_.Get(run->run_id())->metrics_size(), 1);
}

}  // namespace
}  // namespace manta::gcs
