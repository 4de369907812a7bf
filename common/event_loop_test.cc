#include "common/event_loop.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace manta {

// The timer a test forgets on purpose: never deleted (its loop is gone), and
// not reported as a leak. External linkage, so the store is not optimized out.
EventLoop::Timer* forgotten_timer = nullptr;

namespace {

TEST(EventLoopTest, PostFromOtherThreadsRunsInOrderOnLoopThread) {
  EventLoop loop;
  std::vector<int> seen;
  std::atomic<bool> all_in_loop{true};
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) {
      loop.Post([&, i] {
        if (!loop.IsInLoopThread()) all_in_loop = false;
        seen.push_back(i);
        if (i == 999) loop.Stop();
      });
    }
  });
  loop.Run();
  producer.join();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_TRUE(all_in_loop);
}

TEST(EventLoopTest, TimersFireAndCancelOnDestruction) {
  EventLoop loop;
  int repeats = 0;
  bool cancelled_fired = false;
  std::unique_ptr<EventLoop::Timer> every;
  auto cancelled = loop.RunAfter(absl::Milliseconds(1), [&] { cancelled_fired = true; });
  cancelled.reset();
  every = loop.RunEvery(absl::Milliseconds(1), [&] {
    if (++repeats == 3) {
      every.reset();
      loop.Stop();
    }
  });
  loop.Run();
  EXPECT_EQ(repeats, 3);
  EXPECT_FALSE(cancelled_fired);
}

TEST(EventLoopTest, ATimerStillArmedWhenTheLoopIsDestroyedNeverFires) {
  bool fired = false;
  {
    EventLoop loop;
    // Due at once, and never dropped by its owner (as a timer that owns
    // itself would be).
    forgotten_timer = loop.RunAfter(absl::ZeroDuration(), [&] { fired = true; }).release();
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_FALSE(fired);  // and forgotten_timer must not be touched: its loop is gone
}

TEST(EventLoopTest, RunOnceFiresOnceAndAnUnfiredOneIsDestroyedWithTheLoop) {
  auto owned = std::make_shared<int>(0);
  std::weak_ptr<int> watch = owned;
  int fired = 0;
  {
    EventLoop loop;
    loop.RunOnce(absl::Milliseconds(1), [&] {
      ++fired;
      loop.RunOnce(absl::Milliseconds(1), [&] { loop.Stop(); });
    });
    loop.RunOnce(absl::Hours(1), [owned = std::move(owned)] {});
    loop.Run();
    EXPECT_EQ(fired, 1);
    EXPECT_FALSE(watch.expired());  // held by the pending closure
  }
  EXPECT_TRUE(watch.expired());  // destroyed unrun with the loop, not leaked
}

TEST(EventLoopTest, AMailboxOutlivesItsLoopAndDropsWhatIsPostedAfterIt) {
  std::shared_ptr<EventLoop::Mailbox> mailbox;
  bool ran = false;
  auto owned = std::make_shared<int>(0);
  std::weak_ptr<int> watch = owned;
  {
    EventLoop loop;
    mailbox = loop.mailbox();
    loop.Post([&] { ran = true; });  // queued, never run: the loop never runs
  }
  EXPECT_FALSE(ran);
  std::thread late(
      [&, owned = std::move(owned)]() mutable { mailbox->Post([&ran, owned = std::move(owned)] { ran = true; }); });
  late.join();
  EXPECT_FALSE(ran);
  EXPECT_TRUE(watch.expired());  // the dropped closure was destroyed, not kept
}

// The loop's checker names the thread that made the loop until another
// thread runs it, then that one: the maker's calls are refused from then on.
TEST(EventLoopTest, TheLoopThreadIsTheMakerUntilAnotherThreadRunsIt) {
  EventLoop loop;
  EXPECT_TRUE(loop.IsInLoopThread());
  EXPECT_TRUE(loop.thread_checker().CalledOnValidThread());
  bool other_before_run = true;
  std::thread([&] { other_before_run = loop.thread_checker().CalledOnValidThread(); }).join();
  EXPECT_FALSE(other_before_run) << "the loop's checker is bound when made, not by its first call";
  std::atomic<bool> runner_in_loop{false};
  std::thread runner([&] { loop.Run(); });
  loop.Post([&] {
    runner_in_loop = loop.thread_checker().CalledOnValidThread();
    loop.Stop();
  });
  runner.join();
  EXPECT_TRUE(runner_in_loop);
  EXPECT_FALSE(loop.IsInLoopThread()) << "the maker is not the loop thread once another one ran it";
}

TEST(EventLoopTest, ALoopOnlyCallFromAnotherThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop loop;
        std::thread([&] { loop.RunAfter(absl::Seconds(1), [] {}); }).join();
      },
      "event_loop.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta
