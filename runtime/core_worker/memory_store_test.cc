#include "runtime/core_worker/memory_store.h"

#include <thread>

#include "gtest/gtest.h"
#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

TEST(MemoryStoreTest, GetWaitsForPutFromAnotherThread) {
  MemoryStore store;
  ObjectId id = ObjectId::FromRandom();
  store.Expect(id);
  std::thread t([&] { store.Put(id, std::make_shared<const std::string>("v")); });
  auto r = store.Get({id}, absl::InfiniteFuture());
  t.join();
  ASSERT_TRUE(r[0].ok());
  EXPECT_EQ(**r[0], "v");
}

TEST(MemoryStoreTest, GetTimesOutOnPendingAndReportsUnknown) {
  MemoryStore store;
  ObjectId pending = ObjectId::FromRandom();
  store.Expect(pending);
  auto r = store.Get({pending, ObjectId::FromRandom()}, absl::Now());
  EXPECT_EQ(GetErrorType(r[0].status()), ErrorType::kTimeout);
  EXPECT_EQ(r[1].status().code(), absl::StatusCode::kNotFound);
}

TEST(MemoryStoreTest, FailCarriesTheErrorType) {
  MemoryStore store;
  ObjectId id = ObjectId::FromRandom();
  store.Fail(id, MakeError(ErrorType::kWorkerDied, "boom"));
  auto r = store.Get({id}, absl::Now());
  EXPECT_EQ(GetErrorType(r[0].status()), ErrorType::kWorkerDied);
  EXPECT_EQ(r[0].status().message(), "boom");
}

TEST(MemoryStoreTest, ReferencesFreeValuesIncludingOnesReleasedWhilePending) {
  MemoryStore store;
  ObjectId a = ObjectId::FromRandom();
  store.Put(a, std::make_shared<const std::string>(std::string(1000, 'x')));
  store.AddReference(a);
  EXPECT_EQ(store.bytes(), 1000);
  store.RemoveReference(a);
  EXPECT_FALSE(store.Contains(a));
  EXPECT_EQ(store.bytes(), 0);

  ObjectId b = ObjectId::FromRandom();
  store.Expect(b);
  store.AddReference(b);
  store.RemoveReference(b);
  EXPECT_TRUE(store.Contains(b));  // still pending
  store.Put(b, std::make_shared<const std::string>("late"));
  EXPECT_FALSE(store.Contains(b));
  EXPECT_EQ(store.size(), 0u);
}

TEST(MemoryStoreTest, CountsAreReturnedAndRefsToValuesElsewhereLeaveNothing) {
  MemoryStore store;
  ObjectId a = ObjectId::FromRandom();
  EXPECT_FALSE(store.TryAddReference(a));  // unknown: nothing made
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.RemoveReference(a), -1);
  // A ref to a value another process owns, never fetched: the entry goes
  // with the last ref (nothing is expected here).
  EXPECT_EQ(store.AddReference(a), 1);
  EXPECT_EQ(store.AddReference(a), 2);
  EXPECT_EQ(store.RemoveReference(a), 1);
  EXPECT_EQ(store.RemoveReference(a), 0);
  EXPECT_EQ(store.size(), 0u);

  ObjectId b = ObjectId::FromRandom();
  store.Put(b, std::make_shared<const std::string>("v"));
  EXPECT_TRUE(store.TryAddReference(b));
  EXPECT_EQ(store.RemoveReference(b), 0);
  EXPECT_FALSE(store.Contains(b));
}

