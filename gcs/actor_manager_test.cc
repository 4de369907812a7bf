#include "gcs/actor_manager.h"

#include <limits>

#include "gcs/fake_core_worker_client.h"
#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using State = rpc::ActorInfo;

class ActorManagerTest : public ::testing::Test {
 protected:
  ActorManagerTest() { Restart(); }

  // A fresh scheduler and manager over the same store: a restarted GCS.
  void Restart() {
    actors_.reset();
    scheduler_ = std::make_unique<ActorScheduler>(
        [this](const NodeId& n) -> const rpc::NodeResources* {
          auto it = view_.find(n);
          return it == view_.end() ? nullptr : &it->second;
        },
        &raylets_, &workers_, timers_.RunAfter());
    for (const auto& n : nodes_) scheduler_->OnNodeAdded(n);
    actors_ = std::make_unique<ActorManager>(&store_, &pub_, scheduler_.get(), &raylets_, &workers_, &jobs_);
    actors_->SetTaskEventSink([this](const rpc::TaskEvent& e) { events_.push_back(e); });
    actors_->SetStoppedSink([this](const ActorId& a, const rpc::ErrorInfo& e) { stopped_.emplace_back(a, e.type()); });
    ASSERT_TRUE(actors_->Initialize().ok());
  }

  NodeId AddNode(std::map<std::string, double> resources, std::map<std::string, std::string> labels = {}) {
    rpc::NodeInfo n;
    NodeId id = NodeId::FromRandom();
    n.set_node_id(id.Binary());
    n.set_node_ip("10.0.0." + std::to_string(nodes_.size() + 1));
    n.set_node_manager_port(7000);
    n.mutable_resources_total()->insert(resources.begin(), resources.end());
    n.mutable_labels()->insert(labels.begin(), labels.end());
    nodes_.push_back(n);
    scheduler_->OnNodeAdded(n);
    return id;
  }

