#include "raylet/lease_manager.h"

#include <set>
#include <thread>

#include "common/placement_group_resources.h"
#include "gtest/gtest.h"
#include "raylet/fake_worker_pool.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using Reply = rpc::RequestWorkerLeaseReply;

using testing::Set;

using Call = testing::LeaseCall;

struct LeaseOptions {
  std::map<std::string, std::string> selector{};
  bool grant_or_reject = false;
  bool fail_if_infeasible = false;
  std::string job = std::string("\0\0\0\1", 4);
  rpc::TaskSpec::Type type = rpc::TaskSpec::NORMAL_TASK;
  bool detached = false;
  std::string placement_group{};  // binary; empty: none
  int bundle_index = 0;
  rpc::SchedulingStrategy strategy{};
  rpc::Address caller{};
  bool caller_is_driver = false;
};

// A lease's caller (the worker that asked).
rpc::Address Caller(const WorkerId& worker, const NodeId& node) {
  rpc::Address a;
  a.set_worker_id(worker.Binary());
  a.set_node_id(node.Binary());
  return a;
}

class LeaseManagerTest : public ::testing::Test {
 protected:
  LeaseManagerTest()
      : local_(Set({{"CPU", 4}, {"TPU", 4}}), 4),
        view_(self_),
        leases_({self_, "10.0.0.1", {{"zone", "a"}}}, &local_, &view_, &pool_) {}

  Call* Request(const std::string& id, const std::map<std::string, double>& resources, LeaseOptions o = {}) {
    rpc::RequestWorkerLeaseRequest req;
    req.set_lease_id(id);
    rpc::TaskSpec* spec = req.mutable_spec();
    spec->set_job_id(o.job);
    spec->set_type(o.type);
    spec->mutable_actor_creation()->set_detached(o.detached);
    spec->set_worker_executable("/bin/worker");
    for (const auto& [k, v] : resources) (*spec->mutable_resources())[k] = v;
    for (const auto& [k, v] : o.selector) (*spec->mutable_label_selector())[k] = v;
    spec->set_placement_group_id(o.placement_group);
    spec->set_bundle_index(o.bundle_index);
    *spec->mutable_scheduling_strategy() = o.strategy;
    *spec->mutable_caller_address() = o.caller;
    spec->set_caller_is_driver(o.caller_is_driver);
    req.set_grant_or_reject(o.grant_or_reject);
    req.set_fail_if_infeasible(o.fail_if_infeasible);
    calls_.push_back(std::make_unique<Call>());
    Call* c = calls_.back().get();
    leases_.HandleRequestWorkerLease(req, &c->reply, [c](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_FALSE(c->done) << "answered twice";
      c->done = true;
    });
    return c;
  }

  void Return(const std::string& id, bool disconnect = false) {
    rpc::ReturnWorkerRequest req;
    req.set_lease_id(id);
    req.set_disconnect_worker(disconnect);
    rpc::ReturnWorkerReply reply;
    absl::Status status = absl::UnknownError("not done");
    leases_.HandleReturnWorker(req, &reply, [&](const absl::Status& s) { status = s; });
    EXPECT_TRUE(status.ok()) << status;
  }

