// Every mutating raylet handler, called twice with the same request (a
// retry whose reply was lost): the second call answers as the first did and
// changes nothing — no second lease, worker, reservation or return.
#include "absl/strings/str_cat.h"
#include "common/placement_group_resources.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "raylet/bundle_manager.h"
#include "raylet/drain_state.h"
#include "raylet/fake_worker_pool.h"
#include "raylet/lease_manager.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using google::protobuf::util::MessageDifferencer;
using Reply = rpc::RequestWorkerLeaseReply;

using testing::Set;

class RayletIdempotencyTest : public ::testing::Test {
 protected:
  RayletIdempotencyTest()
      : local_(Set({{"CPU", 4}, {"TPU", 4}}), 4),
        view_(self_),
        leases_({self_, "10.0.0.1", {}}, &local_, &view_, &pool_),
        bundles_({self_, {}}, &local_, &leases_) {}

  // Calls `handle` twice with the same request and checks that the second
  // call answered as the first (both at once) and left State() as the first
  // left it.
  template <typename R>
  R Twice(const std::function<void(R*, rpc::Done)>& handle) {
    R first, second;
    absl::Status s1 = absl::UnknownError("no reply"), s2 = absl::UnknownError("no reply");
    handle(&first, [&s1](const absl::Status& s) { s1 = s; });
    std::string after_first = State();
    handle(&second, [&s2](const absl::Status& s) { s2 = s; });
    EXPECT_EQ(s1, s2);
    EXPECT_TRUE(MessageDifferencer::Equals(first, second)) << first.DebugString() << " vs " << second.DebugString();
    EXPECT_EQ(after_first, State());
    return first;
  }

  // What the node holds and what it did to workers, as text.
  std::string State() {
    return absl::StrCat("total=", local_.total().DebugString(), " available=", local_.available().DebugString(),
                        " bundles=", local_.bundles().size(), " leases=", leases_.num_leases(),
                        " granted=", leases_.num_granted(), " pops=", pops_, " pushed=", pool_.pushed.size(),
                        " disconnected=", pool_.disconnected.size(), " killed_jobs=", pool_.killed_jobs.size());
  }

  rpc::RequestWorkerLeaseRequest LeaseRequest(const std::string& id, double cpus, bool grant_or_reject = false) {
    rpc::RequestWorkerLeaseRequest req;
    req.set_lease_id(id);
    req.mutable_spec()->set_job_id(std::string("\0\0\0\1", 4));
    req.mutable_spec()->set_worker_executable("/bin/worker");
    (*req.mutable_spec()->mutable_resources())["CPU"] = cpus;
    req.set_grant_or_reject(grant_or_reject);
    return req;
  }
  void Lease(const rpc::RequestWorkerLeaseRequest& req, Reply* reply, rpc::Done done) {
    size_t before = pool_.pops.size();
    leases_.HandleRequestWorkerLease(req, reply, std::move(done));
    pops_ += static_cast<int>(pool_.pops.size() - before);
  }
  // A granted lease `id` of `cpus` CPUs.
  Reply Granted(const std::string& id, double cpus) {
    Reply reply;
    bool done = false;
    leases_.HandleRequestWorkerLease(LeaseRequest(id, cpus), &reply, [&](const absl::Status&) { done = true; });
    EXPECT_TRUE(done);
    EXPECT_EQ(reply.outcome(), Reply::GRANTED);
    return reply;
  }

