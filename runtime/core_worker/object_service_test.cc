#include "runtime/core_worker/object_service.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"

#include "runtime/core_worker/wire.h"
#include "runtime/core_worker/submit_test_util.h"

namespace manta::core {
namespace {

Value V(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

// Owners as a table of values; timers run when the test says.
class FakeOwners : public OwnerClient {
 public:
  absl::StatusOr<Value> Fetch(const std::string& owner, const ObjectId& id, absl::Duration wait) override {
    fetches.push_back({owner, wait});
    if (owner == "10.0.0.9:9") return MakeError(ErrorType::kOwnerDied, "cannot reach the owner");
    if (owner == "10.0.0.8:8") return MakeError(ErrorType::kWorkerDied, "the worker died");
    auto it = values.find(id);
    if (it == values.end()) return MakeError(ErrorType::kTimeout, "timed out waiting for object " + id.Hex());
    return it->second;
  }
  // Recorded; the test answers them (Answer), from any thread.
  void Watch(const std::string& owner, const ObjectId& id, absl::Duration wait, bool fetch, Watched done) override {
    absl::MutexLock lock(&mu);
    watches.push_back({owner, id, wait, fetch, std::move(done)});
  }
  struct WatchCall {
    std::string owner;
    ObjectId id;
    absl::Duration wait;
    bool fetch = false;
    Watched done;
  };
  // Waits until `n` watches were made; a copy of watch `i`'s request.
  WatchCall AwaitWatch(size_t i) {
    absl::MutexLock lock(&mu);
    auto made = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return watches.size() > i; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&made), absl::Seconds(10)));
    if (!made()) return {};
    WatchCall c = watches[i];
    c.done = nullptr;
    return c;
  }
  void Answer(size_t i, absl::StatusOr<std::optional<Value>> v) {
    Watched done;
    {
      absl::MutexLock lock(&mu);
      done = std::move(watches.at(i).done);
    }
    done(std::move(v));
  }
  size_t NumWatches() {
    absl::MutexLock lock(&mu);
    return watches.size();
  }
  void RunAfter(absl::Duration delay, std::function<void()> fn) override { timers.push_back({delay, std::move(fn)}); }
  void RunTimers() {
    auto due = std::move(timers);
    timers.clear();
    for (auto& [delay, fn] : due) fn();
  }

  std::map<ObjectId, Value> values;
  std::vector<std::pair<std::string, absl::Duration>> fetches;
  std::deque<std::pair<absl::Duration, std::function<void()>>> timers;
  absl::Mutex mu;
  std::vector<WatchCall> watches ABSL_GUARDED_BY(mu);
};

class ObjectServiceTest : public ::testing::Test {
 protected:
  ObjectServiceTest() { objects.set_self(self); }
  ObjectRefInfo Remote(const ObjectId& id, int port = 2000) {
    return ObjectRefInfo{id, testing::WorkerAddress("owner", port).SerializeAsString()};
  }
  ObjectRefInfo Unreachable(const ObjectId& id) {
    rpc::Address a;
    a.set_ip("10.0.0.9");
    a.set_port(9);
    return ObjectRefInfo{id, a.SerializeAsString()};
  }

  rpc::Address self = testing::WorkerAddress("self", 1000);
  MemoryStore store;
  FakeOwners owners;
  ObjectService objects{&store, &owners};
};

TEST_F(ObjectServiceTest, AValueOwnedElsewhereIsFetchedOnceIntoTheStore) {
  ObjectId id = ObjectId::FromRandom();
  owners.values[id] = V("remote");
  auto got = objects.Get({Remote(id)}, absl::Seconds(5));
  ASSERT_TRUE(got[0].ok());
  EXPECT_EQ(**got[0], "remote");
  ASSERT_EQ(owners.fetches.size(), 1u);
  EXPECT_EQ(owners.fetches[0].first, "10.0.0.1:2000");
  EXPECT_GT(owners.fetches[0].second, absl::Seconds(4));  // what is left of the timeout
  got = objects.Get({Remote(id)}, absl::Seconds(5));
  EXPECT_EQ(**got[0], "remote");
  EXPECT_EQ(owners.fetches.size(), 1u);  // local now
}

TEST_F(ObjectServiceTest, AValueOwnedHereIsNeverFetched) {
  ObjectId id = ObjectId::FromRandom();
  store.Put(id, V("mine"));
  auto got = objects.Get({{id, ""}, {id, self.SerializeAsString()}}, absl::Seconds(1));
  EXPECT_EQ(**got[0], "mine");
  EXPECT_EQ(**got[1], "mine");
  EXPECT_TRUE(owners.fetches.empty());
}