  void KillNode(const NodeId& id) {
    for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
      if (it->node_id() != id.Binary()) continue;
      rpc::NodeInfo dead = *it;
      dead.set_death_reason("NodeTerminated: health check failed");
      nodes_.erase(it);
      scheduler_->OnNodeDead(id);
      actors_->OnNodeDead(dead);
      return;
    }
  }

  rpc::TaskSpec Spec(std::map<std::string, double> resources = {{"CPU", 1}}, int max_restarts = 0,
                     const std::string& name = "", bool detached = false) {
    rpc::TaskSpec s;
    s.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    s.set_actor_id(ActorId::FromRandom().Binary());
    s.set_job_id(job_.Binary());
    s.set_function_name("Counter::Create");
    s.mutable_resources()->insert(resources.begin(), resources.end());
    s.mutable_actor_creation()->set_max_restarts(max_restarts);
    s.mutable_actor_creation()->set_name(name);
    s.mutable_actor_creation()->set_detached(detached);
    s.mutable_actor_creation()->set_class_name("Counter");
    s.add_args()->set_data("start=0");
    return s;
  }

  absl::Status Register(const rpc::TaskSpec& spec) {
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = spec;
    rpc::RegisterActorReply reply;
    absl::Status result = absl::UnknownError("no reply");
    actors_->HandleRegisterActor(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    return result;
  }

  ActorId Id(const rpc::TaskSpec& spec) { return *ActorId::FromBinary(spec.actor_id()); }
  State::State StateOf(const rpc::TaskSpec& spec) { return actors_->Get(Id(spec))->state(); }

  // Grants the oldest lease request with a new worker; returns the request.
  FakeRayletClientPool::LeaseCall Grant(int pid = 100, const rpc::NodeResources* view = nullptr) {
    auto call = raylets_.PopLease();
    rpc::RequestWorkerLeaseReply reply;
    if (view != nullptr) *reply.mutable_resources() = *view;
    reply.set_outcome(rpc::RequestWorkerLeaseReply::GRANTED);
    reply.mutable_worker_address()->set_ip("10.0.0.9");
    reply.mutable_worker_address()->set_port(9000);
    reply.mutable_worker_address()->set_worker_id(WorkerId::FromRandom().Binary());
    reply.set_worker_pid(pid);
    reply.add_tpu_chip_ids(2);
    reply.add_tpu_chip_ids(3);
    call.cb(absl::OkStatus(), std::move(reply));
    return call;
  }
  void Reject() {
    auto call = raylets_.PopLease();
    rpc::RequestWorkerLeaseReply reply;
    reply.set_outcome(rpc::RequestWorkerLeaseReply::REJECTED);
    call.cb(absl::OkStatus(), std::move(reply));
  }
  // Answers the oldest push; returns its request.
  FakeCoreWorkerClientPool::Push Push(const std::string& error = "") {
    auto push = workers_.PopPush();
    rpc::PushTaskReply reply;
    if (!error.empty()) {
      reply.mutable_error()->set_type(rpc::ErrorInfo::APPLICATION_ERROR);
      reply.mutable_error()->set_message(error);
    }
    push.cb(absl::OkStatus(), std::move(reply));
    return push;
  }
  // Registers and brings an actor to ALIVE.
  rpc::TaskSpec MakeAlive(rpc::TaskSpec spec) {
    EXPECT_TRUE(Register(spec).ok());
    Grant();
    Push();
    EXPECT_EQ(StateOf(spec), State::ALIVE);
    return spec;
  }

  absl::Status ReportFailure(const std::string& worker_id, const std::string& detail, bool held_no_lease = false) {
    rpc::ReportWorkerFailureRequest req;
    req.set_worker_id(worker_id);
    req.set_exit_detail(detail);
    req.set_held_no_lease(held_no_lease);
    rpc::ReportWorkerFailureReply reply;
    absl::Status result = absl::UnknownError("no reply");
    actors_->HandleReportWorkerFailure(req, &reply, [&](const absl::Status& s) { result = s; });
    return result;
  }
  absl::Status Kill(const rpc::TaskSpec& spec, bool no_restart) {
    rpc::KillActorRequest req;
    req.set_actor_id(spec.actor_id());
    req.set_no_restart(no_restart);
    rpc::KillActorReply reply;
    absl::Status result = absl::UnknownError("no reply");
    actors_->HandleKillActor(req, &reply, [&](const absl::Status& s) { result = s; });
    return result;
  }

  // The states published for `spec`'s actor, in order.
  std::vector<State::State> Published(const rpc::TaskSpec& spec) {
    rpc::PollRequest req;
    req.add_channels(rpc::PubMessage::ACTOR);
    req.add_keys(spec.actor_id());
    rpc::PollReply reply;
    pub_.HandlePoll(req, &reply, [](const absl::Status&) {});
    std::vector<State::State> out;
    reply = AsReceived(reply);
    for (const auto& m : reply.messages()) out.push_back(m.actor_info().state());
    return out;
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeRayletClientPool raylets_;
  FakeCoreWorkerClientPool workers_;
  FakeTimers timers_;
  std::vector<rpc::NodeInfo> nodes_;
  absl::flat_hash_map<NodeId, rpc::NodeResources> view_;
  JobManager jobs_{&store_, &pub_, &raylets_, [this] { return nodes_; }, timers_.RunAfter()};
  JobId job_ = JobIdFromInt(1);
  std::unique_ptr<ActorScheduler> scheduler_;
  std::unique_ptr<ActorManager> actors_;
  std::vector<rpc::TaskEvent> events_;                             // creation attempts reported
  std::vector<std::pair<ActorId, rpc::ErrorInfo::Type>> stopped_;  // processes lost
};

TEST_F(ActorManagerTest, RegisterLeaseCreateAlive) {
  NodeId node = AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = Spec();
  ASSERT_TRUE(Register(spec).ok());
  EXPECT_EQ(StateOf(spec), State::PENDING_CREATION);
  ASSERT_EQ(raylets_.leases.size(), 1u);
  const auto& lease = raylets_.leases.front();
  EXPECT_EQ(lease.node, node);
  EXPECT_EQ(lease.address, "10.0.0.1:7000");
  EXPECT_TRUE(lease.request.grant_or_reject());
  EXPECT_EQ(lease.request.lease_id().size(), LeaseId::kSize);
  EXPECT_EQ(lease.request.spec().actor_id(), spec.actor_id());
  EXPECT_EQ(lease.request.spec().args_size(), 0);
  auto granted = Grant(/*pid=*/4321);
  ASSERT_EQ(workers_.pushes.size(), 1u);
  const auto& push = workers_.pushes.front();
  EXPECT_EQ(push.request.spec().args_size(), 1);
  EXPECT_EQ(push.request.intended_worker_id(), push.worker.worker_id());
  EXPECT_EQ(push.request.tpu_chip_ids_size(), 2);
  EXPECT_EQ(StateOf(spec), State::PENDING_CREATION);
  Push();
  const rpc::ActorInfo* info = actors_->Get(Id(spec));
  EXPECT_EQ(info->state(), State::ALIVE);
  EXPECT_EQ(info->pid(), 4321);
  EXPECT_EQ(info->address().port(), 9000);
  EXPECT_EQ(info->address().node_id(), node.Binary());
  EXPECT_EQ(info->lease_id(), granted.request.lease_id());
  EXPECT_EQ(info->class_name(), "Counter");
  EXPECT_EQ(Published(spec), (std::vector<State::State>{State::PENDING_CREATION, State::ALIVE}));
  EXPECT_EQ(scheduler_->num_scheduling(), 0u);
  EXPECT_EQ(timers_.num_armed(), 0u);
  // Registering again is idempotent.
  ASSERT_TRUE(Register(spec).ok());
  EXPECT_EQ(raylets_.leases.size(), 0u);
}

// With a resource sink, a lease asks for the node's view in its reply,
// which the scheduler hands on once the attempt moved on; without one (or
// for a failed call) nothing is asked or applied.
TEST_F(ActorManagerTest, ALeaseReplysViewOfTheNodeIsAppliedInsteadOfAReport) {
  NodeId node = AddNode({{"CPU", 4}});
  std::vector<rpc::NodeResources> applied;
  rpc::TaskSpec plain = Spec();
  ASSERT_TRUE(Register(plain).ok());
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_FALSE(raylets_.leases.front().request.reply_with_resources());
  Grant();
  Push();

  scheduler_->SetApplyResources([&](const rpc::NodeResources& r) {
    // Handed on after the attempt moved on to pushing its creation task.
    EXPECT_EQ(workers_.pushes.size(), 1u);
    applied.push_back(r);
  });
  rpc::TaskSpec spec = Spec();
  ASSERT_TRUE(Register(spec).ok());
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_TRUE(raylets_.leases.front().request.reply_with_resources());
  rpc::NodeResources view;
  view.set_node_id(node.Binary());
  view.set_version(7);
  (*view.mutable_available())["CPU"] = 2;
  Grant(/*pid=*/100, &view);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].node_id(), node.Binary());
  EXPECT_EQ(applied[0].version(), 7);
  EXPECT_EQ(applied[0].available().at("CPU"), 2);
  Push();
  EXPECT_EQ(StateOf(spec), State::ALIVE);

  rpc::TaskSpec failed = Spec();
  ASSERT_TRUE(Register(failed).ok());
  auto lost = raylets_.PopLease();
  rpc::RequestWorkerLeaseReply ignored;
  ignored.mutable_resources()->set_node_id(node.Binary());
  lost.cb(absl::UnavailableError("connection broke"), std::move(ignored));
  EXPECT_EQ(applied.size(), 1u);
}

