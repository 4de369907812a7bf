// Hostile HTTP clients, for the tests of every HTTP front (the dashboard,
// the model server, every daemon's metrics port): a chunked body that does
// not end, bodies sent a byte a second, requests without the token; and
// what the attacked process holds meanwhile.
//
//   std::vector<std::string> answers = ChunkedBombs(port, "/metrics", 200 << 20, 3);
//   Trickle slow(port, head_with_content_length, 60);   // held open until destroyed
//   HttpAnswer probe = RawRequest(port, "GET /metrics HTTP/1.1\r\nAuthorization: ...\r\n\r\n");
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace manta::testing {

struct HttpAnswer {
  int status = 0;  // 0: no answer
  std::string status_line;
  std::string body;
};

// Sends `request` whole on a new connection and reads the answer until the
// server closes or `timeout` passes.
HttpAnswer RawRequest(int port, const std::string& request, absl::Duration timeout = absl::Seconds(10));

// `n` clients at once, each POSTing to `path` a chunked body of `bytes`
// (1 MiB chunks) with no token, until the body is sent or the server closes;
// returns each one's status line ("" for none).
std::vector<std::string> ChunkedBombs(int port, const std::string& path, uint64_t bytes, int n);

// `n` connections that each send `head` (complete, announcing a body), then
// one byte of the body a second until destroyed.
class Trickle {
 public:
  Trickle(int port, const std::string& head, int n);
  ~Trickle();
  Trickle(const Trickle&) = delete;
  Trickle& operator=(const Trickle&) = delete;

  // How many of the connections had an answer (a status line) by now.
  int Answered();
  // The status codes of the answers so far.
  std::vector<int> Statuses();

 private:
  std::vector<int> fds_;
  std::vector<std::string> received_;
  std::thread dripper_;
  std::atomic<bool> stop_{false};
};

// The resident memory of `pid`, in bytes.
int64_t RssOf(pid_t pid);
// The highest RSS of `pid` while `fn` runs, sampled every 10 ms.
int64_t PeakRssWhile(pid_t pid, const std::function<void()>& fn);
// The process that listens on TCP `port` on this host (-1: none found).
pid_t PidListeningOn(int port);

}  // namespace manta::testing