TEST_F(ObjectServiceTest, AnOwnerGoneFailsTheValueButOneNotReadyOnlyTimesOut) {
  ObjectId gone = ObjectId::FromRandom();
  ObjectId pending = ObjectId::FromRandom();
  ObjectId bad = ObjectId::FromRandom();
  store.AddReference(pending);  // the caller's ref
  auto got = objects.Get({Unreachable(gone), Remote(pending), {bad, "not an address"}}, absl::Milliseconds(1));
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kOwnerDied);
  EXPECT_TRUE(absl::IsDeadlineExceeded(got[1].status())) << got[1].status();
  EXPECT_EQ(GetErrorType(got[2].status()), ErrorType::kInvalidArgument);
  // The failure is remembered; the pending value is asked for again.
  owners.values[pending] = V("late");
  got = objects.Get({Unreachable(gone), Remote(pending)}, absl::Seconds(1));
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kOwnerDied);
  ASSERT_TRUE(got[1].ok());
  EXPECT_EQ(**got[1], "late");
}

TEST_F(ObjectServiceTest, WaitFetchLocalCountsABorrowedValueOnceItIsHere) {
  ObjectId first = ObjectId::FromRandom();
  ObjectId second = ObjectId::FromRandom();
  store.AddReference(first);  // the caller's refs
  store.AddReference(second);
  std::vector<bool> which;
  std::thread waiter([&] { which = objects.Wait({Remote(first), Remote(second)}, 1, absl::Seconds(30)); });
  FakeOwners::WatchCall w = owners.AwaitWatch(1);
  EXPECT_EQ(owners.AwaitWatch(0).id, first);
  EXPECT_EQ(w.id, second);
  EXPECT_EQ(w.owner, "10.0.0.1:2000");
  EXPECT_TRUE(w.fetch);
  EXPECT_LE(w.wait, ObjectService::kMaxWatchWait);  // held at the owner, asked again after
  owners.Answer(1, std::optional<Value>(V("second")));
  waiter.join();
  EXPECT_EQ(which, (std::vector<bool>{false, true}));
  EXPECT_EQ(***store.TryGet(second), "second");  // here: Get asks no one
  EXPECT_TRUE(owners.fetches.empty());
  // The Wait is over: an answer still stores the value, but no watch is
  // made again.
  owners.Answer(0, MakeError(ErrorType::kTimeout, "not yet"));
  EXPECT_EQ(owners.NumWatches(), 2u);
  EXPECT_FALSE(store.TryGet(first).has_value());
  // Ready here already: no watch.
  EXPECT_EQ(objects.Wait({Remote(second)}, 1, absl::Seconds(1)), std::vector<bool>{true});
  EXPECT_EQ(owners.NumWatches(), 2u);
}

TEST_F(ObjectServiceTest, WaitWithoutFetchLocalCountsAValueReadyAtItsOwnerAndFetchesNothing) {
  ObjectId id = ObjectId::FromRandom();
  store.AddReference(id);
  std::vector<bool> which;
  std::thread waiter([&] { which = objects.Wait({Remote(id)}, 1, absl::Seconds(30), /*fetch_local=*/false); });
  EXPECT_FALSE(owners.AwaitWatch(0).fetch);
  // Not ready yet: asked again while the Wait lasts.
  owners.Answer(0, MakeError(ErrorType::kTimeout, "not yet"));
  owners.AwaitWatch(1);
  owners.Answer(1, std::optional<Value>());  // ready at the owner
  waiter.join();
  EXPECT_EQ(which, std::vector<bool>{true});
  EXPECT_FALSE(store.TryGet(id).has_value());  // not fetched
  // Known ready there: counted at once; fetch_local then fetches it.
  EXPECT_EQ(objects.Wait({Remote(id)}, 1, absl::Seconds(1), false), std::vector<bool>{true});
  EXPECT_EQ(owners.NumWatches(), 2u);
  std::thread fetcher([&] { which = objects.Wait({Remote(id)}, 1, absl::Seconds(30), true); });
  EXPECT_TRUE(owners.AwaitWatch(2).fetch);
  owners.Answer(2, std::optional<Value>(V("v")));
  fetcher.join();
  EXPECT_EQ(which, std::vector<bool>{true});
  EXPECT_EQ(***store.TryGet(id), "v");
}

TEST_F(ObjectServiceTest, WaitCountsAValueWhoseOwnerIsGoneAsReadyAndFailed) {
  ObjectId id = ObjectId::FromRandom();
  ObjectId dropped = ObjectId::FromRandom();
  store.AddReference(id);
  std::vector<bool> which;
  std::thread waiter([&] { which = objects.Wait({Remote(id), Remote(dropped)}, 1, absl::Seconds(30)); });
  owners.AwaitWatch(1);
  owners.Answer(0, MakeError(ErrorType::kOwnerDied, "cannot reach the owner"));
  waiter.join();
  EXPECT_EQ(which, (std::vector<bool>{true, false}));
  EXPECT_EQ(GetErrorType(objects.Get({Remote(id)}, absl::Seconds(1))[0].status()), ErrorType::kOwnerDied);
  // A value no ref here holds any more is not stored when its answer comes.
  owners.Answer(1, std::optional<Value>(V("late")));
  EXPECT_FALSE(store.Contains(dropped));
}