TEST_F(ActorManagerTest, ConstructorErrorKillsTheActor) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = Spec({{"CPU", 1}}, /*max_restarts=*/3);
  ASSERT_TRUE(Register(spec).ok());
  Grant();
  auto push = Push("ValueError: start must be positive");
  const rpc::ActorInfo* info = actors_->Get(Id(spec));
  EXPECT_EQ(info->state(), State::DEAD);
  EXPECT_EQ(info->death_cause().type(), rpc::ErrorInfo::ACTOR_DIED);
  EXPECT_NE(info->death_cause().message().find("ValueError: start must be positive"), std::string::npos);
  EXPECT_EQ(info->num_restarts(), 0);
  ASSERT_EQ(raylets_.returned.size(), 1u);
  EXPECT_TRUE(raylets_.returned[0].request.disconnect_worker());
  ASSERT_EQ(workers_.exits.size(), 1u);
  EXPECT_EQ(workers_.exits[0], push.worker.worker_id());
  EXPECT_EQ(raylets_.leases.size(), 0u);
}

TEST_F(ActorManagerTest, CreationAttemptsAreReportedAsTasks) {
  NodeId node = AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = Spec({{"CPU", 1}}, /*max_restarts=*/1);
  spec.set_task_id(std::string(24, 'c'));
  ASSERT_TRUE(Register(spec).ok());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].state(), rpc::TaskEvent::PENDING_NODE_ASSIGNMENT);
  EXPECT_EQ(events_[0].type(), rpc::TaskSpec::ACTOR_CREATION_TASK);
  EXPECT_EQ(events_[0].task_id(), spec.task_id());
  EXPECT_EQ(events_[0].actor_id(), spec.actor_id());
  EXPECT_EQ(events_[0].name(), "Counter::Create");
  Grant(/*pid=*/4321);
  auto first = Push();
  EXPECT_EQ(first.request.spec().attempt(), 0);
  ASSERT_EQ(events_.size(), 2u);
  const rpc::TaskEvent& created = events_[1];
  EXPECT_EQ(created.state(), rpc::TaskEvent::FINISHED);
  EXPECT_EQ(created.attempt(), 0);
  EXPECT_EQ(created.node_id(), node.Binary());
  EXPECT_EQ(created.worker_id(), first.worker.worker_id());
  EXPECT_EQ(created.worker_pid(), 4321);
  EXPECT_EQ(created.resources().at("CPU"), 1.0);

  // A restart is the next attempt, pushed with its number so the worker's
  // own record of it merges with these.
  ASSERT_TRUE(ReportFailure(first.worker.worker_id(), "killed by signal 9").ok());
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[2].state(), rpc::TaskEvent::PENDING_NODE_ASSIGNMENT);
  EXPECT_EQ(events_[2].attempt(), 1);
  Grant();
  auto second = Push("ValueError: boom");
  EXPECT_EQ(second.request.spec().attempt(), 1);
  ASSERT_EQ(events_.size(), 4u) << "one FAILED for the attempt, none more for the death it causes";
  EXPECT_EQ(events_[3].state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(events_[3].attempt(), 1);
  EXPECT_EQ(events_[3].error().type(), rpc::ErrorInfo::APPLICATION_ERROR);
  EXPECT_NE(events_[3].error().message().find("ValueError: boom"), std::string::npos);
  EXPECT_EQ(events_[3].worker_id(), second.worker.worker_id());

  // An actor killed with a restart while it waits for a node: that attempt
  // ends, and the restart is the next one.
  events_.clear();
  rpc::TaskSpec waiting = Spec({{"GPU", 1}}, /*max_restarts=*/1);
  waiting.set_task_id(std::string(24, 'w'));
  ASSERT_TRUE(Register(waiting).ok());
  ASSERT_TRUE(Kill(waiting, /*no_restart=*/false).ok());
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[1].state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(events_[1].attempt(), 0);
  EXPECT_EQ(events_[1].error().type(), rpc::ErrorInfo::TASK_CANCELLED);
  EXPECT_EQ(events_[2].state(), rpc::TaskEvent::PENDING_NODE_ASSIGNMENT);
  EXPECT_EQ(events_[2].attempt(), 1);

  // An actor killed before any node could take it: its attempt failed.
  events_.clear();
  rpc::TaskSpec never = Spec({{"GPU", 1}});
  never.set_task_id(std::string(24, 'n'));
  ASSERT_TRUE(Register(never).ok());
  ASSERT_TRUE(Kill(never, /*no_restart=*/true).ok());
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(events_[1].error().type(), rpc::ErrorInfo::ACTOR_DIED);
  EXPECT_TRUE(events_[1].node_id().empty());

  // A spec without a task id (not from a core worker) is not listed.
  events_.clear();
  ASSERT_TRUE(Register(Spec()).ok());
  EXPECT_TRUE(events_.empty());
}

