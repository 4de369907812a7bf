#include "raylet/bundle_manager.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/placement_group_resources.h"
#include "gtest/gtest.h"
#include "raylet/fake_worker_pool.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using Reply = rpc::RequestWorkerLeaseReply;

using testing::Set;

using Call = testing::LeaseCall;

class BundleManagerTest : public ::testing::Test {
 protected:
  BundleManagerTest()
      : local_(Set({{"CPU", 8}, {"TPU", 4}}), 4),
        view_(self_),
        leases_({self_, "10.0.0.1", {{"zone", "a"}}}, &local_, &view_, &pool_),
        bundles_({self_, {{"zone", "a"}}}, &local_, &leases_) {}

  static rpc::Bundle MakeBundle(const PlacementGroupId& g, int index, const std::map<std::string, double>& r) {
    rpc::Bundle b;
    b.set_placement_group_id(g.Binary());
    b.set_index(index);
    for (const auto& [k, v] : r) (*b.mutable_resources())[k] = v;
    return b;
  }

  // Returns the status; `reply` gets the reply.
  absl::Status Prepare(const std::vector<rpc::Bundle>& bundles, rpc::PrepareBundlesReply* reply = nullptr,
                       bool commit = false) {
    rpc::PrepareBundlesRequest req;
    for (const auto& b : bundles) *req.add_bundles() = b;
    req.set_commit(commit);
    rpc::PrepareBundlesReply local_reply;
    absl::Status status = absl::UnknownError("not done");
    bundles_.HandlePrepareBundles(req, reply ? reply : &local_reply, [&](const absl::Status& s) { status = s; });
    return status;
  }
  absl::Status Commit(const PlacementGroupId& g, const std::vector<int>& indices) {
    rpc::CommitBundlesRequest req;
    req.set_placement_group_id(g.Binary());
    for (int i : indices) req.add_indices(i);
    rpc::CommitBundlesReply reply;
    absl::Status status = absl::UnknownError("not done");
    bundles_.HandleCommitBundles(req, &reply, [&](const absl::Status& s) { status = s; });
    return status;
  }
  absl::Status CancelBundles(const PlacementGroupId& g, const std::vector<int>& indices) {
    rpc::CancelBundlesRequest req;
    req.set_placement_group_id(g.Binary());
    for (int i : indices) req.add_indices(i);
    rpc::CancelBundlesReply reply;
    absl::Status status = absl::UnknownError("not done");
    bundles_.HandleCancelBundles(req, &reply, [&](const absl::Status& s) { status = s; });
    return status;
  }
  absl::Status ReleaseUnused(const std::vector<BundleKey>& in_use) {
    rpc::ReleaseUnusedBundlesRequest req;
    for (const auto& [g, i] : in_use) {
      rpc::Bundle* b = req.add_bundles_in_use();
      b->set_placement_group_id(g.Binary());
      b->set_index(i);
    }
    rpc::ReleaseUnusedBundlesReply reply;
    absl::Status status = absl::UnknownError("not done");
    bundles_.HandleReleaseUnusedBundles(req, &reply, [&](const absl::Status& s) { status = s; });
    return status;
  }
  // Prepares and commits one group's bundles.
  void Reserve(const PlacementGroupId& g, const std::vector<std::map<std::string, double>>& bundles) {
    std::vector<rpc::Bundle> b;
    for (size_t i = 0; i < bundles.size(); ++i) b.push_back(MakeBundle(g, static_cast<int>(i), bundles[i]));
    rpc::PrepareBundlesReply reply;
    ASSERT_TRUE(Prepare(b, &reply).ok());
    ASSERT_TRUE(reply.success()) << reply.message();
    ASSERT_TRUE(Commit(g, {}).ok());
  }

  Call* Lease(const std::string& id, const std::map<std::string, double>& resources, const PlacementGroupId* g,
              int bundle_index) {
    rpc::RequestWorkerLeaseRequest req;
    req.set_lease_id(id);
    rpc::TaskSpec* spec = req.mutable_spec();
    spec->set_job_id(std::string("\0\0\0\1", 4));
    spec->set_worker_executable("/bin/worker");
    for (const auto& [k, v] : resources) (*spec->mutable_resources())[k] = v;
    if (g != nullptr) {
      spec->set_placement_group_id(g->Binary());
      spec->set_bundle_index(bundle_index);
    }
    calls_.push_back(std::make_unique<Call>());
    Call* c = calls_.back().get();
    leases_.HandleRequestWorkerLease(req, &c->reply, [c](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_FALSE(c->done) << "answered twice";
      c->done = true;
    });
    return c;
  }
  WorkerId WorkerOf(const Call* c) { return *WorkerId::FromBinary(c->reply.worker_address().worker_id()); }
  bool Disconnected(const WorkerId& w) {
    return std::find(pool_.disconnected.begin(), pool_.disconnected.end(), w) != pool_.disconnected.end();
  }

