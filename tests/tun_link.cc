#include "tests/tun_link.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace manta::testing {
namespace {

// A link's buffer: past this many packets in flight one way, more are lost,
// as a full queue on a real link loses them.
constexpr size_t kMaxInFlight = 10000;
constexpr size_t kMaxPacket = 65536;

absl::StatusOr<int> OpenTun(const std::string& name) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open /dev/net/tun: ", strerror(errno)));
  struct ifreq request;
  memset(&request, 0, sizeof(request));
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  memcpy(request.ifr_name, name.data(), name.size());
  if (ioctl(fd, TUNSETIFF, &request) < 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot create TUN device ", name, ": ", strerror(error)));
  }
  return fd;
}

struct InFlight {
  absl::Time due;
  std::string packet;
};

// One direction of the link: packets read from `from`, written to `to`.
struct Direction {
  int from;
  int to;
  std::deque<InFlight> queue;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TunLink>> TunLink::Create(const std::string& a, const std::string& b,
                                                         const Options& options) {
  if (!(options.loss >= 0 && options.loss <= 1)) return absl::InvalidArgumentError("loss must be in [0, 1]");
  if (options.delay < absl::ZeroDuration()) return absl::InvalidArgumentError("delay must not be negative");
  for (const std::string* name : {&a, &b}) {
    if (name->empty() || name->size() >= IFNAMSIZ) {
      return absl::InvalidArgumentError(absl::StrCat("bad device name '", *name, "'"));
    }
  }
  auto fd_a = OpenTun(a);
  if (!fd_a.ok()) return fd_a.status();
  auto fd_b = OpenTun(b);
  if (!fd_b.ok()) {
    close(*fd_a);
    return fd_b.status();
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(*fd_a);
    close(*fd_b);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  return std::unique_ptr<TunLink>(new TunLink(*fd_a, *fd_b, wake, options));
}

TunLink::TunLink(int fd_a, int fd_b, int wake, const Options& options)
    : fd_a_(fd_a), fd_b_(fd_b), wake_(wake), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

TunLink::~TunLink() {
  uint64_t one = 1;
  while (write(wake_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(fd_a_);
  close(fd_b_);
  close(wake_);
}

void TunLink::Run() {
  std::mt19937_64 random(options_.seed);
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  Direction ways[2] = {{fd_a_, fd_b_, {}}, {fd_b_, fd_a_, {}}};
  std::string buffer(kMaxPacket, '\0');
  while (true) {
    // Sleep until a packet arrives, the first packet in flight is due, or
    // the destructor wakes us.
    absl::Time now = absl::Now();
    int timeout_ms = -1;
    for (const Direction& way : ways) {
      if (way.queue.empty()) continue;
      const double ms = std::ceil(absl::ToDoubleMilliseconds(way.queue.front().due - now));
      const int wait = ms <= 0 ? 0 : static_cast<int>(std::min(ms, 60000.0));
      timeout_ms = timeout_ms < 0 ? wait : std::min(timeout_ms, wait);
    }
    struct pollfd fds[3] = {{fd_a_, POLLIN, 0}, {fd_b_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (poll(fds, 3, timeout_ms) < 0 && errno != EINTR) return;
    if (fds[2].revents != 0) return;
    now = absl::Now();
    for (int w = 0; w < 2; ++w) {
      if (fds[w].revents == 0) continue;
      Direction& way = ways[w];
      while (true) {
        ssize_t n = read(way.from, buffer.data(), buffer.size());
        if (n <= 0) break;  // EAGAIN: drained
        if (draw(random) < options_.loss || way.queue.size() >= kMaxInFlight) {
          dropped_.fetch_add(1);
          continue;
        }
        way.queue.push_back({now + options_.delay, buffer.substr(0, static_cast<size_t>(n))});
      }
    }
    for (Direction& way : ways) {
      while (!way.queue.empty() && way.queue.front().due <= now) {
        const std::string& packet = way.queue.front().packet;
        // A device that is down refuses the write (EIO): the packet is lost.
        if (write(way.to, packet.data(), packet.size()) == static_cast<ssize_t>(packet.size())) {
          forwarded_.fetch_add(1);
        } else {
          dropped_.fetch_add(1);
        }
        way.queue.pop_front();
      }
    }
  }
}

}  // namespace manta::testing