TEST_F(ActorManagerTest, WorkerFailureRestartsUntilOutOfRestarts) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/1));
  std::string worker = actors_->Get(Id(spec))->address().worker_id();
  ASSERT_TRUE(ReportFailure(worker, "killed by signal 9").ok());
  EXPECT_EQ(StateOf(spec), State::RESTARTING);
  EXPECT_EQ(actors_->Get(Id(spec))->num_restarts(), 1);
  // The constructor runs again on a new worker.
  Grant();
  auto push = Push();
  EXPECT_EQ(push.request.spec().function_name(), "Counter::Create");
  EXPECT_EQ(StateOf(spec), State::ALIVE);
  std::string second = actors_->Get(Id(spec))->address().worker_id();
  EXPECT_NE(second, worker);
  // A late report about the first worker changes nothing.
  ASSERT_TRUE(ReportFailure(worker, "killed by signal 9").ok());
  EXPECT_EQ(StateOf(spec), State::ALIVE);

  ASSERT_TRUE(ReportFailure(second, "killed by signal 9").ok());
  const rpc::ActorInfo* info = actors_->Get(Id(spec));
  EXPECT_EQ(info->state(), State::DEAD);
  EXPECT_EQ(info->death_cause().type(), rpc::ErrorInfo::ACTOR_DIED);
  EXPECT_NE(info->death_cause().message().find("the worker process died: killed by signal 9"), std::string::npos);
  EXPECT_NE(info->death_cause().message().find("max_restarts=1"), std::string::npos);
  EXPECT_EQ(Published(spec), (std::vector<State::State>{State::PENDING_CREATION, State::ALIVE, State::RESTARTING,
                                                        State::ALIVE, State::DEAD}));
  EXPECT_EQ(raylets_.leases.size(), 0u);
  // Each lost process ended the calls it was running (the task table hears it).
  using Stop = std::pair<ActorId, rpc::ErrorInfo::Type>;
  EXPECT_EQ(stopped_,
            (std::vector<Stop>{{Id(spec), rpc::ErrorInfo::WORKER_DIED}, {Id(spec), rpc::ErrorInfo::ACTOR_DIED}}));
}