  rpc::PrepareBundlesRequest PrepareRequest(const PlacementGroupId& group, bool commit) {
    rpc::PrepareBundlesRequest req;
    for (int i = 0; i < 2; ++i) {
      rpc::Bundle* b = req.add_bundles();
      b->set_placement_group_id(group.Binary());
      b->set_index(i);
      (*b->mutable_resources())["CPU"] = 1;
    }
    req.set_commit(commit);
    return req;
  }
  void Prepare(const PlacementGroupId& group, bool commit) {
    rpc::PrepareBundlesReply reply;
    bundles_.HandlePrepareBundles(PrepareRequest(group, commit), &reply,
                                  [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
    EXPECT_TRUE(reply.success());
  }

  NodeId self_ = NodeId::FromRandom();
  LocalResourceManager local_;
  ClusterView view_;
  FakeWorkerPool pool_;
  LeaseManager leases_;
  BundleManager bundles_;
  int pops_ = 0;
};

// ---------------------------------------------------------------- leases

TEST_F(RayletIdempotencyTest, RequestWorkerLeaseGrantedOnce) {
  pool_.auto_grant = false;
  auto req = LeaseRequest("lease-1", 2);
  Reply first, second;
  int answered = 0;
  Lease(req, &first, [&](const absl::Status&) { ++answered; });
  Lease(req, &second, [&](const absl::Status&) { ++answered; });  // joins the waiting lease
  EXPECT_EQ(pops_, 1);
  pool_.CompletePop();
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(first.outcome(), Reply::GRANTED);
  EXPECT_TRUE(MessageDifferencer::Equals(first, second));
  // Once granted, a retry gets the same grant and takes nothing more.
  Reply third = Twice<Reply>([&](Reply* r, rpc::Done d) { Lease(req, r, std::move(d)); });
  EXPECT_TRUE(MessageDifferencer::Equals(first, third));
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2);
  EXPECT_EQ(leases_.num_granted(), 1u);
}

TEST_F(RayletIdempotencyTest, RequestWorkerLeaseAfterReturnIsNotGrantedAgain) {
  Granted("lease-1", 2);
  rpc::ReturnWorkerRequest ret;
  ret.set_lease_id("lease-1");
  Twice<rpc::ReturnWorkerReply>([&](auto* r, rpc::Done d) { leases_.HandleReturnWorker(ret, r, std::move(d)); });
  EXPECT_EQ(pool_.pushed.size(), 1u);  // the worker went back once
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 4);
  // A late retry of the request: answered, but no second lease.
  Reply late = Twice<Reply>([&](Reply* r, rpc::Done d) { Lease(LeaseRequest("lease-1", 2), r, std::move(d)); });
  EXPECT_EQ(late.outcome(), Reply::CANCELLED);
  EXPECT_EQ(leases_.num_leases(), 0u);
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 4);
}

TEST_F(RayletIdempotencyTest, RequestWorkerLeaseRefusedAnswersTheSame) {
  Granted("big", 4);
  Reply rejected = Twice<Reply>(
      [&](Reply* r, rpc::Done d) { Lease(LeaseRequest("lease-2", 1, /*grant_or_reject=*/true), r, std::move(d)); });
  EXPECT_EQ(rejected.outcome(), Reply::REJECTED);
}

TEST_F(RayletIdempotencyTest, CancelWorkerLease) {
  pool_.auto_grant = false;
  Reply held;
  int answered = 0;
  Lease(LeaseRequest("lease-1", 1), &held, [&](const absl::Status&) { ++answered; });
  rpc::CancelWorkerLeaseRequest req;
  req.set_lease_id("lease-1");
  auto reply = Twice<rpc::CancelWorkerLeaseReply>(
      [&](auto* r, rpc::Done d) { leases_.HandleCancelWorkerLease(req, r, std::move(d)); });
  EXPECT_TRUE(reply.cancelled());
  EXPECT_EQ(answered, 1);
  EXPECT_EQ(held.outcome(), Reply::CANCELLED);
  pool_.CompletePop();  // the worker comes too late: back to the pool
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 4);
}

