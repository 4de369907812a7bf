// A draining raylet: the exit decision (DrainState, on an injected clock),
// and the lease and bundle managers refusing new work while granted leases
// and committed bundles keep working.
#include "common/placement_group_resources.h"
#include "gtest/gtest.h"
#include "raylet/bundle_manager.h"
#include "raylet/drain_state.h"
#include "raylet/fake_worker_pool.h"
#include "raylet/lease_manager.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using Reply = rpc::RequestWorkerLeaseReply;
using Action = DrainState::Action;

using testing::Set;

TEST(DrainStateTest, ExitsWhenIdleOrAtTheDeadline) {
  DrainState drain;
  const int64_t now = 1'000'000;
  EXPECT_EQ(drain.Decide(now, {}), Action::kStay) << "not draining";
  EXPECT_TRUE(drain.Start("preemption", now + 30000));
  EXPECT_EQ(drain.Decide(now, {.leased_workers = 1}), Action::kStay);
  EXPECT_EQ(drain.Decide(now, {.bundles = 2}), Action::kStay);
  EXPECT_EQ(drain.Decide(now, {}), Action::kIdle);
  EXPECT_EQ(drain.Decide(now + 29999, {.leased_workers = 1}), Action::kStay);
  EXPECT_EQ(drain.Decide(now + 30000, {.leased_workers = 1}), Action::kDeadline);
  EXPECT_EQ(drain.Decide(now + 30000, {}), Action::kIdle) << "idle wins: nothing to stop";
}

TEST(DrainStateTest, NoDeadlineWaitsForIdleForever) {
  DrainState drain;
  drain.Start("idle", 0);
  EXPECT_EQ(drain.Decide(int64_t{1} << 50, {.leased_workers = 1}), Action::kStay);
  EXPECT_EQ(drain.Decide(0, {}), Action::kIdle);
}

TEST(DrainStateTest, DeadlineOnlyMovesEarlierAndReasonIsTheLatest) {
  DrainState drain;
  EXPECT_TRUE(drain.Start("idle", 0));
  EXPECT_FALSE(drain.Start("preemption", 5000));  // none -> 5 s: earlier
  EXPECT_EQ(drain.deadline_ms(), 5000);
  drain.Start("preemption", 9000);
  EXPECT_EQ(drain.deadline_ms(), 5000);
  drain.Start("maintenance", 0);
  EXPECT_EQ(drain.deadline_ms(), 5000);
  drain.Start("maintenance", 2000);
  EXPECT_EQ(drain.deadline_ms(), 2000);
  EXPECT_EQ(drain.reason(), "maintenance");
  EXPECT_TRUE(drain.draining());
}

using Call = testing::LeaseCall;

struct Options {
  bool grant_or_reject = false;
  bool fail_if_infeasible = false;
};

class DrainingManagersTest : public ::testing::Test {
 protected:
  DrainingManagersTest()
      : local_(Set({{"CPU", 4}}), 0),
        view_(self_),
        leases_({self_, "10.0.0.1", {}}, &local_, &view_, &pool_),
        bundles_({self_, {}}, &local_, &leases_) {}

