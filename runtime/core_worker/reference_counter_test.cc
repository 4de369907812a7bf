#include "runtime/core_worker/reference_counter.h"
#include "runtime/core_worker/submit_test_util.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

namespace manta::core {
namespace {

// Records what the counter asks of other processes; timers and checks run
// when the test says.
class FakePeers : public BorrowPeers {
 public:
  struct Removal {
    std::string owner;
    ObjectId id;
    std::string borrower;
    int count;
  };
  struct Check {
    std::string address_worker;  // the worker id in the address checked
    std::string worker_id;
    std::function<void(const absl::Status&, bool)> done;
  };

  bool AddBorrower(const std::string& owner, const ObjectId& id, const rpc::Address& borrower) override {
    adds.push_back({owner, id, borrower.worker_id(), 1});
    return owner_has_value;
  }
  void RemoveBorrower(const std::string& owner, const ObjectId& id, const std::string& borrower_worker_id,
                      int count) override {
    removals.push_back({owner, id, borrower_worker_id, count});
  }
  void CheckWorker(const rpc::Address& at, const std::string& worker_id,
                   std::function<void(const absl::Status&, bool)> done) override {
    checks.push_back({at.worker_id(), worker_id, std::move(done)});
  }
  void RunAfter(absl::Duration delay, std::function<void()> fn) override { timers.push_back({delay, std::move(fn)}); }
  // Runs the timers set so far (not those they set).
  int RunTimers() {
    std::deque<std::pair<absl::Duration, std::function<void()>>> due;
    due.swap(timers);
    for (auto& [delay, fn] : due) fn();
    return static_cast<int>(due.size());
  }
  // Answers every pending check.
  void AnswerChecks(const absl::Status& s, bool same) {
    std::vector<Check> due;
    due.swap(checks);
    for (auto& c : due) c.done(s, same);
  }

  bool owner_has_value = true;
  std::vector<Removal> adds;  // AddBorrower calls, as (owner, id, borrower)
  std::vector<Removal> removals;
  std::vector<Check> checks;
  std::deque<std::pair<absl::Duration, std::function<void()>>> timers;
};

class ReferenceCounterTest : public ::testing::Test {
 protected:
  ReferenceCounterTest() { refs.set_self(self); }

  // A value owned here with one local ref, as Put leaves it.
  ObjectId PutOwned() {
    ObjectId id = ObjectId::FromRandom();
    store.Put(id, std::make_shared<const std::string>("v"));
    refs.AddLocalReference(id);
    return id;
  }
  ObjectRefInfo RefOwnedBy(const rpc::Address& owner) {
    return ObjectRefInfo{ObjectId::FromRandom(), owner.SerializeAsString()};
  }

  rpc::Address self = testing::WorkerAddress("self-worker", 1000);
  rpc::Address owner = testing::WorkerAddress("owner-worker", 2000);
  rpc::Address borrower = testing::WorkerAddress("borrower-worker", 3000);
  MemoryStore store;
  FakePeers peers;
  ReferenceCounter refs{&store, &peers};
};

TEST_F(ReferenceCounterTest, TheFirstRefToABorrowedValueRegistersAndTheLastUnregisters) {
  ObjectRefInfo ref = RefOwnedBy(owner);
  refs.AddBorrowedReference(ref);
  refs.AddBorrowedReference(ref);
  ASSERT_EQ(peers.adds.size(), 1u);  // one registration for both refs
  EXPECT_EQ(peers.adds[0].owner, "10.0.0.1:2000");
  EXPECT_EQ(peers.adds[0].borrower, "self-worker");
  EXPECT_EQ(refs.num_borrowed(), 1u);

  refs.RemoveLocalReference(ref.id);
  EXPECT_TRUE(peers.removals.empty());
  refs.RemoveLocalReference(ref.id);
  ASSERT_EQ(peers.removals.size(), 1u);
  EXPECT_EQ(peers.removals[0].owner, "10.0.0.1:2000");
  EXPECT_EQ(peers.removals[0].id, ref.id);
  EXPECT_EQ(peers.removals[0].borrower, "self-worker");
  EXPECT_EQ(peers.removals[0].count, 1);
  EXPECT_EQ(refs.num_borrowed(), 0u);
  EXPECT_FALSE(store.Contains(ref.id));
}

TEST_F(ReferenceCounterTest, ARefToAValueOwnedHereOrGoneAtItsOwnerRegistersNothingToEnd) {
  ObjectRefInfo mine = RefOwnedBy(self);
  refs.AddBorrowedReference(mine);
  EXPECT_TRUE(peers.adds.empty());

  peers.owner_has_value = false;
  ObjectRefInfo gone = RefOwnedBy(owner);
  refs.AddBorrowedReference(gone);
  EXPECT_EQ(peers.adds.size(), 1u);
  refs.RemoveLocalReference(gone.id);
  refs.RemoveLocalReference(mine.id);
  EXPECT_TRUE(peers.removals.empty());
  EXPECT_EQ(store.size(), 0u);
}

TEST_F(ReferenceCounterTest, AStoppedCounterRegistersWithNoOwner) {
  refs.Stop();
  ObjectRefInfo ref = RefOwnedBy(owner);
  refs.AddBorrowedReference(ref);
  EXPECT_TRUE(peers.adds.empty());
  refs.RemoveLocalReference(ref.id);
  EXPECT_TRUE(peers.removals.empty());
}

TEST_F(ReferenceCounterTest, ABorrowerKeepsTheValueUntilItUnregisters) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));  // two registrations
  refs.RemoveLocalReference(id);
  EXPECT_TRUE(store.Contains(id));

  refs.RemoveBorrower(id, "someone-else", 2);  // not one of its registrations
  EXPECT_TRUE(store.Contains(id));
  refs.RemoveBorrower(id, "borrower-worker", 1);
  EXPECT_TRUE(store.Contains(id));
  EXPECT_EQ(refs.num_borrowers(), 1u);
  refs.RemoveBorrower(id, "borrower-worker", 5);  // more than it holds: only its own end
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(refs.num_borrowers(), 0u);
}