  NodeId self_ = NodeId::FromRandom();
  LocalResourceManager local_;
  ClusterView view_;
  FakeWorkerPool pool_;
  LeaseManager leases_;
  BundleManager bundles_;
  std::vector<std::unique_ptr<Call>> calls_;
  PlacementGroupId g_ = PlacementGroupId::FromRandom();
};

TEST_F(BundleManagerTest, PrepareCommitCancelRoundTripRestoresResources) {
  const ResourceSet total = local_.total(), available = local_.available();
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"TPU", 4}}), MakeBundle(g_, 1, {{"CPU", 2}})}, &reply).ok());
  EXPECT_TRUE(reply.success()) << reply.message();
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 6.0);
  ASSERT_TRUE(Commit(g_, {0, 1}).ok());
  EXPECT_EQ(local_.total().Get(pg::IndexedName("TPU", 0, g_)).ToDouble(), 4.0);
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", g_)).ToDouble(), 2.0);
  ASSERT_TRUE(CancelBundles(g_, {}).ok());
  EXPECT_EQ(local_.total(), total);
  EXPECT_EQ(local_.available(), available);
  EXPECT_TRUE(local_.bundles().empty());
  ASSERT_TRUE(CancelBundles(g_, {}).ok()) << "cancel is idempotent";
  EXPECT_EQ(local_.available(), available);
}

TEST_F(BundleManagerTest, PrepareWithCommitMakesTheBundlesUsableInOneCall) {
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"TPU", 4}}), MakeBundle(g_, 1, {{"CPU", 2}})}, &reply, true).ok());
  EXPECT_TRUE(reply.success() && reply.committed()) << reply.message();
  EXPECT_EQ(local_.total().Get(pg::IndexedName("TPU", 0, g_)).ToDouble(), 4.0);
  EXPECT_EQ(local_.available().Get(pg::WildcardName("CPU", g_)).ToDouble(), 2.0);
  // Retried: nothing more is reserved.
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"TPU", 4}}), MakeBundle(g_, 1, {{"CPU", 2}})}, &reply, true).ok());
  EXPECT_EQ(local_.total().Get(pg::IndexedName("TPU", 0, g_)).ToDouble(), 4.0);
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 6.0);
  // Nothing fits: nothing is held or committed.
  rpc::PrepareBundlesReply no;
  PlacementGroupId other = PlacementGroupId::FromRandom();
  ASSERT_TRUE(Prepare({MakeBundle(other, 0, {{"CPU", 7}})}, &no, true).ok());
  EXPECT_FALSE(no.success() || no.committed());
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", other)).ToDouble(), 0.0);
  ASSERT_TRUE(CancelBundles(g_, {}).ok());
}

