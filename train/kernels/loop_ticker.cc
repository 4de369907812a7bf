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
    while (!stop_.load(std::memory_order_relaxed)) {
      if (::write(fd_, &one, sizeof(one)) < 0) {
        // The counter is full or the descriptor is gone: the next turn drains it.
      }
      absl::SleepFor(period);
    }
  });
}

LoopTicker::~LoopTicker() {
  if (fd_ < 0) return;
  // Unregistering waits for a turn of the loop, which the thread still
  // provides; then nothing calls handleEvents any more.
  Tcp(device_)->unregisterDescriptor(fd_, this);
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void LoopTicker::handleEvents(int /*events*/) {
  ++turns_;
  uint64_t count = 0;
  if (::read(fd_, &count, sizeof(count)) < 0) {
    // Nothing to drain (EAGAIN): another turn already did.
  }
}

}  // namespace manta::train
