// GatedHttpServer: an httplib::Server whose connections are accepted and
// read by one event loop, which decides each request from its head
// (http_front.h) before any of its body is read; only a request it accepted,
// with its body read whole, reaches a pool thread and httplib's handlers.
//
// httplib alone gives each connection a pool thread from accept on and reads
// a body (a chunked one without limit) before any handler can refuse it, so
// idle, slow or endless requests hold every thread and every byte. Here:
//   * a connection must send its complete headers within `header_deadline`
//     (`pressure_deadline` once half of `max_connections` are in use), else it
//     is closed; headers larger than `max_header_bytes` get 431;
//   * at most `max_connections` are open; past it a new one gets 503;
//   * a request the front refuses (no token, a body too large or chunked
//     where the route takes none, an unknown route) is answered from the
//     loop and its body is never read;
//   * an accepted body of up to `max_loop_body_bytes` (every body of an
//     unauthenticated request) is read by the loop, whole, before a pool
//     thread sees the request, within body_grace + size / min_body_rate; the
//     loop holds at most `max_loop_buffered_bytes` of such bodies at once
//     (503 past it); chunked bodies are decoded there, up to their route's
//     limit, and handed on with a Content-Length;
//   * a larger body (an authenticated upload) is read by its pool thread, at
//     most Content-Length bytes, within the same deadline; a peer has at most
//     `max_uploads_per_peer` such uploads at once (503 past it);
//   * each connection serves one request (Connection: close), so no thread
//     waits on an idle keep-alive connection.
// Routes and handlers are httplib's (Get/Post/set_pre_routing_handler...);
// SetFront names what the loop checks and must be called before Serve.
//
//   GatedHttpServer http(limits);
//   http.SetFront(policy);
//   http.Get("/x", ...);
//   RETURN_IF_ERROR(http.Bind("127.0.0.1", 8265));
//   http.Serve();            // returns at once; serves on its own threads
//   http.StopServing();      // closes the listener, waits for requests in flight
#pragma once

#include <httplib.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/http/http_front.h"
#include "common/http/http_limits.h"

namespace manta::http {

class GatedHttpServer : public httplib::Server {
 public:
  explicit GatedHttpServer(HttpLimits limits);
  ~GatedHttpServer() override;

  // What the loop checks of each request's head; before Serve.
  void SetFront(FrontPolicy front);
  // Binds and listens (port 0: any free port).
  absl::Status Bind(const std::string& host, int port);
  int bound_port() const { return port_; }
  // Starts the loop and the pool. CHECK-fails without a front.
  void Serve();
  // Stops accepting, closes connections still sending headers, and waits for
  // requests being handled. Idempotent.
  void StopServing();

  int open_connections() const { return open_.load(); }

  // In a handler: whether the client of the request this thread handles has
  // closed its connection (it hung up and will read no answer).
  static bool ClientGone();

 private:
  class Loop;
  struct Handoff;
  void Handle(Handoff handoff);
  // Pool-held uploads of `peer`: false when it has too many already.
  bool StartUpload(const std::string& peer);
  void EndUpload(const std::string& peer);

  const HttpLimits limits_;
  FrontPolicy front_;
  bool has_front_ = false;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> open_{0};
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<httplib::ThreadPool> pool_;
  std::thread loop_thread_;
  bool stopped_ = false;
  absl::Mutex uploads_mu_;
  std::map<std::string, int> uploads_ ABSL_GUARDED_BY(uploads_mu_);
};

}  // namespace manta::http
