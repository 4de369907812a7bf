// EventLoop: one libuv loop run by one thread. Post() is the only way in from
// other threads; everything else must be called on the loop thread, which
// thread_checker() names to the objects that live on it.
//
//   EventLoop loop;
//   auto timer = loop.RunEvery(absl::Milliseconds(300), [&] { health.Tick(); });
//   loop.OnSignal(SIGTERM, [&] { loop.Stop(); });
//   loop.Run();                       // returns after Stop()
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "common/thread_checker.h"

struct uv_loop_s;
struct uv_async_s;

namespace manta {

class EventLoop {
 public:
  // A scheduled callback; cancelled when destroyed. Loop thread only.
  class Timer {
   public:
    virtual ~Timer() = default;
  };

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // The way into the loop for code that may run after the loop is gone (a
  // gRPC completion on a library thread): it holds the mailbox, not the loop,
  // and a Post after the loop's destruction drops `fn` unrun. Safe from any
  // thread.
  class Mailbox {
   public:
    void Post(std::function<void()> fn);

   private:
    friend class EventLoop;
    absl::Mutex mu_;
    std::vector<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
    uv_async_s* async_ ABSL_GUARDED_BY(mu_) = nullptr;  // null once the loop is destroyed
  };

  // Runs `fn` on the loop thread, in order of posting. Safe from any thread,
  // including the loop thread, while the loop exists; code that may outlive
  // the loop posts through mailbox() instead.
  void Post(std::function<void()> fn) { mailbox_->Post(std::move(fn)); }
  const std::shared_ptr<Mailbox>& mailbox() const { return mailbox_; }

  bool IsInLoopThread() const;
  // Bound to the loop thread: objects that live on the loop check it in
  // every loop-only call, MANTA_CHECK_THREAD(loop_->thread_checker()).
  const ThreadChecker& thread_checker() const { return thread_; }

  // Loop thread only. `fn` runs once after `delay` / every `period`.
  std::unique_ptr<Timer> RunAfter(absl::Duration delay, std::function<void()> fn);
  std::unique_ptr<Timer> RunEvery(absl::Duration period, std::function<void()> fn);
  // Loop thread only. Like RunAfter, but the loop owns the timer: `fn` runs
  // once, or is destroyed unrun with the loop.
  void RunOnce(absl::Duration delay, std::function<void()> fn);

  // Loop thread only: `fn` runs on the loop whenever `signum` arrives.
  void OnSignal(int signum, std::function<void()> fn);

  // Runs until Stop(). The calling thread becomes the loop thread.
  void Run();
  // Safe from any thread.
  void Stop();

  uv_loop_s* uv_loop() { return loop_; }

 private:
  class TimerImpl;
  struct SignalHandle;
  static void OnAsync(uv_async_s* handle);
  void Drain();

  uv_loop_s* loop_;
  uv_async_s* async_;
  std::list<std::unique_ptr<Timer>> once_;  // RunOnce's; loop thread only
  std::shared_ptr<Mailbox> mailbox_;
  std::vector<std::unique_ptr<SignalHandle>> signals_;  // loop thread only

  // Bound to the thread that made the loop, then to the one that runs it.
  ThreadChecker thread_;
};

}  // namespace manta