  Call* Request(const std::string& id, const std::map<std::string, double>& resources, Options o = {}) {
    rpc::RequestWorkerLeaseRequest req;
    req.set_lease_id(id);
    rpc::TaskSpec* spec = req.mutable_spec();
    spec->set_job_id(std::string("\0\0\0\1", 4));
    spec->set_worker_executable("/bin/worker");
    for (const auto& [k, v] : resources) (*spec->mutable_resources())[k] = v;
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

  void Return(const std::string& id) {
    rpc::ReturnWorkerRequest req;
    req.set_lease_id(id);
    rpc::ReturnWorkerReply reply;
    leases_.HandleReturnWorker(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
  }

  // A remote node with `total` and `available` CPUs; `draining` as its
  // NodeInfo says.
  NodeId AddNode(double total, double available, bool draining = false) {
    NodeId id = NodeId::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_node_ip("10.0.0.2");
    info.set_node_manager_port(7000);
    info.set_draining(draining);
    (*info.mutable_resources_total())["CPU"] = total;
    view_.OnNodeInfo(info);
    Report(id, total, available, 1);
    return id;
  }
  void Report(const NodeId& id, double total, double available, int64_t version) {
    rpc::NodeResources r;
    r.set_node_id(id.Binary());
    r.set_version(version);
    (*r.mutable_total())["CPU"] = total;
    (*r.mutable_available())["CPU"] = available;
    view_.OnNodeResources(r);
    leases_.OnClusterChanged();
  }

  absl::Status Prepare(const PlacementGroupId& g, int index, rpc::PrepareBundlesReply* reply, bool commit = false) {
    rpc::PrepareBundlesRequest req;
    rpc::Bundle* b = req.add_bundles();
    b->set_placement_group_id(g.Binary());
    b->set_index(index);
    (*b->mutable_resources())["CPU"] = 1;
    req.set_commit(commit);
    absl::Status status = absl::UnknownError("not done");
    bundles_.HandlePrepareBundles(req, reply, [&](const absl::Status& s) { status = s; });
    return status;
  }

  NodeId self_ = NodeId::FromRandom();
  LocalResourceManager local_;
  ClusterView view_;
  FakeWorkerPool pool_;
  LeaseManager leases_;
  BundleManager bundles_;
  std::vector<std::unique_ptr<Call>> calls_;
};

TEST_F(DrainingManagersTest, GrantedLeasesStayNewOnesGoElsewhere) {
  Call* held = Request("held", {{"CPU", 1}});
  ASSERT_EQ(held->reply.outcome(), Reply::GRANTED);
  NodeId other = AddNode(4, 4);
  AddNode(8, 8, /*draining=*/true);  // never chosen, though it has the most room
  leases_.StartDraining("preemption");
  EXPECT_EQ(leases_.num_granted(), 1u);

  Call* task = Request("task", {{"CPU", 1}});
  ASSERT_TRUE(task->done);
  EXPECT_EQ(task->reply.outcome(), Reply::SPILLBACK) << task->reply.message();
  EXPECT_EQ(task->reply.retry_at().node_id(), other.Binary());

  Call* actor = Request("actor", {{"CPU", 1}}, {.grant_or_reject = true});
  ASSERT_TRUE(actor->done);
  EXPECT_EQ(actor->reply.outcome(), Reply::REJECTED);
  EXPECT_NE(actor->reply.message().find("draining (preemption)"), std::string::npos) << actor->reply.message();

  // The granted lease is answered again on retry and is returned as usual.
  Call* again = Request("held", {{"CPU", 1}});
  EXPECT_EQ(again->reply.outcome(), Reply::GRANTED);
  Return("held");
  EXPECT_EQ(leases_.num_granted(), 0u);
  EXPECT_EQ(local_.available(), local_.total());
}

TEST_F(DrainingManagersTest, WaitsForRoomElsewhereThenSpills) {
  NodeId other = AddNode(4, 0);  // could hold it, busy now
  leases_.StartDraining("preemption");
  Call* task = Request("task", {{"CPU", 1}});
  EXPECT_FALSE(task->done) << "not granted here although this node is free";
  EXPECT_EQ(leases_.num_granted(), 0u);
  EXPECT_TRUE(pool_.prestart_backlogs.empty()) << "no workers started for work that will not run here";
  Report(other, 4, 2, 2);
  ASSERT_TRUE(task->done);
  EXPECT_EQ(task->reply.outcome(), Reply::SPILLBACK);
  EXPECT_EQ(task->reply.retry_at().node_id(), other.Binary());
}

TEST_F(DrainingManagersTest, QueuedLeasesAreReexaminedWhenTheDrainStarts) {
  Call* big = Request("big", {{"CPU", 4}});
  ASSERT_EQ(big->reply.outcome(), Reply::GRANTED);
  Call* queued = Request("queued", {{"CPU", 2}});
  EXPECT_FALSE(queued->done);
  NodeId other = AddNode(2, 0);
  leases_.StartDraining("preemption");
  Return("big");
  EXPECT_FALSE(queued->done) << "freed resources are not granted while draining";
  EXPECT_EQ(leases_.num_granted(), 0u);
  Report(other, 2, 2, 2);
  ASSERT_TRUE(queued->done);
  EXPECT_EQ(queued->reply.outcome(), Reply::SPILLBACK);
}

TEST_F(DrainingManagersTest, NoOtherNodeCanHoldItIsInfeasible) {
  AddNode(1, 1);
  leases_.StartDraining("preemption");
  Call* failing = Request("f", {{"CPU", 2}}, {.fail_if_infeasible = true});
  ASSERT_TRUE(failing->done);
  EXPECT_EQ(failing->reply.outcome(), Reply::INFEASIBLE);
  EXPECT_NE(failing->reply.message().find("draining"), std::string::npos) << failing->reply.message();
  Call* waiting = Request("w", {{"CPU", 2}});
  EXPECT_FALSE(waiting->done);
  auto demands = leases_.Demands();
  ASSERT_EQ(demands.size(), 1u);
  EXPECT_EQ(demands[0].num_infeasible_requests_queued(), 1);
  leases_.CancelAll("the raylet is stopping");
  ASSERT_TRUE(waiting->done);
  EXPECT_EQ(waiting->reply.outcome(), Reply::CANCELLED);
}

TEST_F(DrainingManagersTest, PrepareIsRefusedCommittedBundlesStay) {
  PlacementGroupId kept = PlacementGroupId::FromRandom();
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare(kept, 0, &reply, /*commit=*/true).ok());
  ASSERT_TRUE(reply.committed());
  const ResourceSet available = local_.available();
  leases_.StartDraining("preemption");

  rpc::PrepareBundlesReply refused;
  ASSERT_TRUE(Prepare(PlacementGroupId::FromRandom(), 0, &refused).ok());
  EXPECT_FALSE(refused.success());
  EXPECT_NE(refused.message().find("draining"), std::string::npos) << refused.message();
  EXPECT_EQ(local_.available(), available) << "nothing reserved";
  EXPECT_EQ(local_.bundles().size(), 1u);

  // A retried prepare of a bundle held here is still answered as before.
  rpc::PrepareBundlesReply retried;
  ASSERT_TRUE(Prepare(kept, 0, &retried, /*commit=*/true).ok());
  EXPECT_TRUE(retried.success()) << retried.message();
  EXPECT_EQ(local_.bundles().size(), 1u);
}

}  // namespace
}  // namespace manta::raylet