// Every reported exit is published for the raylets (the leases it held as a
// caller end); one whose lease had ended before is no actor's loss.
TEST_F(ActorManagerTest, AReportedExitIsPublishedAndAnEndedLeaseLosesNoActor) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/1));
  std::string worker = actors_->Get(Id(spec))->address().worker_id();
  const std::string other = WorkerId::FromRandom().Binary();
  ASSERT_TRUE(ReportFailure(worker, "killed by signal 15", /*held_no_lease=*/true).ok());
  ASSERT_TRUE(ReportFailure(other, "exited with code 0").ok());
  ASSERT_TRUE(ReportFailure(other, "exited with code 0").ok()) << "a retry publishes nothing";
  EXPECT_EQ(StateOf(spec), State::ALIVE);
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::WORKER);
  rpc::PollReply reply;
  pub_.HandlePoll(req, &reply, [](const absl::Status&) {});
  reply = AsReceived(reply);
  std::vector<std::string> died;
  for (const auto& m : reply.messages()) died.push_back(m.worker_death().worker_id());
  EXPECT_EQ(died, (std::vector<std::string>{worker, other}));
}

TEST_F(ActorManagerTest, NodeDeathRestartsElsewhereOrKills) {
  NodeId a = AddNode({{"CPU", 1}});
  rpc::TaskSpec restartable = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/-1));
  rpc::TaskSpec fragile = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/0));
  NodeId b = AddNode({{"CPU", 1}});
  ASSERT_EQ(actors_->Get(Id(restartable))->address().node_id(), a.Binary());
  KillNode(a);
  EXPECT_EQ(StateOf(restartable), State::RESTARTING);
  const rpc::ActorInfo* dead = actors_->Get(Id(fragile));
  EXPECT_EQ(dead->state(), State::DEAD);
  EXPECT_NE(dead->death_cause().message().find("the node died"), std::string::npos);
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_EQ(raylets_.leases.front().node, b);
  Grant();
  Push();
  EXPECT_EQ(StateOf(restartable), State::ALIVE);
  EXPECT_EQ(actors_->Get(Id(restartable))->address().node_id(), b.Binary());
}

TEST_F(ActorManagerTest, NodeDeathDuringConstructionCountsAsARestart) {
  NodeId a = AddNode({{"CPU", 1}});
  rpc::TaskSpec spec = Spec({{"CPU", 1}}, /*max_restarts=*/2);
  ASSERT_TRUE(Register(spec).ok());
  Grant();
  ASSERT_EQ(workers_.pushes.size(), 1u);
  KillNode(a);
  EXPECT_EQ(StateOf(spec), State::RESTARTING);
  EXPECT_EQ(actors_->Get(Id(spec))->num_restarts(), 1);
  // The push's late failure is ignored.
  auto push = workers_.PopPush();
  push.cb(absl::UnavailableError("connection reset"), {});
  EXPECT_EQ(actors_->Get(Id(spec))->num_restarts(), 1);
  // Nowhere to go until a node comes.
  EXPECT_EQ(raylets_.leases.size(), 0u);
  AddNode({{"CPU", 1}});
  ASSERT_EQ(raylets_.leases.size(), 1u);
}

TEST_F(ActorManagerTest, KillTellsTheWorkerAndReturnsItsLease) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/-1));
  std::string worker = actors_->Get(Id(spec))->address().worker_id();
  std::string lease = actors_->Get(Id(spec))->lease_id();
  ASSERT_TRUE(Kill(spec, /*no_restart=*/true).ok());
  const rpc::ActorInfo* info = actors_->Get(Id(spec));
  EXPECT_EQ(info->state(), State::DEAD);
  EXPECT_EQ(info->death_cause().type(), rpc::ErrorInfo::ACTOR_DIED);
  EXPECT_NE(info->death_cause().message().find("killed"), std::string::npos);
  EXPECT_EQ(workers_.kills, std::deque<std::string>{worker});
  EXPECT_EQ(workers_.exits, std::deque<std::string>{worker});
  ASSERT_EQ(raylets_.returned.size(), 1u);
  EXPECT_EQ(raylets_.returned[0].request.lease_id(), lease);
  EXPECT_TRUE(raylets_.returned[0].request.disconnect_worker());
  EXPECT_EQ(raylets_.leases.size(), 0u);
  // Killing again, or reporting the worker's exit, changes nothing.
  ASSERT_TRUE(Kill(spec, true).ok());
  ASSERT_TRUE(ReportFailure(worker, "killed by signal 9").ok());
  EXPECT_EQ(Published(spec).size(), 3u);

  rpc::TaskSpec other = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/-1));
  ASSERT_TRUE(Kill(other, /*no_restart=*/false).ok());
  EXPECT_EQ(StateOf(other), State::RESTARTING);
  EXPECT_EQ(raylets_.leases.size(), 1u);
}

