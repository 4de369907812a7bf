// LoopThread: an EventLoop run by its own thread for the owner's life — the
// io loop of a unit test, or of a process part that has no loop of its own.
//
//   LoopThread io;
//   io.RunOnLoop([&] { client->GetClusterId(...); });   // waits for it to run
#pragma once

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/event_loop.h"

namespace manta {

class LoopThread {
 public:
  LoopThread() : thread_([this] { loop_.Run(); }) {}
  ~LoopThread() { Stop(); }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  // Stops and joins the loop thread; nothing posted runs after this.
  void Stop() {
    if (!thread_.joinable()) return;
    loop_.Stop();
    thread_.join();
  }
  EventLoop* loop() { return &loop_; }
  // Runs `fn` on the loop and waits for it. Not from the loop thread.
  void RunOnLoop(const std::function<void()>& fn) {
    absl::Notification done;
    loop_.Post([&] {
      fn();
      done.Notify();
    });
    done.WaitForNotification();
  }

 private:
  EventLoop loop_;
  std::thread thread_;
};

}  // namespace manta