TEST_F(BundleManagerTest, PrepareIsAllOrNothingAndRetriesDoNotDoubleReserve) {
  rpc::PrepareBundlesReply no;
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"CPU", 6}}), MakeBundle(g_, 1, {{"CPU", 6}})}, &no).ok());
  EXPECT_FALSE(no.success());
  EXPECT_NE(no.message().find("CPU"), std::string::npos) << no.message();
  EXPECT_TRUE(local_.bundles().empty());
  EXPECT_EQ(local_.available(), local_.total());

  rpc::PrepareBundlesReply yes;
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"CPU", 6}})}, &yes).ok());
  ASSERT_TRUE(yes.success());
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"CPU", 6}})}, &yes).ok());
  EXPECT_TRUE(yes.success());
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2.0);
  ASSERT_TRUE(Commit(g_, {0}).ok());
  ASSERT_TRUE(Commit(g_, {0}).ok());
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", g_)).ToDouble(), 6.0);
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"CPU", 6}})}, &yes).ok());
  EXPECT_TRUE(yes.success());
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2.0);
  EXPECT_EQ(Prepare({MakeBundle(g_, 0, {{"CPU", 5}})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Commit(g_, {1}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Commit(PlacementGroupId::FromRandom(), {0}).code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleManagerTest, BadInputChangesNothing) {
  Reserve(g_, {{{"CPU", 1}}});
  const ResourceSet total = local_.total(), available = local_.available();
  const int64_t version = local_.version();
  rpc::Bundle bad_id = MakeBundle(g_, 1, {{"CPU", 1}});
  bad_id.set_placement_group_id("short");
  rpc::Bundle bad_selector = MakeBundle(g_, 1, {{"CPU", 1}});
  (*bad_selector.mutable_label_selector())["zone"] = "in(a";
  std::vector<std::vector<rpc::Bundle>> invalid = {
      {},
      {bad_id},
      {MakeBundle(g_, -1, {{"CPU", 1}})},
      {MakeBundle(g_, 1, {{"CPU", 1}}), MakeBundle(g_, 1, {{"CPU", 1}})},
      {MakeBundle(g_, 1, {})},
      {MakeBundle(g_, 1, {{"CPU", -1}})},
      {MakeBundle(g_, 1, {{"CPU", std::nan("")}})},
      {MakeBundle(g_, 1, {{"CPU", std::numeric_limits<double>::infinity()}})},
      {MakeBundle(g_, 1, {{"TPU", 1.5}})},
      {MakeBundle(g_, 1, {{"CPU", 1}}), MakeBundle(PlacementGroupId::FromRandom(), 2, {{"CPU", 1}})},
      {MakeBundle(g_, 1, {{"CPU", 1}}), MakeBundle(g_, 0, {{"CPU", 2}})},
      {MakeBundle(PlacementGroupId(), 0, {{"CPU", 1}})},
      {bad_selector},
  };
  for (const auto& request : invalid) {
    absl::Status s = Prepare(request);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  rpc::Bundle elsewhere = MakeBundle(g_, 1, {{"CPU", 1}});
  elsewhere.set_node_id(NodeId::FromRandom().Binary());
  EXPECT_EQ(Prepare({elsewhere}).code(), absl::StatusCode::kFailedPrecondition);
  rpc::Bundle wrong_zone = MakeBundle(g_, 1, {{"CPU", 1}});
  (*wrong_zone.mutable_label_selector())["zone"] = "b";
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare({wrong_zone}, &reply).ok());
  EXPECT_FALSE(reply.success());
  EXPECT_NE(reply.message().find("label"), std::string::npos) << reply.message();

  EXPECT_EQ(Commit(g_, {-1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CancelBundles(g_, {-1}).code(), absl::StatusCode::kInvalidArgument);
  rpc::CommitBundlesRequest bad_commit;
  bad_commit.set_placement_group_id("x");
  rpc::CommitBundlesReply commit_reply;
  absl::Status s;
  bundles_.HandleCommitBundles(bad_commit, &commit_reply, [&](const absl::Status& st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  rpc::ReleaseUnusedBundlesRequest bad_release;
  bad_release.add_bundles_in_use()->set_placement_group_id("x");
  rpc::ReleaseUnusedBundlesReply release_reply;
  bundles_.HandleReleaseUnusedBundles(bad_release, &release_reply, [&](const absl::Status& st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(local_.total(), total);
  EXPECT_EQ(local_.available(), available);
  EXPECT_EQ(local_.version(), version);
  EXPECT_EQ(local_.bundles().size(), 1u);
}

TEST_F(BundleManagerTest, CommitStartsLeasesWaitingForTheGroup) {
  Call* waiting = Lease("w", {{"TPU", 2}}, &g_, 0);
  EXPECT_FALSE(waiting->done) << "held infeasible until the group is committed somewhere";
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare({MakeBundle(g_, 0, {{"TPU", 2}})}, &reply).ok());
  EXPECT_FALSE(waiting->done) << "a prepared bundle is not usable";
  ASSERT_TRUE(Commit(g_, {0}).ok());
  ASSERT_TRUE(waiting->done);
  EXPECT_EQ(waiting->reply.outcome(), Reply::GRANTED);
  EXPECT_EQ(std::vector<int>(waiting->reply.tpu_chip_ids().begin(), waiting->reply.tpu_chip_ids().end()),
            std::vector<int>({0, 1}));
}

TEST_F(BundleManagerTest, CancelKillsGrantedLeasesAndCancelsQueuedOnes) {
  PlacementGroupId other = PlacementGroupId::FromRandom();
  Reserve(g_, {{{"CPU", 2}, {"TPU", 2}}, {{"CPU", 1}}});
  Reserve(other, {{{"CPU", 1}}});
  Call* granted = Lease("granted", {{"CPU", 1}, {"TPU", 2}}, &g_, 0);
  Call* any = Lease("any", {{"CPU", 1}}, &g_, -1);  // bundle 0 still has 1 CPU
  Call* queued = Lease("queued", {{"TPU", 1}}, &g_, 0);
  Call* survivor = Lease("survivor", {{"CPU", 1}}, &other, 0);
  Call* plain = Lease("plain", {{"CPU", 1}}, nullptr, 0);
  ASSERT_EQ(granted->reply.outcome(), Reply::GRANTED);
  EXPECT_EQ(granted->reply.tpu_chip_ids_size(), 2);
  ASSERT_EQ(any->reply.outcome(), Reply::GRANTED);
  EXPECT_FALSE(queued->done);
  ASSERT_EQ(survivor->reply.outcome(), Reply::GRANTED);
  ASSERT_EQ(plain->reply.outcome(), Reply::GRANTED);
  pool_.auto_grant = false;
  Call* starting = Lease("starting", {{"CPU", 1}}, &g_, 1);
  EXPECT_FALSE(starting->done);
  ASSERT_EQ(pool_.pops.size(), 1u);

  ASSERT_TRUE(CancelBundles(g_, {}).ok());
  EXPECT_TRUE(Disconnected(WorkerOf(granted)));
  EXPECT_TRUE(Disconnected(WorkerOf(any)));
  EXPECT_FALSE(Disconnected(WorkerOf(survivor)));
  EXPECT_FALSE(Disconnected(WorkerOf(plain)));
  for (Call* c : {queued, starting}) {
    ASSERT_TRUE(c->done);
    EXPECT_EQ(c->reply.outcome(), Reply::CANCELLED);
    EXPECT_NE(c->reply.message().find("placement group " + g_.Hex() + " was removed"), std::string::npos)
        << c->reply.message();
  }
  EXPECT_EQ(leases_.num_leases(), 2u);
  EXPECT_FALSE(leases_.OnWorkerExit(WorkerOf(granted))) << "its lease is already gone";
  EXPECT_TRUE(local_.bundles().count({other, 0}));
  EXPECT_EQ(local_.bundles().size(), 1u);
  // Only the surviving leases and the other group's bundle hold resources.
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 6.0);
  EXPECT_EQ(local_.available().Get("TPU").ToDouble(), 4.0);
  EXPECT_TRUE(local_.total().Get(pg::WildcardName("CPU", g_)).IsZero());
  pool_.CompletePop();  // the worker started for the cancelled lease goes back idle
  EXPECT_EQ(pool_.pushed.size(), 1u);
}

TEST_F(BundleManagerTest, CancellingOneBundleLeavesTheOthersRunning) {
  Reserve(g_, {{{"CPU", 1}}, {{"CPU", 2}}});
  Call* in0 = Lease("in0", {{"CPU", 1}}, &g_, 0);
  Call* any = Lease("any", {{"CPU", 2}}, &g_, -1);  // only bundle 1 holds it
  Call* waiting_any = Lease("waiting_any", {{"CPU", 1}}, &g_, -1);
  ASSERT_EQ(in0->reply.outcome(), Reply::GRANTED);
  ASSERT_EQ(any->reply.outcome(), Reply::GRANTED);
  EXPECT_FALSE(waiting_any->done);
  ASSERT_TRUE(CancelBundles(g_, {1}).ok());
  EXPECT_TRUE(Disconnected(WorkerOf(any)));
  EXPECT_FALSE(Disconnected(WorkerOf(in0)));
  EXPECT_FALSE(waiting_any->done) << "bundle 0 is still here";
  EXPECT_EQ(local_.bundles().size(), 1u);
  rpc::ReturnWorkerRequest ret;
  ret.set_lease_id("in0");
  rpc::ReturnWorkerReply ret_reply;
  leases_.HandleReturnWorker(ret, &ret_reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
  ASSERT_TRUE(waiting_any->done);
  EXPECT_EQ(waiting_any->reply.outcome(), Reply::GRANTED);
}

TEST_F(BundleManagerTest, ReleaseUnusedKeepsExactlyTheListedBundles) {
  PlacementGroupId other = PlacementGroupId::FromRandom();
  PlacementGroupId third = PlacementGroupId::FromRandom();
  Reserve(g_, {{{"CPU", 1}}, {{"CPU", 1}}});
  Reserve(other, {{{"CPU", 1}}});
  rpc::PrepareBundlesReply reply;
  ASSERT_TRUE(Prepare({MakeBundle(third, 0, {{"TPU", 1}})}, &reply).ok());  // prepared only
  Call* doomed = Lease("doomed", {{"CPU", 1}}, &other, 0);
  ASSERT_EQ(doomed->reply.outcome(), Reply::GRANTED);
  ASSERT_TRUE(ReleaseUnused({{g_, 1}, {third, 0}, {PlacementGroupId::FromRandom(), 3}}).ok());
  std::vector<BundleKey> held;
  for (const auto& [key, b] : local_.bundles()) held.push_back(key);
  std::vector<BundleKey> want = {{g_, 1}, {third, 0}};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(held, want);
  EXPECT_TRUE(Disconnected(WorkerOf(doomed)));
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 7.0);
  EXPECT_EQ(local_.available().Get("TPU").ToDouble(), 3.0);
  ASSERT_TRUE(ReleaseUnused({}).ok());
  EXPECT_TRUE(local_.bundles().empty());
  EXPECT_EQ(local_.available(), local_.total());
}

}  // namespace
}  // namespace manta::raylet
