// A slow, lossy point-to-point link emulated in user space, for kernels
// without the netem qdisc.
//
// Two TUN devices (layer 3, no packet header) are created in this process's
// network namespace; the caller moves one into another namespace and routes
// traffic over the pair. A thread reads every IP packet the kernel sends
// into either device, drops it with probability `loss`, and writes it into
// the other device `delay` later, in order: what `tc qdisc ... netem delay D
// loss L` does on both ends of a veth pair.
//
//   TunLink::Options o;
//   o.delay = absl::Milliseconds(200);
//   o.loss = 0.05;
//   auto link = TunLink::Create("mtA", "mtB", o);
//   // ip link set mtB netns <host>; addresses and routes over mtA / mtB
//
// The devices disappear when the TunLink is destroyed (they are not
// persistent). Its methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace manta::testing {

class TunLink {
 public:
  struct Options {
    absl::Duration delay = absl::ZeroDuration();  // each way
    double loss = 0;                              // each way, in [0, 1]
    uint64_t seed = 1;                            // of the loss draws
  };
  struct Counts {
    uint64_t forwarded = 0;  // packets written out, both ways
    uint64_t dropped = 0;    // packets lost on purpose
  };

  // Unavailable with the reason when /dev/net/tun cannot be opened or the
  // devices cannot be made (no CAP_NET_ADMIN); InvalidArgument for a loss
  // outside [0, 1], a negative delay or a name longer than 15 bytes.
  static absl::StatusOr<std::unique_ptr<TunLink>> Create(const std::string& a, const std::string& b,
                                                         const Options& options);
  ~TunLink();
  TunLink(const TunLink&) = delete;
  TunLink& operator=(const TunLink&) = delete;

  Counts counts() const { return {forwarded_.load(), dropped_.load()}; }

 private:
  TunLink(int fd_a, int fd_b, int wake, const Options& options);
  void Run();

  const int fd_a_;
  const int fd_b_;
  const int wake_;  // an eventfd: written to stop the thread
  const Options options_;
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace manta::testing
