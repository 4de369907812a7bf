// Keeps a gloo tcp device's event loop turning while connections are made
// or closed. gloo's loop waits up to 10 ms in epoll when nothing happens,
// and unregistering a socket (each connection a process initiates, each
// connection closed) waits for the loop's next turn: a group of 16
// contexts paid hundreds of milliseconds to connect in those waits alone.
// While a LoopTicker lives, a thread wakes the loop every `period`, so each
// such wait is at most that long.
//
//   LoopTicker ticker(device);   // device from gloo::transport::tcp::CreateDevice
//   ctx->connectFullMesh(store, device);
#pragma once

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gloo/transport/tcp/loop.h"

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace manta::train {

class LoopTicker : public gloo::transport::tcp::Handler {
 public:
  // `device` must be a tcp device; a null device makes a ticker that does
  // nothing (a group of one process has no device).
  explicit LoopTicker(std::shared_ptr<gloo::transport::Device> device, absl::Duration period = absl::Microseconds(200));
  ~LoopTicker() override;
  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

  // On the loop's thread: drains the wake-ups.
  void handleEvents(int events) override;
  // Waits until this ticker has seen `n` turns of the loop, or `timeout`
  // passes; whether it saw them (from any thread).
  bool AwaitTurns(int64_t n, absl::Duration timeout);

 private:
  std::shared_ptr<gloo::transport::Device> device_;
  int fd_ = -1;  // an eventfd registered with the loop
  absl::Notification stop_;
  absl::Mutex mu_;
  int64_t turns_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace manta::train