TEST_F(ReferenceCounterTest, NoBorrowerIsRecordedForAValueAlreadyGone) {
  EXPECT_FALSE(refs.RecordBorrower(ObjectId::FromRandom(), borrower));
  EXPECT_EQ(refs.num_borrowers(), 0u);
  EXPECT_TRUE(peers.timers.empty());
}

TEST_F(ReferenceCounterTest, ABorrowerThatStopsAnsweringIsDroppedAfterThreeChecks) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  refs.RemoveLocalReference(id);
  ASSERT_EQ(peers.timers.size(), 1u);
  EXPECT_EQ(peers.timers[0].first, ReferenceCounter::kBorrowerCheckEvery);

  for (int i = 0; i < ReferenceCounter::kChecksBeforeGone; ++i) {
    EXPECT_TRUE(store.Contains(id)) << "check " << i;
    ASSERT_EQ(peers.RunTimers(), 1);
    ASSERT_EQ(peers.checks.size(), 1u);
    EXPECT_EQ(peers.checks[0].worker_id, "borrower-worker");
    peers.AnswerChecks(absl::UnavailableError("connection refused"), false);
  }
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(refs.num_borrowers(), 0u);
  // The next check finds nobody to check and stops for good.
  peers.RunTimers();
  EXPECT_TRUE(peers.checks.empty());
  EXPECT_TRUE(peers.timers.empty());
}

TEST_F(ReferenceCounterTest, AnAnswerBetweenFailedChecksStartsTheCountAgain) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  refs.RemoveLocalReference(id);
  for (int i = 0; i < 2 * ReferenceCounter::kChecksBeforeGone; ++i) {
    peers.RunTimers();
    const bool answer = i % 2 == 1;
    peers.AnswerChecks(answer ? absl::OkStatus() : absl::UnavailableError("down"), answer);
  }
  EXPECT_TRUE(store.Contains(id));
}

TEST_F(ReferenceCounterTest, AnotherProcessAtTheBorrowersAddressDropsItAtOnce) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  refs.RemoveLocalReference(id);
  peers.RunTimers();
  peers.AnswerChecks(absl::OkStatus(), /*same=*/false);
  EXPECT_FALSE(store.Contains(id));
}

TEST_F(ReferenceCounterTest, AServerThatIsNoWorkerOfThisClusterCountsAsNoAnswer) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  refs.RemoveLocalReference(id);
  // Refused, or answered by a server that does not know the call or
  // refuses the token: each counts; a timeout in between neither counts
  // nor starts the count again.
  static_assert(ReferenceCounter::kChecksBeforeGone == 3, "three counted outcomes below");
  const absl::Status outcomes[] = {absl::UnimplementedError("unknown service manta.rpc.CoreWorkerService"),
                                   absl::DeadlineExceededError("no answer in 10 s"),
                                   absl::UnauthenticatedError("wrong cluster token"),
                                   absl::UnavailableError("connection refused")};
  for (const absl::Status& s : outcomes) {
    EXPECT_TRUE(store.Contains(id)) << s;
    ASSERT_EQ(peers.RunTimers(), 1);
    peers.AnswerChecks(s, false);
  }
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(refs.num_borrowers(), 0u);
}

TEST_F(ReferenceCounterTest, ABorrowerThatOnlyTimesOutIsKept) {
  ObjectId id = PutOwned();
  ASSERT_TRUE(refs.RecordBorrower(id, borrower));
  refs.RemoveLocalReference(id);
  // A stopped or overloaded borrower still holds its refs.
  for (int i = 0; i < 3 * ReferenceCounter::kChecksBeforeGone; ++i) {
    ASSERT_EQ(peers.RunTimers(), 1);
    peers.AnswerChecks(i % 2 == 0 ? absl::DeadlineExceededError("no answer in 10 s") : absl::InternalError("oops"),
                       false);
  }
  EXPECT_TRUE(store.Contains(id));
  EXPECT_EQ(refs.num_borrowers(), 1u);
}

