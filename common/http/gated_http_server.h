// GatedHttpServer: an httplib::Server whose connections are accepted and
// read by one event loop until their request headers are complete; only then
// does a pool thread run httplib's request handling on them.
//
// httplib alone gives each connection a pool thread from accept on, so a few
// hundred idle or slowly-sent connections hold every thread and every real
// request waits (slowloris). Here:
//   * a connection must send its complete headers within `header_deadline`
//     (`pressure_deadline` once half of `max_connections` are in use), else it
//     is closed; headers larger than `max_header_bytes` get 431;
//   * at most `max_connections` are open; past it a new one gets 503;
//   * a body must keep arriving at `min_body_rate` after `body_grace`;
//   * each connection serves one request (Connection: close), so no thread
//     waits on an idle keep-alive connection.
// Routes and handlers are httplib's (Get/Post/set_pre_routing_handler...).
//
//   GatedHttpServer http(limits);
//   http.Get("/x", ...);
//   RETURN_IF_ERROR(http.Bind("127.0.0.1", 8265));
//   http.Serve();            // returns at once; serves on its own threads
//   http.StopServing();      // closes the listener, waits for requests in flight
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace manta::http {

struct HttpLimits {
  int threads = 24;
  int max_connections = 0;  // 0: a quarter of the descriptor limit
  absl::Duration header_deadline = absl::Seconds(10);
  absl::Duration pressure_deadline = absl::Seconds(1);
  size_t max_header_bytes = 64 << 10;
  double min_body_bytes_per_second = 64 << 10;
  absl::Duration body_grace = absl::Seconds(10);
  absl::Duration io_timeout = absl::Seconds(30);  // one read or write
};

class GatedHttpServer : public httplib::Server {
 public:
  explicit GatedHttpServer(HttpLimits limits);
  ~GatedHttpServer() override;

  // Binds and listens (port 0: any free port).
  absl::Status Bind(const std::string& host, int port);
  int bound_port() const { return port_; }
  // Starts the loop and the pool.
  void Serve();
  // Stops accepting, closes connections still sending headers, and waits for
  // requests being handled. Idempotent.
  void StopServing();

  int open_connections() const { return open_.load(); }

 private:
  class Loop;
  void Handle(int fd, std::string head);

  const HttpLimits limits_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> open_{0};
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<httplib::ThreadPool> pool_;
  std::thread loop_thread_;
  bool stopped_ = false;
};

}  // namespace manta::http