TEST_F(RayletIdempotencyTest, KillJobWorkers) {
  Granted("lease-1", 1);
  rpc::KillJobWorkersRequest req;
  req.set_job_id(std::string("\0\0\0\1", 4));
  rpc::KillJobWorkersReply first, second;
  leases_.HandleKillJobWorkers(req, &first, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
  std::string after_first = State();
  leases_.HandleKillJobWorkers(req, &second, [](const absl::Status& s) { EXPECT_TRUE(s.ok()); });
  // The pool is asked again (stopping the job's workers is idempotent there);
  // nothing else changes.
  EXPECT_EQ(pool_.killed_jobs.size(), 2u);
  EXPECT_EQ(after_first.substr(0, after_first.find(" killed_jobs=")), State().substr(0, State().find(" killed_jobs=")));
}

// ---------------------------------------------------------------- bundles

TEST_F(RayletIdempotencyTest, PrepareBundlesReservesOnce) {
  PlacementGroupId group = PlacementGroupId::FromRandom();
  auto req = PrepareRequest(group, /*commit=*/false);
  auto reply = Twice<rpc::PrepareBundlesReply>(
      [&](auto* r, rpc::Done d) { bundles_.HandlePrepareBundles(req, r, std::move(d)); });
  EXPECT_TRUE(reply.success());
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2);
}

TEST_F(RayletIdempotencyTest, PrepareAndCommitInOneCallCommitsOnce) {
  PlacementGroupId group = PlacementGroupId::FromRandom();
  auto req = PrepareRequest(group, /*commit=*/true);
  auto reply = Twice<rpc::PrepareBundlesReply>(
      [&](auto* r, rpc::Done d) { bundles_.HandlePrepareBundles(req, r, std::move(d)); });
  EXPECT_TRUE(reply.committed());
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", group)).ToDouble(), 2);
}

TEST_F(RayletIdempotencyTest, CommitBundlesCommitsOnce) {
  PlacementGroupId group = PlacementGroupId::FromRandom();
  Prepare(group, false);
  rpc::CommitBundlesRequest req;
  req.set_placement_group_id(group.Binary());
  req.add_indices(0);
  req.add_indices(1);
  Twice<rpc::CommitBundlesReply>([&](auto* r, rpc::Done d) { bundles_.HandleCommitBundles(req, r, std::move(d)); });
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", group)).ToDouble(), 2);
}

TEST_F(RayletIdempotencyTest, CancelBundlesReturnsOnce) {
  PlacementGroupId group = PlacementGroupId::FromRandom();
  Prepare(group, true);
  rpc::CancelBundlesRequest req;
  req.set_placement_group_id(group.Binary());
  Twice<rpc::CancelBundlesReply>([&](auto* r, rpc::Done d) { bundles_.HandleCancelBundles(req, r, std::move(d)); });
  EXPECT_TRUE(local_.bundles().empty());
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 4);
  EXPECT_EQ(local_.total().Get(pg::WildcardName("CPU", group)).ToDouble(), 0);
}

TEST_F(RayletIdempotencyTest, ReleaseUnusedBundles) {
  PlacementGroupId kept = PlacementGroupId::FromRandom(), stale = PlacementGroupId::FromRandom();
  Prepare(kept, true);
  Prepare(stale, true);
  rpc::ReleaseUnusedBundlesRequest req;
  for (int i = 0; i < 2; ++i) {
    rpc::Bundle* b = req.add_bundles_in_use();
    b->set_placement_group_id(kept.Binary());
    b->set_index(i);
  }
  Twice<rpc::ReleaseUnusedBundlesReply>(
      [&](auto* r, rpc::Done d) { bundles_.HandleReleaseUnusedBundles(req, r, std::move(d)); });
  EXPECT_EQ(local_.bundles().size(), 2u);
  EXPECT_EQ(local_.available().Get("CPU").ToDouble(), 2);
}

// ---------------------------------------------------------------- draining

TEST_F(RayletIdempotencyTest, DrainStartsOnce) {
  DrainState drain;
  EXPECT_TRUE(drain.Start("preemption", 5000));
  EXPECT_FALSE(drain.Start("preemption", 5000));  // a retried DrainRaylet
  EXPECT_EQ(drain.deadline_ms(), 5000);
  leases_.StartDraining("preemption");
  std::string after_first = State();
  leases_.StartDraining("preemption");
  EXPECT_EQ(State(), after_first);
  EXPECT_TRUE(leases_.draining());
}

}  // namespace
}  // namespace manta::raylet
