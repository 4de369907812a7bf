#include "common/thread_checker.h"

#include <thread>

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(ThreadCheckerTest, TheFirstCallBindsAndOnlyThatThreadPassesAfter) {
  ThreadChecker checker;
  bool other_first = false;
  std::thread([&] { other_first = checker.CalledOnValidThread(); }).join();
  EXPECT_TRUE(other_first) << "the first call binds";
  EXPECT_FALSE(checker.CalledOnValidThread()) << "bound to the other thread";
  ThreadChecker mine;
  EXPECT_TRUE(mine.CalledOnValidThread());
  EXPECT_TRUE(mine.CalledOnValidThread());
  bool other_later = true;
  std::thread([&] { other_later = mine.CalledOnValidThread(); }).join();
  EXPECT_FALSE(other_later);
}

TEST(ThreadCheckerTest, AnExplicitBindMovesTheCheckerToTheCallingThread) {
  ThreadChecker checker;
  checker.BindToCurrentThread();
  bool other_first = true;
  std::thread([&] { other_first = checker.CalledOnValidThread(); }).join();
  EXPECT_FALSE(other_first) << "a bound checker is not bound again by a first check";
  EXPECT_TRUE(checker.CalledOnValidThread());
  bool other_after_bind = false;
  std::thread([&] {
    checker.BindToCurrentThread();
    other_after_bind = checker.CalledOnValidThread();
  }).join();
  EXPECT_TRUE(other_after_bind);
  EXPECT_FALSE(checker.CalledOnValidThread());
}

TEST(ThreadCheckerTest, TheCheckAbortsNamingTheCaller) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ThreadChecker checker;
        MANTA_CHECK_THREAD(checker);
        std::thread([&] { MANTA_CHECK_THREAD(checker); }).join();
      },
      "thread_checker_test.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta
