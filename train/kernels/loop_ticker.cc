#include "train/kernels/loop_ticker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <exception>

#include "gloo/transport/tcp/device.h"

namespace manta::train {

namespace {

gloo::transport::tcp::Device* Tcp(const std::shared_ptr<gloo::transport::Device>& device) {
  return static_cast<gloo::transport::tcp::Device*>(device.get());
}

}  // namespace

LoopTicker::LoopTicker(std::shared_ptr<gloo::transport::Device> device, absl::Duration period)
    : device_(std::move(device)) {
  if (!device_) return;
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return;  // no ticks: the waits are as long as gloo makes them
  try {
    Tcp(device_)->registerDescriptor(fd_, EPOLLIN, this);
  } catch (const std::exception&) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  thread_ = std::thread([this, period] {
    const uint64_t one = 1;
    do {
      if (::write(fd_, &one, sizeof(one)) < 0) {
        // The counter is full or the descriptor is gone: the next turn drains it.
      }
    } while (!stop_.WaitForNotificationWithTimeout(period));
  });
}

LoopTicker::~LoopTicker() {
  if (fd_ < 0) return;
  // Unregistering waits for a turn of the loop, which the thread still
  // provides; then nothing calls handleEvents any more.
  Tcp(device_)->unregisterDescriptor(fd_, this);
  stop_.Notify();
  thread_.join();
  ::close(fd_);
}

bool LoopTicker::AwaitTurns(int64_t n, absl::Duration timeout) {
  struct Want {
    const int64_t* turns;
    int64_t n;
  };
  absl::MutexLock lock(&mu_);
  Want want{&turns_, n};
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](Want* w) { return *w->turns >= w->n; }, &want),
                              timeout);
}

void LoopTicker::handleEvents(int /*events*/) {
  {
    absl::MutexLock lock(&mu_);
    ++turns_;
  }
  uint64_t count = 0;
  if (::read(fd_, &count, sizeof(count)) < 0) {
    // Nothing to drain (EAGAIN): another turn already did.
  }
}

}  // namespace manta::train