TEST_F(ActorManagerTest, KillDuringLeaseReturnsTheLateGrant) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = Spec();
  ASSERT_TRUE(Register(spec).ok());
  ASSERT_TRUE(Kill(spec, true).ok());
  EXPECT_EQ(StateOf(spec), State::DEAD);
  auto call = Grant();
  EXPECT_EQ(workers_.pushes.size(), 0u);
  ASSERT_EQ(raylets_.returned.size(), 1u);
  EXPECT_EQ(raylets_.returned[0].request.lease_id(), call.request.lease_id());
  EXPECT_FALSE(raylets_.returned[0].request.disconnect_worker());
}

TEST_F(ActorManagerTest, GetIfExistsGivesTheActorHoldingTheName) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec first = Spec({{"CPU", 1}}, 0, "shared");
  ASSERT_TRUE(Register(first).ok());
  rpc::TaskSpec second = Spec({{"CPU", 1}}, 0, "shared");
  second.mutable_actor_creation()->set_get_if_exists(true);
  rpc::RegisterActorRequest req;
  *req.mutable_creation_task() = second;
  rpc::RegisterActorReply reply;
  absl::Status result = absl::UnknownError("no reply");
  actors_->HandleRegisterActor(req, &reply, [&](const absl::Status& s) { result = s; });
  Pump(loop_);
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_EQ(reply.actor().actor_id(), first.actor_id());
  EXPECT_EQ(actors_->Get(Id(second)), nullptr);  // nothing new registered
  // A free name with get_if_exists registers as usual.
  rpc::TaskSpec fresh = Spec({{"CPU", 1}}, 0, "fresh");
  fresh.mutable_actor_creation()->set_get_if_exists(true);
  EXPECT_TRUE(Register(fresh).ok());
  EXPECT_NE(actors_->Get(Id(fresh)), nullptr);
}

TEST_F(ActorManagerTest, NamesAreUniquePerNamespaceAndFreedOnDeath) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec first = MakeAlive(Spec({{"CPU", 1}}, 0, "counter"));
  EXPECT_EQ(Register(Spec({{"CPU", 1}}, 0, "counter")).code(), absl::StatusCode::kAlreadyExists);
  rpc::TaskSpec elsewhere = Spec({{"CPU", 1}}, 0, "counter");
  elsewhere.mutable_actor_creation()->set_ray_namespace("other");
  EXPECT_TRUE(Register(elsewhere).ok());

  rpc::GetNamedActorRequest req;
  req.set_name("counter");
  rpc::GetNamedActorReply reply;
  absl::Status result;
  actors_->HandleGetNamedActor(req, &reply, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(reply.actor().actor_id(), first.actor_id());
  EXPECT_EQ(reply.creation_task().function_name(), "Counter::Create");

  ASSERT_TRUE(Kill(first, true).ok());
  actors_->HandleGetNamedActor(req, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Register(Spec({{"CPU", 1}}, 0, "counter")).ok());
}