TEST_F(ReferenceCounterTest, HeldArgumentsLiveUntilTheWorkIsDone) {
  ObjectId arg = PutOwned();
  ObjectId inside = PutOwned();
  rpc::TaskSpec spec;
  spec.add_args()->set_object_id(arg.Binary());
  spec.add_args()->set_data("inline");
  refs.HoldArgs("task-1", spec, {inside});
  refs.HoldArgs("task-1", spec, {inside});  // a second hold under the same key keeps nothing
  EXPECT_EQ(refs.num_holds(), 1u);
  refs.RemoveLocalReference(arg);
  refs.RemoveLocalReference(inside);
  EXPECT_TRUE(store.Contains(arg));
  EXPECT_TRUE(store.Contains(inside));
  refs.ReleaseHeld("task-1");
  EXPECT_FALSE(store.Contains(arg));
  EXPECT_FALSE(store.Contains(inside));
  EXPECT_EQ(refs.num_holds(), 0u);
  refs.ReleaseHeld("task-1");  // nothing left: no effect
}

TEST_F(ReferenceCounterTest, AnErasedValueReleasesTheRefsInsideIt) {
  ObjectId inner = PutOwned();
  ObjectId outer = PutOwned();
  ASSERT_TRUE(refs.HoldRefs(outer.Binary(), {inner}));  // takes over inner's ref
  ASSERT_TRUE(store.NotifyOnErase(outer));
  EXPECT_TRUE(store.Contains(inner));
  refs.RemoveLocalReference(outer);
  EXPECT_FALSE(store.Contains(outer));
  EXPECT_FALSE(store.Contains(inner));
}

TEST_F(ReferenceCounterTest, AWorkerHandsOverRefsSoTheCallerCanHoldThem) {
  rpc::TaskSpec spec;
  *spec.mutable_caller_address() = owner;  // the caller
  spec.set_caller_worker_id(owner.worker_id());
  ObjectId mine = PutOwned();                                               // owned by this worker
  ObjectRefInfo callers = RefOwnedBy(owner);                                // the caller's own value
  ObjectRefInfo third = RefOwnedBy(testing::WorkerAddress("third", 4000));  // borrowed from a third process
  refs.AddBorrowedReference(callers);
  refs.AddBorrowedReference(third);
  peers.adds.clear();

  rpc::ReturnObject ret;
  refs.HandOverNested(spec, {{mine, ""}, callers, third}, &ret);
  ASSERT_EQ(ret.nested_size(), 3);
  // Its own value: the caller is recorded as its borrower here.
  EXPECT_TRUE(ret.nested(0).registered());
  EXPECT_EQ(refs.num_borrowers(), 1u);
  EXPECT_TRUE(store.Contains(mine));
  // The third process's value: the caller is registered with its owner.
  ASSERT_EQ(peers.adds.size(), 1u);
  EXPECT_EQ(peers.adds[0].owner, "10.0.0.1:4000");
  EXPECT_EQ(peers.adds[0].borrower, "owner-worker");
  EXPECT_TRUE(ret.nested(2).registered());
  // The caller's own value: held here a while, then let go.
  EXPECT_FALSE(ret.nested(1).registered());
  EXPECT_TRUE(store.Contains(callers.id));
  ASSERT_FALSE(peers.timers.empty());
  EXPECT_EQ(peers.timers.back().first, ReferenceCounter::kHandOverGrace);
  auto grace = std::move(peers.timers.back().second);
  peers.timers.pop_back();
  grace();
  EXPECT_FALSE(store.Contains(callers.id));
}

TEST_F(ReferenceCounterTest, ACallerHoldsTheRefsInsideAReturnWhileItHoldsTheReturn) {
  ObjectId own = PutOwned();
  ObjectId foreign = ObjectId::FromRandom();
  rpc::ReturnObject ret;
  auto* n = ret.add_nested();
  n->set_object_id(own.Binary());
  n->set_owner(self.SerializeAsString());
  n = ret.add_nested();
  n->set_object_id(foreign.Binary());
  n->set_owner(owner.SerializeAsString());
  n->set_registered(true);  // the worker registered this process with the owner
  ObjectId outer = PutOwned();
  refs.HoldNested(outer, ret);
  refs.HoldNested(outer, ret);  // the same reply again counts once
  refs.RemoveLocalReference(own);
  EXPECT_TRUE(store.Contains(own));
  EXPECT_EQ(refs.num_borrowed(), 1u);

  refs.RemoveLocalReference(outer);
  EXPECT_FALSE(store.Contains(own));
  ASSERT_EQ(peers.removals.size(), 1u);
  EXPECT_EQ(peers.removals[0].id, foreign);
  EXPECT_EQ(peers.removals[0].owner, "10.0.0.1:2000");
}

}  // namespace
}  // namespace manta::core
