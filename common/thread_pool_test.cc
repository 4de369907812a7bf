#include "common/thread_pool.h"

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(ThreadPoolTest, AtMostMaxThreadsRunAtOnceAndAllWorkRuns) {
  ThreadPool pool(3);
  absl::Mutex mu;
  int running = 0, most = 0, done = 0;
  bool release = false;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.Submit([&] {
      absl::MutexLock lock(&mu);
      most = std::max(most, ++running);
      mu.Await(absl::Condition(&release));
      --running;
      ++done;
    }));
  }
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* r) { return *r == 3; }, &running),
                                    absl::Seconds(10)));
  }
  EXPECT_EQ(pool.threads(), 3);
  {
    absl::MutexLock lock(&mu);
    release = true;
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* d) { return *d == 10; }, &done),
                                    absl::Seconds(10)));
    EXPECT_EQ(most, 3);
  }
  pool.Stop();
  EXPECT_EQ(pool.threads(), 0);
}

TEST(ThreadPoolTest, OneThreadRunsWorkInOrderAndStopDrainsTheQueue) {
  ThreadPool pool(1);
  absl::Mutex mu;
  bool release = false;
  std::vector<int> order;
  ASSERT_TRUE(pool.Submit([&] {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&release));
    order.push_back(0);
  }));
  for (int i = 1; i < 5; ++i) {
    ASSERT_TRUE(pool.Submit([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    }));
  }
  EXPECT_EQ(pool.threads(), 1);
  bool before_join_ran = false;
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  pool.Stop([&] { before_join_ran = true; });
  EXPECT_TRUE(before_join_ran);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4})) << "queued work runs before Stop returns";
  bool ran = false;
  EXPECT_FALSE(pool.Submit([&] { ran = true; }));
  pool.Stop();  // idempotent
  EXPECT_FALSE(ran);
}

// A thread that went idle takes one piece of a later burst; the rest get
// threads of their own (up to the cap) instead of queuing behind it.
TEST(ThreadPoolTest, ABurstAfterAnIdleSpellRunsInParallel) {
  ThreadPool pool(4);
  absl::Mutex mu;
  bool first_done = false;
  ASSERT_TRUE(pool.Submit([&] {
    absl::MutexLock lock(&mu);
    first_done = true;
  }));
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&first_done), absl::Seconds(10)));
  }
  int started = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Submit([&] {
      absl::MutexLock lock(&mu);
      ++started;
      // Each waits for all three: one thread alone would wait forever.
      mu.AwaitWithTimeout(absl::Condition(
                              +[](int* n) { return *n == 3; }, &started),
                          absl::Seconds(10));
    }));
  }
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* n) { return *n == 3; }, &started),
                                    absl::Seconds(10)))
        << "only " << started << " of 3 ran at once";
  }
  EXPECT_GE(pool.threads(), 3);
  pool.Stop();
}

}  // namespace
}  // namespace manta