TEST_F(ActorManagerTest, DetachedActorsSurviveTheirJob) {
  AddNode({{"CPU", 4}});
  rpc::AddJobReply added;
  jobs_.HandleAddJob({}, &added, [](const absl::Status&) {});
  job_ = *JobId::FromBinary(added.job_id());
  jobs_.AddJobFinishedListener([this](const rpc::JobInfo& j) { actors_->OnJobFinished(j); });
  rpc::TaskSpec plain = MakeAlive(Spec());
  rpc::TaskSpec detached = MakeAlive(Spec({{"CPU", 1}}, 0, "keeper", /*detached=*/true));
  rpc::TaskSpec pending = Spec({{"CPU", 100}});
  ASSERT_TRUE(Register(pending).ok());
  jobs_.FinishJob(job_, "test");
  EXPECT_EQ(StateOf(plain), State::DEAD);
  EXPECT_NE(actors_->Get(Id(plain))->death_cause().message().find("job"), std::string::npos);
  EXPECT_EQ(StateOf(pending), State::DEAD);
  EXPECT_EQ(StateOf(detached), State::ALIVE);
  EXPECT_EQ(scheduler_->num_scheduling(), 0u);
  EXPECT_EQ(Register(Spec()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Register(Spec({{"CPU", 1}}, 0, "", /*detached=*/true)).ok());
}

TEST_F(ActorManagerTest, InfeasibleActorWaitsAsADemandWithoutTimers) {
  AddNode({{"CPU", 4}, {"TPU", 4}});
  rpc::TaskSpec spec = Spec({{"TPU", 8}});
  ASSERT_TRUE(Register(spec).ok());
  EXPECT_EQ(StateOf(spec), State::PENDING_CREATION);
  EXPECT_EQ(raylets_.leases.size(), 0u);
  EXPECT_EQ(timers_.num_armed(), 0u);
  rpc::GetClusterResourcesReply reply;
  rpc::ResourceDemand* existing = reply.add_demands();
  (*existing->mutable_shape())["TPU"] = 8;
  existing->set_num_ready_requests_queued(2);
  scheduler_->AppendDemands(&reply);
  ASSERT_EQ(reply.demands_size(), 1);
  EXPECT_EQ(reply.demands(0).num_infeasible_requests_queued(), 1);
  EXPECT_EQ(reply.demands(0).num_ready_requests_queued(), 2);

  NodeId big = AddNode({{"CPU", 4}, {"TPU", 8}});
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_EQ(raylets_.leases.front().node, big);
  rpc::GetClusterResourcesReply after;
  scheduler_->AppendDemands(&after);
  EXPECT_EQ(after.demands_size(), 0);
}

TEST_F(ActorManagerTest, RejectionsMoveOnThenBackOff) {
  NodeId a = AddNode({{"CPU", 1}});
  NodeId b = AddNode({{"CPU", 1}});
  rpc::TaskSpec spec = Spec();
  ASSERT_TRUE(Register(spec).ok());
  NodeId first = raylets_.leases.front().node;
  Reject();
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_NE(raylets_.leases.front().node, first);
  // An unreachable raylet counts as a refusal too.
  raylets_.PopLease().cb(absl::UnavailableError("connection refused"), {});
  EXPECT_EQ(raylets_.leases.size(), 0u);
  ASSERT_EQ(timers_.num_armed(), 1u);
  rpc::GetClusterResourcesReply demands;
  scheduler_->AppendDemands(&demands);
  ASSERT_EQ(demands.demands_size(), 1);
  EXPECT_EQ(demands.demands(0).num_ready_requests_queued(), 1);
  timers_.FireAll();
  ASSERT_EQ(raylets_.leases.size(), 1u);
  Reject();
  Reject();
  EXPECT_EQ(timers_.last_delay(), absl::Milliseconds(200));
  // A node reporting free resources is asked again at once.
  view_[a].set_node_id(a.Binary());
  (*view_[a].mutable_available())["CPU"] = 1;
  scheduler_->OnResourcesChanged(a);
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_EQ(raylets_.leases.front().node, a);
  EXPECT_EQ(timers_.num_armed(), 0u);
  (void)b;
}

TEST_F(ActorManagerTest, LabelSelectorPicksMatchingNodes) {
  AddNode({{"CPU", 4}}, {{"zone", "a"}});
  NodeId b = AddNode({{"CPU", 4}}, {{"zone", "b"}});
  rpc::TaskSpec spec = Spec();
  (*spec.mutable_label_selector())["zone"] = "b";
  ASSERT_TRUE(Register(spec).ok());
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_EQ(raylets_.leases.front().node, b);
  rpc::TaskSpec nowhere = Spec();
  (*nowhere.mutable_label_selector())["zone"] = "c";
  ASSERT_TRUE(Register(nowhere).ok());
  EXPECT_EQ(raylets_.leases.size(), 1u);
}

TEST_F(ActorManagerTest, RecoversFromTheStore) {
  NodeId node = AddNode({{"CPU", 4}});
  rpc::TaskSpec alive = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/1, "named"));
  rpc::TaskSpec pending = Spec({{"GPU", 1}});
  ASSERT_TRUE(Register(pending).ok());
  rpc::TaskSpec dead = MakeAlive(Spec());
  ASSERT_TRUE(Kill(dead, true).ok());
  Pump(loop_);
  rpc::ActorInfo before = *actors_->Get(Id(alive));

  Restart();
  EXPECT_EQ(actors_->num_actors(), 3u);
  EXPECT_EQ(actors_->Get(Id(alive))->SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(StateOf(pending), State::PENDING_CREATION);
  EXPECT_EQ(StateOf(dead), State::DEAD);
  EXPECT_EQ(Register(Spec({{"CPU", 1}}, 0, "named")).code(), absl::StatusCode::kAlreadyExists);
  rpc::GetClusterResourcesReply demands;
  scheduler_->AppendDemands(&demands);
  ASSERT_EQ(demands.demands_size(), 1);
  EXPECT_EQ(demands.demands(0).num_infeasible_requests_queued(), 1);
  // The worker index is rebuilt: its failure restarts the actor.
  ASSERT_TRUE(ReportFailure(before.address().worker_id(), "exited with code 1").ok());
  EXPECT_EQ(StateOf(alive), State::RESTARTING);
  ASSERT_EQ(raylets_.leases.size(), 1u);
  EXPECT_EQ(raylets_.leases.front().node, node);
}

