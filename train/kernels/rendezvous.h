// A tiny TCP key-value store for collective rendezvous at the coordinator
// address, the role JAX's coordination service plays for
// jax.distributed.initialize. Process 0 runs the server; every process
// (process 0 included) talks to it through a client that gloo uses as its
// rendezvous::Store.
//
//   auto server = RendezvousServer::Start(9000);           // process 0 only
//   auto store = RendezvousClient::Connect("10.0.0.1:9000", absl::Seconds(60));
//   gloo::rendezvous::PrefixStore prefixed("group/3", **store);
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace manta::train {

// Serves set/get over TCP on all interfaces. Owns its accept thread and one
// thread per connection; the destructor closes the socket and joins them.
class RendezvousServer {
 public:
  // Listens on `port` (0 picks a free one; see port()).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(int port);
  ~RendezvousServer();

  int port() const { return port_; }

 private:
  RendezvousServer() = default;
  void AcceptLoop();
  void Serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::map<std::string, std::vector<char>> data_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> conn_threads_ ABSL_GUARDED_BY(mu_);
  std::vector<int> conn_fds_ ABSL_GUARDED_BY(mu_);
};

// A gloo Store backed by a RendezvousServer. One connection, calls are
// serialized by a mutex; gloo raises its IoException on a network failure
// or when a key does not appear within the timeout.
class RendezvousClient : public gloo::rendezvous::Store {
 public:
  // Connects to "host:port", retrying until `timeout` (the server may start
  // after its clients). Stops with Cancelled as soon as `aborted` (when
  // given) turns true: a process left knocking on a coordinator that has
  // gone would reach whatever listens on that port next.
  static absl::StatusOr<std::unique_ptr<RendezvousClient>> Connect(const std::string& address, absl::Duration timeout,
                                                                   const std::atomic<bool>* aborted = nullptr);
  ~RendezvousClient() override;

  // The local IP address of the connection to the server: an address on
  // this host that the coordinator's network reaches.
  std::string LocalAddress() const;
  // From any thread: shuts the connection down, so a call waiting on the
  // server (a rendezvous key that never comes) throws at once.
  void Abort();

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  explicit RendezvousClient(int fd, absl::Duration timeout) : fd_(fd), timeout_(timeout) {}
  // Returns whether `key` exists, filling `value` when it does.
  bool TryGet(const std::string& key, std::vector<char>* value);

  absl::Mutex mu_;  // one request on fd_ at a time
  const int fd_;
  const absl::Duration timeout_;
};

// A port for a coordinator, free on every interface now, drawn at random
// below the range the kernel hands out for ephemeral ports
// (net.ipv4.ip_local_port_range). gloo's pairs listen on ephemeral ports and
// take the first connection that arrives; a client still retrying a
// coordinator that never came up must not be able to reach one of them.
absl::StatusOr<int> PickCoordinatorPort();

// The address gloo's pair listeners bind to on a host that reaches its
// coordinator at `host`. gloo's pairs listen on ephemeral ports and take the
// first connection that arrives as their peer; on a loopback host, a client
// of some other program still retrying a server that has gone (whose port the
// kernel may hand to one of those listeners) would take a peer's place, and
// the real peer's connect would be refused. Every process of a group whose
// coordinator is on loopback runs on this host, so each binds its listeners
// to an address of its own in 127.0.0.0/8 (never 127.0.0.x), which no other
// program's clients name. Any other host is returned as it is.
std::string GlooListenAddress(const std::string& host);

// The low end of net.ipv4.ip_local_port_range (32768 when unreadable).
int EphemeralPortLow();

// Splits "host:port"; the error names the address.
absl::Status ParseHostPort(const std::string& address, std::string* host, int* port);

}  // namespace manta::train