TEST(MemoryStoreTest, MarkedEntriesAreReportedWhenErasedByAnyPath) {
  MemoryStore store;
  std::vector<ObjectId> erased;
  store.SetEraseListener([&](const ObjectId& id) { erased.push_back(id); });
  ObjectId a = ObjectId::FromRandom(), b = ObjectId::FromRandom(), c = ObjectId::FromRandom();
  EXPECT_FALSE(store.NotifyOnErase(a));  // not here
  // Released while pending, erased when it arrives.
  store.Expect(a);
  EXPECT_TRUE(store.NotifyOnErase(a));
  store.AddReference(a);
  store.RemoveReference(a);
  EXPECT_TRUE(erased.empty());
  store.Put(a, std::make_shared<const std::string>("a"));
  // Its last reference dropped once ready.
  store.Put(b, std::make_shared<const std::string>("b"));
  store.AddReference(b);
  EXPECT_TRUE(store.NotifyOnErase(b));
  store.RemoveReference(b);
  // Erased directly; an unmarked one says nothing.
  store.Put(c, std::make_shared<const std::string>("c"));
  store.Erase(c);
  EXPECT_EQ(erased, (std::vector<ObjectId>{a, b}));
  EXPECT_EQ(store.size(), 0u);
}

TEST(MemoryStoreTest, WaitReturnsOnceEnoughAreReadyAndOnReadyFires) {
  MemoryStore store;
  ObjectId a = ObjectId::FromRandom(), b = ObjectId::FromRandom();
  store.Expect(a);
  store.Expect(b);
  int fired = 0;
  store.OnReady(b, [&](const absl::StatusOr<Value>&) { ++fired; });
  store.Put(b, std::make_shared<const std::string>("b"));
  EXPECT_EQ(fired, 1);
  auto ready = store.Wait({a, b}, 1, absl::InfiniteFuture());
  EXPECT_FALSE(ready[0]);
  EXPECT_TRUE(ready[1]);
}

TEST(MemoryStoreTest, ABlockedWaitSeesEveryPutAndUnrelatedChangesDoNotWakeItEarly) {
  MemoryStore store;
  std::vector<ObjectId> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(ObjectId::FromRandom());
    store.Expect(ids.back());
  }
  ObjectId other = ObjectId::FromRandom();
  store.Expect(other);
  store.Put(ids[4], std::make_shared<const std::string>("4"));
  std::thread putter([&] {
    store.AddReference(other);  // changes the store, readies nothing waited on
    store.Put(other, std::make_shared<const std::string>("o"));
    store.Put(ids[1], std::make_shared<const std::string>("1"));
    store.Fail(ids[2], absl::InternalError("failed"));  // an error is ready too
  });
  std::vector<bool> ready = store.Wait(ids, 3, absl::InfiniteFuture());
  putter.join();
  EXPECT_EQ(ready, (std::vector<bool>{false, true, true, false, true, false}));
  // Not enough by the deadline: which are ready now, nothing more.
  EXPECT_EQ(store.Wait(ids, 4, absl::Now() + absl::Milliseconds(20)), ready);
  EXPECT_EQ(store.Ready(ids), ready);
}

TEST(MemoryStoreTest, AValueReadyElsewhereCountsOnlyForAWaitThatSaysSoAndOnlyHeldOnesAreStored) {
  MemoryStore store;
  ObjectId borrowed = ObjectId::FromRandom(), gone = ObjectId::FromRandom();
  store.AddReference(borrowed);
  store.MarkReadyElsewhere(gone);  // no entry: nothing made
  EXPECT_FALSE(store.Contains(gone));
  EXPECT_FALSE(store.PutIfPresent(gone, std::make_shared<const std::string>("g")));
  EXPECT_FALSE(store.Contains(gone));
  store.MarkReadyElsewhere(borrowed);
  EXPECT_TRUE(store.ReadyElsewhere(borrowed));
  EXPECT_FALSE(store.TryGet(borrowed).has_value());
  std::thread waker([&] {
    // A Wait that counts it returns at once; one that needs it here waits.
    EXPECT_EQ(store.Wait({borrowed}, 1, absl::InfiniteFuture(), /*count_elsewhere=*/true), std::vector<bool>{true});
    EXPECT_TRUE(store.PutIfPresent(borrowed, std::make_shared<const std::string>("b")));
  });
  EXPECT_EQ(store.Wait({borrowed}, 1, absl::InfiniteFuture()), std::vector<bool>{true});
  waker.join();
  EXPECT_EQ(***store.TryGet(borrowed), "b");
}

}  // namespace
}  // namespace manta::core