  bool Cancel(const std::string& id) {
    rpc::CancelWorkerLeaseRequest req;
    req.set_lease_id(id);
    rpc::CancelWorkerLeaseReply reply;
    leases_.HandleCancelWorkerLease(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
    return reply.cancelled();
  }

  NodeId AddNode(const std::map<std::string, double>& total, const std::map<std::string, double>& available,
                 const std::map<std::string, std::string>& labels = {}) {
    NodeId id = NodeId::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_node_ip("10.0.0." + std::to_string(view_.nodes().size() + 2));
    info.set_node_manager_port(7000);
    for (const auto& [k, v] : total) (*info.mutable_resources_total())[k] = v;
    for (const auto& [k, v] : labels) (*info.mutable_labels())[k] = v;
    view_.OnNodeInfo(info);
    rpc::NodeResources r;
    r.set_node_id(id.Binary());
    r.set_version(1);
    for (const auto& [k, v] : total) (*r.mutable_total())[k] = v;
    for (const auto& [k, v] : available) (*r.mutable_available())[k] = v;
    view_.OnNodeResources(r);
    leases_.OnClusterChanged();
    return id;
  }

  NodeId self_ = NodeId::FromRandom();
  LocalResourceManager local_;
  ClusterView view_;
  FakeWorkerPool pool_;
  LeaseManager leases_;
  std::vector<std::unique_ptr<Call>> calls_;
};

TEST_F(LeaseManagerTest, GrantsChipIdsAndWorkerAddress) {
  Call* a = Request("a", {{"TPU", 2}});
  ASSERT_TRUE(a->done);
  EXPECT_EQ(a->reply.outcome(), Reply::GRANTED);
  EXPECT_EQ(std::vector<int>(a->reply.tpu_chip_ids().begin(), a->reply.tpu_chip_ids().end()), std::vector<int>({0, 1}));
  EXPECT_EQ(a->reply.tpu_chips_per_host(), 4);
  EXPECT_EQ(a->reply.worker_address().ip(), "10.0.0.1");
  EXPECT_EQ(a->reply.worker_address().node_id(), self_.Binary());
  EXPECT_EQ(a->reply.worker_address().worker_id().size(), WorkerId::kSize);
  EXPECT_GT(a->reply.worker_pid(), 0);
  Call* b = Request("b", {{"TPU", 2}});
  EXPECT_EQ(std::vector<int>(b->reply.tpu_chip_ids().begin(), b->reply.tpu_chip_ids().end()), std::vector<int>({2, 3}));
  Return("a");
  Return("b");
  EXPECT_EQ(local_.available(), local_.total());
  EXPECT_EQ(pool_.pushed.size(), 2u);
}

TEST_F(LeaseManagerTest, QueuesFifoPerShape) {
  Call* a = Request("a", {{"CPU", 3}});
  Call* b = Request("b", {{"CPU", 2}});
  Call* c = Request("c", {{"CPU", 2}});
  Call* d = Request("d", {{"CPU", 1}});
  EXPECT_TRUE(a->done);
  EXPECT_FALSE(b->done);
  EXPECT_FALSE(c->done);
  EXPECT_TRUE(d->done) << "another shape is not stuck behind a queued one";
  ASSERT_EQ(leases_.Demands().size(), 1u);
  EXPECT_EQ(leases_.Demands()[0].num_ready_requests_queued(), 2);
  Return("a");
  EXPECT_TRUE(b->done);
  EXPECT_EQ(b->reply.outcome(), Reply::GRANTED);
  EXPECT_FALSE(c->done);
  Return("d");
  EXPECT_TRUE(c->done);
  EXPECT_TRUE(leases_.Demands().empty());
}

TEST_F(LeaseManagerTest, SpillbackPrefersANodeWhereItFitsNow) {
  AddNode({{"CPU", 8}}, {});
  NodeId free = AddNode({{"CPU", 8}}, {{"CPU", 8}});
  Call* a = Request("a", {{"CPU", 6}});
  ASSERT_TRUE(a->done);
  EXPECT_EQ(a->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(a->reply.retry_at().node_id(), free.Binary());
  EXPECT_EQ(a->reply.retry_at().port(), 7000);
  // The spilled demand is taken from the view until the node reports.
  EXPECT_EQ(view_.nodes().at(free).available.Get("CPU").ToDouble(), 2.0);
  Call* b = Request("b", {{"CPU", 6}}, {.grant_or_reject = true});
  EXPECT_EQ(b->reply.outcome(), Reply::REJECTED);
  EXPECT_EQ(leases_.num_leases(), 0u);
}

TEST_F(LeaseManagerTest, BusyLocalNodeSpillsToANodeWithRoomElseQueues) {
  Call* a = Request("a", {{"TPU", 4}});
  EXPECT_EQ(a->reply.outcome(), Reply::GRANTED);
  Call* b = Request("b", {{"TPU", 4}});
  EXPECT_FALSE(b->done);
  Call* c = Request("c", {{"TPU", 4}}, {.grant_or_reject = true});
  EXPECT_EQ(c->reply.outcome(), Reply::REJECTED);
  NodeId other = AddNode({{"TPU", 4}}, {{"TPU", 4}});
  ASSERT_TRUE(b->done) << "a queued lease is re-examined when the cluster changes";
  EXPECT_EQ(b->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(b->reply.retry_at().node_id(), other.Binary());
}

TEST_F(LeaseManagerTest, LabelSelectorChoosesTheNode) {
  NodeId b_node = AddNode({{"CPU", 4}}, {{"CPU", 4}}, {{"zone", "b"}});
  AddNode({{"CPU", 4}}, {{"CPU", 4}}, {{"zone", "c"}});
  Call* here = Request("here", {{"CPU", 1}}, {.selector = {{"zone", "in(a,x)"}}});
  EXPECT_EQ(here->reply.outcome(), Reply::GRANTED);
  Call* there = Request("there", {{"CPU", 1}}, {.selector = {{"zone", "b"}}});
  EXPECT_EQ(there->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(there->reply.retry_at().node_id(), b_node.Binary());
  Call* nowhere = Request("nowhere", {{"CPU", 1}}, {.selector = {{"zone", "d"}}, .fail_if_infeasible = true});
  EXPECT_EQ(nowhere->reply.outcome(), Reply::INFEASIBLE);
}

TEST_F(LeaseManagerTest, InfeasibleIsHeldReportedAndSpilledWhenANodeJoins) {
  int demand_changes = 0;
  leases_.SetDemandsListener([&] { ++demand_changes; });
  Call* a = Request("a", {{"TPU", 8}});
  EXPECT_FALSE(a->done);
  auto demands = leases_.Demands();
  ASSERT_EQ(demands.size(), 1u);
  EXPECT_EQ(demands[0].num_infeasible_requests_queued(), 1);
  EXPECT_EQ(demands[0].num_ready_requests_queued(), 0);
  EXPECT_EQ(demands[0].shape().at("TPU"), 8.0);
  EXPECT_EQ(demand_changes, 1);
  Call* failing = Request("b", {{"TPU", 8}}, {.fail_if_infeasible = true});
  EXPECT_EQ(failing->reply.outcome(), Reply::INFEASIBLE);
  EXPECT_NE(failing->reply.message().find("TPU: 8"), std::string::npos) << failing->reply.message();
  AddNode({{"CPU", 4}}, {{"CPU", 4}});
  EXPECT_FALSE(a->done);
  NodeId big = AddNode({{"TPU", 8}}, {});
  ASSERT_TRUE(a->done);
  EXPECT_EQ(a->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(a->reply.retry_at().node_id(), big.Binary());
  EXPECT_TRUE(leases_.Demands().empty());
  EXPECT_EQ(demand_changes, 2);
}

TEST_F(LeaseManagerTest, RetriedLeaseIdDoesNotGrantTwice) {
  pool_.auto_grant = false;
  Call* first = Request("a", {{"CPU", 1}});
  Call* retry = Request("a", {{"CPU", 1}});
  EXPECT_EQ(pool_.pops.size(), 1u);
  LeasedWorker w = pool_.CompletePop();
  ASSERT_TRUE(first->done && retry->done);
  EXPECT_EQ(retry->reply.worker_address().worker_id(), w.worker_id.Binary());
  Call* late = Request("a", {{"CPU", 1}});
  ASSERT_TRUE(late->done);
  EXPECT_EQ(late->reply.worker_address().worker_id(), w.worker_id.Binary());
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 3.0);
  Return("a");
  Return("a");
  EXPECT_EQ(local_.available(), local_.total());
}

TEST_F(LeaseManagerTest, CancelQueuedOrStartingButNotGranted) {
  pool_.auto_grant = false;
  Call* starting = Request("s", {{"CPU", 4}});
  Call* queued = Request("q", {{"CPU", 4}});
  EXPECT_TRUE(Cancel("q"));
  ASSERT_TRUE(queued->done);
  EXPECT_EQ(queued->reply.outcome(), Reply::CANCELLED);
  EXPECT_TRUE(Cancel("s"));
  EXPECT_EQ(starting->reply.outcome(), Reply::CANCELLED);
  EXPECT_EQ(local_.available(), local_.total());
  // The worker started for the cancelled lease goes back to the pool.
  LeasedWorker w = pool_.CompletePop();
  ASSERT_EQ(pool_.pushed.size(), 1u);
  EXPECT_EQ(pool_.pushed[0], w.worker_id);
  pool_.auto_grant = true;
  Request("g", {{"CPU", 1}});
  EXPECT_FALSE(Cancel("g"));
  EXPECT_FALSE(Cancel("unknown"));
}

TEST_F(LeaseManagerTest, CancelAllAnswersEveryHeldCall) {
  pool_.auto_grant = false;
  Call* starting = Request("s", {{"CPU", 4}});
  Call* queued = Request("q", {{"CPU", 4}});
  Call* infeasible = Request("i", {{"GPU", 1}});
  leases_.CancelAll("the raylet is stopping");
  for (Call* c : {starting, queued, infeasible}) {
    ASSERT_TRUE(c->done);
    EXPECT_EQ(c->reply.outcome(), Reply::CANCELLED);
  }
  EXPECT_EQ(leases_.num_leases(), 0u);
  EXPECT_EQ(local_.available(), local_.total());
}

TEST_F(LeaseManagerTest, WorkerStartFailureFreesResources) {
  pool_.auto_grant = false;
  Call* a = Request("a", {{"CPU", 4}});
  Call* b = Request("b", {{"CPU", 4}});
  pool_.FailPop(absl::FailedPreconditionError("worker exited with code 3 before registering"));
  ASSERT_TRUE(a->done);
  EXPECT_EQ(a->reply.outcome(), Reply::WORKER_START_FAILED);
  EXPECT_NE(a->reply.message().find("code 3"), std::string::npos);
  EXPECT_FALSE(b->done);
  EXPECT_EQ(pool_.pops.size(), 1u) << "the queued lease got the freed resources";
}

TEST_F(LeaseManagerTest, WorkerDeathFreesItsLease) {
  Call* a = Request("a", {{"CPU", 4}});
  Call* b = Request("b", {{"CPU", 4}});
  WorkerId w = *WorkerId::FromBinary(a->reply.worker_address().worker_id());
  EXPECT_FALSE(leases_.OnWorkerExit(WorkerId::FromRandom()));
  EXPECT_TRUE(leases_.OnWorkerExit(w));
  EXPECT_FALSE(leases_.OnWorkerExit(w));
  ASSERT_TRUE(b->done);
  EXPECT_EQ(b->reply.outcome(), Reply::GRANTED);
}

// A caller's leases (its tasks' workers, granted or waiting) end with it:
// no task of them has an owner left. Another caller's, and the actors it
// created (the GCS asked for those), stay.
TEST_F(LeaseManagerTest, TheLeasesOfAGoneCallerEnd) {
  const NodeId there = NodeId::FromRandom();
  const WorkerId gone = WorkerId::FromRandom();
  Call* granted = Request("granted", {{"CPU", 2}}, {.caller = Caller(gone, there)});
  Call* other = Request("other", {{"CPU", 1}}, {.caller = Caller(WorkerId::FromRandom(), there)});
  Call* actor =
      Request("actor", {{"CPU", 1}}, {.type = rpc::TaskSpec::ACTOR_CREATION_TASK, .caller = Caller(gone, there)});
  Call* queued = Request("queued", {{"CPU", 2}}, {.caller = Caller(gone, there)});
  ASSERT_EQ(granted->reply.outcome(), Reply::GRANTED);
  ASSERT_FALSE(queued->done);
  EXPECT_FALSE(leases_.EndLeasesOfCaller(WorkerId::FromRandom()));
  EXPECT_TRUE(pool_.disconnected.empty());
  EXPECT_FALSE(queued->done);

  EXPECT_TRUE(leases_.EndLeasesOfCaller(gone));
  EXPECT_FALSE(leases_.EndLeasesOfCaller(gone)) << "told again (published after the local exit)";
  ASSERT_EQ(pool_.disconnected.size(), 1u);
  EXPECT_EQ(pool_.disconnected[0].Binary(), granted->reply.worker_address().worker_id());
  ASSERT_TRUE(queued->done);
  EXPECT_EQ(queued->reply.outcome(), Reply::CANCELLED);
  EXPECT_EQ(leases_.num_leases(), 2u) << "the other caller's lease and the actor's stay";
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2.0) << "the ended lease's CPUs are free";
  EXPECT_EQ(other->reply.outcome(), Reply::GRANTED);
  Call* late = Request("late", {{"CPU", 1}}, {.caller = Caller(gone, there)});
  ASSERT_TRUE(late->done) << "a request sent before its caller exited";
  EXPECT_EQ(late->reply.outcome(), Reply::CANCELLED);

  // Every worker of a dead node goes with it, unreported; a driver there
  // may live on (its node declared dead while alive), ending with its job.
  Call* next = Request("next", {{"CPU", 1}}, {.caller = Caller(WorkerId::FromRandom(), there)});
  Call* driver =
      Request("driver", {{"CPU", 1}}, {.caller = Caller(WorkerId::FromRandom(), there), .caller_is_driver = true});
  ASSERT_EQ(next->reply.outcome(), Reply::GRANTED);
  ASSERT_EQ(driver->reply.outcome(), Reply::GRANTED);
  EXPECT_FALSE(leases_.EndLeasesOfCallerNode(NodeId::FromRandom()));
  EXPECT_EQ(leases_.num_leases(), 4u);
  EXPECT_TRUE(leases_.EndLeasesOfCallerNode(there));
  EXPECT_FALSE(leases_.EndLeasesOfCallerNode(there)) << "told again (a re-read of the node table)";
  EXPECT_EQ(leases_.num_leases(), 2u) << "the actor's lease and the driver's stay";
  EXPECT_EQ(pool_.disconnected.size(), 3u);
  ASSERT_TRUE(actor->done);
  EXPECT_EQ(actor->reply.outcome(), Reply::GRANTED);
  Call* stray = Request("stray", {{"CPU", 1}}, {.caller = Caller(WorkerId::FromRandom(), there)});
  ASSERT_TRUE(stray->done) << "a request sent before its caller's node died";
  EXPECT_EQ(stray->reply.outcome(), Reply::CANCELLED);
  Call* again =
      Request("again", {{"CPU", 1}}, {.caller = Caller(WorkerId::FromRandom(), there), .caller_is_driver = true});
  ASSERT_TRUE(again->done);
  EXPECT_EQ(again->reply.outcome(), Reply::GRANTED) << "the driver is not refused";
}

TEST_F(LeaseManagerTest, ActorWorkersAreNotReused) {
  Call* a = Request("a", {{"CPU", 1}}, {.type = rpc::TaskSpec::ACTOR_CREATION_TASK});
  Return("a");
  ASSERT_EQ(pool_.disconnected.size(), 1u);
  EXPECT_EQ(pool_.disconnected[0].Binary(), a->reply.worker_address().worker_id());
  EXPECT_TRUE(pool_.pushed.empty());
}

TEST_F(LeaseManagerTest, KillJobWorkersKeepsDetachedActors) {
  std::string job(std::string("\0\0\0\7", 4));
  Call* detached = Request("d", {}, {.job = job, .type = rpc::TaskSpec::ACTOR_CREATION_TASK, .detached = true});
  Request("t", {{"CPU", 2}}, {.job = job});
  Call* queued = Request("q", {{"CPU", 4}}, {.job = job});
  rpc::KillJobWorkersRequest req;
  req.set_job_id(job);
  rpc::KillJobWorkersReply reply;
  leases_.HandleKillJobWorkers(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
  ASSERT_EQ(pool_.killed_jobs.size(), 1u);
  EXPECT_EQ(pool_.killed_jobs[0].Binary(), job);
  ASSERT_EQ(pool_.kept.size(), 1u);
  EXPECT_EQ(pool_.kept.begin()->Binary(), detached->reply.worker_address().worker_id());
  EXPECT_EQ(queued->reply.outcome(), Reply::CANCELLED);
}

TEST_F(LeaseManagerTest, RejectsMalformedDemands) {
  EXPECT_EQ(Request("a", {{"TPU", 3}})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("b", {{"CPU", -1}})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("c", {{"CPU", 1}}, {.selector = {{"zone", "in(a"}}})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("d", {{"CPU", 1}}, {.job = "x"})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("", {{"CPU", 1}})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(leases_.num_leases(), 0u);
}

TEST_F(LeaseManagerTest, PrestartsForQueuedBacklogBeyondRunningLeases) {
  Request("a", {{"CPU", 4}});
  Request("b", {{"CPU", 4}});
  EXPECT_TRUE(pool_.prestart_backlogs.empty()) << "the running lease's worker will serve the queued one";
  Request("c", {{"CPU", 4}});
  ASSERT_FALSE(pool_.prestart_backlogs.empty());
  EXPECT_EQ(pool_.prestart_backlogs.back(), 1);
}

TEST_F(LeaseManagerTest, PlacementGroupLeaseTakesTheBundlesChips) {
  PlacementGroupId g = PlacementGroupId::FromRandom();
  ASSERT_TRUE(local_.PrepareBundles({{g, 0, Set({{"TPU", 2}, {"CPU", 1}})}}).ok());
  ASSERT_TRUE(local_.CommitBundles(g, {0}).ok());
  Call* outside = Request("outside", {{"TPU", 1}});
  EXPECT_EQ(std::vector<int>(outside->reply.tpu_chip_ids().begin(), outside->reply.tpu_chip_ids().end()),
            std::vector<int>({2}))
      << "chips 0 and 1 belong to the bundle";
  Call* a = Request("a", {{"TPU", 1}}, {.placement_group = g.Binary(), .bundle_index = 0});
  Call* b = Request("b", {{"TPU", 1}}, {.placement_group = g.Binary(), .bundle_index = -1});
  Call* c = Request("c", {{"TPU", 1}}, {.placement_group = g.Binary(), .bundle_index = 0});
  ASSERT_EQ(a->reply.outcome(), Reply::GRANTED);
  ASSERT_EQ(b->reply.outcome(), Reply::GRANTED);
  EXPECT_EQ(a->reply.tpu_chip_ids(0), 0);
  EXPECT_EQ(b->reply.tpu_chip_ids(0), 1);
  EXPECT_FALSE(c->done) << "the bundle is full: queued, though the host has a free chip";
  ASSERT_EQ(leases_.Demands().size(), 1u);
  EXPECT_TRUE(leases_.Demands()[0].shape().count(pg::IndexedName("TPU", 0, g)));
  Return("a");
  ASSERT_TRUE(c->done);
  EXPECT_EQ(c->reply.tpu_chip_ids(0), 0);
  Return("b");
  Return("c");
  Return("outside");
  EXPECT_EQ(local_.available().Get(pg::WildcardName("TPU", g)).ToDouble(), 2.0);
  local_.ReturnBundles({{g, 0}});
  EXPECT_EQ(local_.available(), local_.total());
}

TEST_F(LeaseManagerTest, PlacementGroupLeaseSpillsToTheGroupsNodeOrWaits) {
  PlacementGroupId g = PlacementGroupId::FromRandom();
  Call* early = Request("early", {{"CPU", 1}}, {.placement_group = g.Binary(), .bundle_index = 1});
  EXPECT_FALSE(early->done) << "no node holds the group yet: held as infeasible";
  EXPECT_EQ(leases_.Demands().at(0).num_infeasible_requests_queued(), 1);
  std::map<std::string, double> total = {{"CPU", 4}};
  for (const auto& [k, v] : pg::CommittedResources(Set({{"CPU", 2}}), g, 1).ToMap()) total[k] = v;
  NodeId holder = AddNode({{"CPU", 4}}, {{"CPU", 4}});
  EXPECT_FALSE(early->done) << "NodeInfo totals carry no group resources";
  rpc::NodeResources report;
  report.set_node_id(holder.Binary());
  report.set_version(2);
  for (const auto& [k, v] : total) (*report.mutable_total())[k] = v;
  for (const auto& [k, v] : total) (*report.mutable_available())[k] = v;
  ASSERT_TRUE(view_.OnNodeResources(report));
  leases_.OnClusterChanged();
  ASSERT_TRUE(early->done);
  EXPECT_EQ(early->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(early->reply.retry_at().node_id(), holder.Binary());
  // A repeated NodeInfo does not hide the group resources reported since.
  rpc::NodeInfo info;
  info.set_node_id(holder.Binary());
  info.set_node_ip("10.0.0.9");
  (*info.mutable_resources_total())["CPU"] = 4;
  view_.OnNodeInfo(info);
  EXPECT_EQ(view_.nodes().at(holder).total.Get(pg::WildcardName("CPU", g)).ToDouble(), 2.0);
  Call* wrong =
      Request("wrong", {{"CPU", 1}}, {.fail_if_infeasible = true, .placement_group = g.Binary(), .bundle_index = 0});
  EXPECT_EQ(wrong->reply.outcome(), Reply::INFEASIBLE) << "bundle 0 is nowhere";
}

TEST_F(LeaseManagerTest, RejectsMalformedPlacementGroupFields) {
  std::string g = PlacementGroupId::FromRandom().Binary();
  EXPECT_EQ(Request("a", {{"CPU", 1}}, {.placement_group = "short"})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("b", {{"CPU", 1}}, {.placement_group = g, .bundle_index = -2})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(Request("c", {{"TPU", 3}}, {.placement_group = g, .bundle_index = 0})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(
      Request("d", {{"CPU", 1}}, {.placement_group = std::string(PlacementGroupId::kSize, '\0')})->reply.outcome(),
      Reply::INVALID);
  EXPECT_EQ(Request("e", {{std::string(240, 'x'), 1}}, {.placement_group = g})->reply.outcome(), Reply::INVALID);
  EXPECT_EQ(leases_.num_leases(), 0u);
}

// The manager lives on the raylet's loop thread, bound by its first call: a
// call from another thread aborts instead of racing with it.
TEST_F(LeaseManagerTest, ACallOffItsThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        leases_.RecheckGroups();
        std::thread([&] { leases_.RecheckGroups(); }).join();
      },
      "lease_manager.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta::raylet

namespace manta::raylet {
namespace {

TEST_F(LeaseManagerTest, LeasesForARemovedGroupFailInsteadOfWaiting) {
  std::vector<std::pair<PlacementGroupId, std::function<void(bool)>>> asked;
  leases_.SetGroupCheck(
      [&](const PlacementGroupId& g, std::function<void(bool)> answer) { asked.emplace_back(g, std::move(answer)); });
  PlacementGroupId pending = PlacementGroupId::FromRandom();
  PlacementGroupId removed = PlacementGroupId::FromRandom();
  Call* waits = Request("waits", {{"TPU", 1}}, {.placement_group = pending.Binary(), .bundle_index = 0});
  Call* fails = Request("fails", {{"TPU", 1}}, {.placement_group = removed.Binary(), .bundle_index = -1});
  Call* fails_too = Request("fails_too", {{"CPU", 1}}, {.placement_group = removed.Binary(), .bundle_index = 1});
  // One question per group while one is in flight.
  ASSERT_EQ(asked.size(), 2u);
  leases_.RecheckGroups();
  EXPECT_EQ(asked.size(), 2u);
  for (auto& [g, answer] : asked) answer(g == pending);
  EXPECT_FALSE(waits->done);
  ASSERT_TRUE(fails->done && fails_too->done);
  EXPECT_EQ(fails->reply.outcome(), rpc::RequestWorkerLeaseReply::INVALID);
  EXPECT_NE(fails->reply.message().find("was removed"), std::string::npos) << fails->reply.message();
  EXPECT_EQ(fails_too->reply.outcome(), rpc::RequestWorkerLeaseReply::INVALID);
  // The pending group is asked about again on the next recheck.
  leases_.RecheckGroups();
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked.back().first, pending);
  asked.back().second(false);
  EXPECT_TRUE(waits->done);
  EXPECT_EQ(leases_.num_leases(), 0u);
}

LeaseOptions Strategy(rpc::SchedulingStrategy s) {
  LeaseOptions o;
  o.strategy = std::move(s);
  return o;
}

rpc::SchedulingStrategy Affinity(const NodeId& node, bool soft) {
  rpc::SchedulingStrategy s;
  s.set_kind(rpc::SchedulingStrategy::NODE_AFFINITY);
  s.set_node_id(node.Binary());
  s.set_soft(soft);
  return s;
}

TEST_F(LeaseManagerTest, HardAffinityRunsOnlyOnItsNode) {
  NodeId other = AddNode({{"CPU", 4}}, {{"CPU", 4}});
  // Named here: granted here, and queued (not spilled) once full.
  Call* here = Request("here", {{"CPU", 4}}, Strategy(Affinity(self_, false)));
  EXPECT_EQ(here->reply.outcome(), Reply::GRANTED);
  Call* waits = Request("waits", {{"CPU", 1}}, Strategy(Affinity(self_, false)));
  EXPECT_FALSE(waits->done);
  // Named elsewhere: sent there even though this node has room later.
  Call* there = Request("there", {{"CPU", 1}}, Strategy(Affinity(other, false)));
  ASSERT_EQ(there->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(there->reply.retry_at().ip(), view_.nodes().at(other).address.ip());
  // Dead or unknown: a clear failure at once.
  Call* gone = Request("gone", {{"CPU", 1}}, Strategy(Affinity(NodeId::FromRandom(), false)));
  ASSERT_EQ(gone->reply.outcome(), Reply::INFEASIBLE);
  EXPECT_NE(gone->reply.message().find("dead, draining or unknown"), std::string::npos) << gone->reply.message();
  // Soft: anywhere when the node is unknown.
  Call* soft = Request("soft", {{"CPU", 1}}, Strategy(Affinity(NodeId::FromRandom(), true)));
  EXPECT_EQ(soft->reply.outcome(), Reply::SPILLBACK);  // this node is full: the default spills
}

TEST_F(LeaseManagerTest, SpreadTakesNodesInTurn) {
  AddNode({{"CPU", 4}}, {{"CPU", 4}});
  AddNode({{"CPU", 4}}, {{"CPU", 4}});
  rpc::SchedulingStrategy spread;
  spread.set_kind(rpc::SchedulingStrategy::SPREAD);
  std::set<std::string> where;
  for (int i = 0; i < 3; ++i) {
    Call* c = Request("s" + std::to_string(i), {{"CPU", 1}}, Strategy(spread));
    ASSERT_TRUE(c->done);
    where.insert(c->reply.outcome() == Reply::GRANTED ? "self" : c->reply.retry_at().ip());
  }
  EXPECT_EQ(where.size(), 3u);
}

}  // namespace
}  // namespace manta::raylet

namespace manta::raylet {
namespace {

// Queued leases wait in one FIFO per shape; a shape that must wait is not
// decided again until something it could use comes back.
TEST_F(LeaseManagerTest, AWaitingShapeIsDecidedAgainOnlyWhenAReleaseCouldFitIt) {
  AddNode({{"CPU", 4}, {"TPU", 4}}, {});  // could hold anything, busy now
  Request("cpus", {{"CPU", 4}});
  Request("chips", {{"TPU", 4}});
  for (int i = 0; i < 50; ++i) Request("c" + std::to_string(i), {{"CPU", 2}});
  Request("t0", {{"TPU", 1}});
  EXPECT_EQ(leases_.num_queued(), 51u);
  EXPECT_EQ(leases_.num_shapes(), 2u);
  const uint64_t decided = leases_.num_decisions();
  for (int i = 50; i < 100; ++i) Request("c" + std::to_string(i), {{"CPU", 2}});
  EXPECT_EQ(leases_.num_decisions(), decided) << "a lease joining a waiting shape is not decided";
  Return("chips");
  EXPECT_EQ(leases_.num_decisions(), decided + 1) << "only the TPU shape uses the freed chips";
  EXPECT_EQ(calls_[2 + 50]->reply.outcome(), Reply::GRANTED);
  EXPECT_EQ(leases_.num_shapes(), 1u);
  Return("t0");
  EXPECT_EQ(leases_.num_decisions(), decided + 1) << "no waiting shape demands TPU";
  leases_.OnClusterChanged();
  EXPECT_EQ(leases_.num_decisions(), decided + 2) << "a cluster change wakes every waiting shape once";
  Return("cpus");
  EXPECT_EQ(leases_.num_decisions(), decided + 5) << "two grants, then the head must wait again";
  EXPECT_EQ(leases_.num_queued(), 98u);
}

TEST_F(LeaseManagerTest, FreedResourcesGoToTheOldestLeaseThatFitsAcrossShapes) {
  pool_.auto_grant = false;
  auto granted = [&](int call) {
    while (!pool_.pops.empty()) pool_.CompletePop();
    return calls_[call]->done && calls_[call]->reply.outcome() == Reply::GRANTED;
  };
  Request("all", {{"CPU", 4}});
  ASSERT_TRUE(granted(0));
  // Shapes A (2 CPUs), B (2 CPUs, another job) and S (1 CPU), interleaved.
  const std::string job_b("\0\0\0\2", 4);
  Request("a1", {{"CPU", 2}});                  // 1
  Request("b1", {{"CPU", 2}}, {.job = job_b});  // 2
  Request("a2", {{"CPU", 2}});                  // 3
  Request("s1", {{"CPU", 1}});                  // 4
  Request("b2", {{"CPU", 2}}, {.job = job_b});  // 5
  Request("a3", {{"CPU", 2}});                  // 6
  EXPECT_EQ(leases_.num_shapes(), 3u);
  Return("all");
  EXPECT_TRUE(granted(1) && granted(2)) << "the two oldest";
  EXPECT_FALSE(calls_[3]->done || calls_[4]->done || calls_[5]->done || calls_[6]->done);
  Return("a1");
  EXPECT_TRUE(granted(3)) << "a2: the oldest waiting lease that fits";
  EXPECT_FALSE(calls_[4]->done) << "nothing left for s1";
  Return("b1");
  EXPECT_TRUE(granted(4)) << "s1 before b2 and a3";
  EXPECT_FALSE(calls_[5]->done || calls_[6]->done) << "one CPU is left: too little for either";
  Return("s1");
  EXPECT_TRUE(granted(5)) << "b2 before a3";
  EXPECT_FALSE(calls_[6]->done);
  EXPECT_EQ(leases_.num_queued(), 1u);
}

}  // namespace
}  // namespace manta::raylet

namespace manta::raylet {
namespace {

TEST_F(LeaseManagerTest, AViewChangedWithoutNoticeIsSeenByTheNextEvent) {
  NodeId other = AddNode({{"CPU", 4}}, {});
  Request("all", {{"CPU", 4}});
  Call* waits = Request("waits", {{"CPU", 2}});
  EXPECT_FALSE(waits->done);
  // The other node reports room, and OnClusterChanged is not called.
  rpc::NodeResources report;
  report.set_node_id(other.Binary());
  report.set_version(2);
  (*report.mutable_total())["CPU"] = 4;
  (*report.mutable_available())["CPU"] = 4;
  ASSERT_TRUE(view_.OnNodeResources(report));
  Request("unrelated", {{"TPU", 1}});
  ASSERT_TRUE(waits->done);
  EXPECT_EQ(waits->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(waits->reply.retry_at().node_id(), other.Binary());
}

}  // namespace
}  // namespace manta::raylet