TEST_F(ObjectServiceTest, AnArgumentIsInlineLocalOrFetchedAndADeadOwnerIsOwnerDied) {
  rpc::TaskArg inline_arg;
  inline_arg.set_data("in");
  EXPECT_EQ(**objects.ResolveArg(inline_arg), "in");

  ObjectId local = ObjectId::FromRandom();
  store.Put(local, V("here"));
  rpc::TaskArg local_arg;
  local_arg.set_object_id(local.Binary());
  EXPECT_EQ(**objects.ResolveArg(local_arg), "here");

  ObjectId remote = ObjectId::FromRandom();
  owners.values[remote] = V("there");
  rpc::TaskArg remote_arg;
  remote_arg.set_object_id(remote.Binary());
  *remote_arg.mutable_owner() = testing::WorkerAddress("owner", 2000);
  EXPECT_EQ(**objects.ResolveArg(remote_arg), "there");

  rpc::TaskArg dead = remote_arg;
  dead.mutable_owner()->set_ip("10.0.0.8");
  dead.mutable_owner()->set_port(8);
  EXPECT_EQ(GetErrorType(objects.ResolveArg(dead).status()), ErrorType::kOwnerDied);

  rpc::TaskArg malformed;
  malformed.set_object_id("short");
  EXPECT_EQ(GetErrorType(objects.ResolveArg(malformed).status()), ErrorType::kInvalidArgument);
}

TEST_F(ObjectServiceTest, StatusOfAnUnknownValueIsNotFoundAtOnce) {
  rpc::GetObjectStatusReply reply;
  int answers = 0;
  objects.AnswerStatus(ObjectId::FromRandom(), absl::Seconds(5), &reply, [&] { ++answers; });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(reply.status(), rpc::GetObjectStatusReply::NOT_FOUND);
  EXPECT_TRUE(owners.timers.empty());
}

TEST_F(ObjectServiceTest, StatusOfAReadyValueCarriesItInlineOrWhereToStreamIt) {
  ObjectId small = ObjectId::FromRandom();
  ObjectId large = ObjectId::FromRandom();
  store.Put(small, V("s"));
  store.Put(large, V(std::string(kInlineLimit + 1, 'x')));
  rpc::GetObjectStatusReply a, b;
  int answers = 0;
  objects.AnswerStatus(small, absl::Seconds(5), &a, [&] { ++answers; });
  objects.AnswerStatus(large, absl::Seconds(5), &b, [&] { ++answers; });
  EXPECT_EQ(answers, 2);
  EXPECT_TRUE(owners.timers.empty());  // nothing held
  EXPECT_EQ(a.status(), rpc::GetObjectStatusReply::READY);
  EXPECT_EQ(a.object().data(), "s");
  EXPECT_FALSE(a.object().stored_remotely());
  EXPECT_TRUE(b.object().stored_remotely());
  EXPECT_EQ(b.object().location().worker_id(), "self");
  EXPECT_EQ(b.object().size(), static_cast<int64_t>(kInlineLimit + 1));
}

TEST_F(ObjectServiceTest, StatusOfAPendingValueIsAnsweredOnceByWhicheverComesFirst) {
  ObjectId id = ObjectId::FromRandom();
  store.Expect(id);
  rpc::GetObjectStatusReply ready_first, timer_first;
  int answers = 0;
  objects.AnswerStatus(id, absl::Milliseconds(300), &ready_first, [&] { ++answers; });
  ASSERT_EQ(owners.timers.size(), 1u);
  EXPECT_EQ(owners.timers[0].first, absl::Milliseconds(300));
  store.Fail(id, MakeError(ErrorType::kApplicationError, "boom"));
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(ready_first.status(), rpc::GetObjectStatusReply::READY);
  EXPECT_EQ(ready_first.object().error().type(), ToProtoErrorType(ErrorType::kApplicationError));
  owners.RunTimers();
  EXPECT_EQ(answers, 1);  // the timer found it answered

  ObjectId later = ObjectId::FromRandom();
  store.Expect(later);
  objects.AnswerStatus(later, absl::Milliseconds(10), &timer_first, [&] { ++answers; });
  owners.RunTimers();
  EXPECT_EQ(answers, 2);
  EXPECT_EQ(timer_first.status(), rpc::GetObjectStatusReply::PENDING);
  store.Put(later, V("too late"));
  EXPECT_EQ(answers, 2);
}

TEST_F(ObjectServiceTest, AReturnHeldForItsOwnerGoesOnceSentWhole) {
  ObjectId held = ObjectId::FromRandom();
  ObjectId owned = ObjectId::FromRandom();
  objects.HoldForOwner(held, V("big"));
  store.Put(owned, V("kept"));
  EXPECT_EQ(**objects.ValueToSend(held), "big");
  objects.Sent(held);
  objects.Sent(owned);  // not held for anyone: stays
  EXPECT_FALSE(store.Contains(held));
  EXPECT_TRUE(store.Contains(owned));
  EXPECT_EQ(GetErrorType(objects.ValueToSend(held).status()), ErrorType::kObjectLost);
}

}  // namespace
}  // namespace manta::core