TEST_F(ActorManagerTest, RecoveredActorWhoseNodeIsGoneRestarts) {
  AddNode({{"CPU", 4}});
  rpc::TaskSpec spec = MakeAlive(Spec({{"CPU", 1}}, /*max_restarts=*/1));
  Pump(loop_);
  nodes_.clear();  // the node died while the GCS was down
  Restart();
  EXPECT_EQ(StateOf(spec), State::RESTARTING);
  EXPECT_EQ(actors_->Get(Id(spec))->num_restarts(), 1);
  AddNode({{"CPU", 4}});
  ASSERT_EQ(raylets_.leases.size(), 1u);
}

TEST_F(ActorManagerTest, RejectsMalformedRequests) {
  AddNode({{"CPU", 4}});
  std::vector<rpc::TaskSpec> bad(8, Spec());
  bad[0].set_actor_id("short");
  bad[1].set_function_name("");
  (*bad[2].mutable_resources())["CPU"] = -1;
  (*bad[3].mutable_resources())["GPU"] = std::numeric_limits<double>::quiet_NaN();
  bad[4].set_type(rpc::TaskSpec::NORMAL_TASK);
  bad[5].mutable_actor_creation()->set_max_restarts(-2);
  bad[6].set_job_id("");
  bad[7].mutable_caller_address()->set_port(-5);
  for (const auto& spec : bad) EXPECT_EQ(Register(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(actors_->num_actors(), 0u);
  EXPECT_EQ(pub_.last_sequence(), 0);
  EXPECT_EQ(ReportFailure("short", "").code(), absl::StatusCode::kInvalidArgument);
  rpc::TaskSpec unknown = Spec();
  EXPECT_EQ(Kill(unknown, true).code(), absl::StatusCode::kNotFound);
  rpc::ListActorsRequest list;
  list.set_job_id("xx");
  rpc::ListActorsReply reply;
  absl::Status result;
  actors_->HandleListActors(list, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ActorManagerTest, ListsInRegistrationOrderWithJobFilterAndLimit) {
  AddNode({{"CPU", 4}});
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    rpc::TaskSpec s = Spec();
    ASSERT_TRUE(Register(s).ok());
    ids.push_back(s.actor_id());
  }
  rpc::TaskSpec other = Spec();
  other.set_job_id(JobIdFromInt(2).Binary());
  ASSERT_TRUE(Register(other).ok());
  rpc::ListActorsRequest req;
  req.set_job_id(job_.Binary());
  rpc::ListActorsReply reply;
  actors_->HandleListActors(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(reply.actors_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reply.actors(i).actor_id(), ids[i]);
  req.Clear();
  req.set_limit(2);
  reply.Clear();
  actors_->HandleListActors(req, &reply, [](const absl::Status&) {});
  EXPECT_EQ(reply.actors_size(), 2);
  EXPECT_EQ(reply.total(), 4);  // every job's, before the limit

  // By state: the first actor of the job comes alive; the count needs no list.
  Grant();
  Push();
  req.Clear();
  req.set_job_id(job_.Binary());
  req.add_states(State::ALIVE);
  req.set_limit(1);
  reply.Clear();
  actors_->HandleListActors(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(reply.actors_size(), 1);
  EXPECT_EQ(reply.actors(0).actor_id(), ids[0]);
  EXPECT_EQ(reply.total(), 1);
  req.add_states(State::PENDING_CREATION);
  reply.Clear();
  actors_->HandleListActors(req, &reply, [](const absl::Status&) {});
  EXPECT_EQ(reply.total(), 3);
  req.add_states(static_cast<State::State>(99));
  absl::Status result;
  actors_->HandleListActors(req, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::gcs
