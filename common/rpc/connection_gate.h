// ConnectionGate: owns a gRPC server's listening socket and accepts its TCP
// connections itself, so no flood of connections can stop the server from
// accepting, and no caller without the cluster token gets a byte read by gRPC.
//
// The gRPC listener gives up for good when accept() fails with "Too many open
// files", and gRPC reads a unary request's whole body before any handler can
// check its token. The gate prevents both:
//   * at most `max_connections` are open at once; past it a new connection is
//     closed at once (the listener stays open and keeps accepting);
//   * with a token, a new connection stays with the gate until its first
//     request's headers have arrived (read with MSG_PEEK, decoded with
//     first_request.h): with the right "authorization" the connection goes to
//     the server, the peeked bytes still unread; without it the gate answers
//     that request UNAUTHENTICATED itself, sends GOAWAY and closes, so the
//     body is never read; a connection that has sent no request within
//     `auth_deadline` (`pressure_deadline` once half the cap is in use) is
//     closed;
//   * when the process runs out of descriptors anyway, the gate drops the
//     pending connection through a spare descriptor and backs off.
// Connections are handed to the server with AddInsecureChannelFromFd; the
// gate keeps a duplicate of each one's descriptor to see when gRPC has
// closed it. Later requests on a connection that passed are checked by the
// handlers (rpc::CheckAuth), as every request is.
//
// What a peer without the token can make a daemon hold: gRPC 1.51 takes a
// connection whole (it reads each stream's messages before any handler), so
// the token is checked per connection, on its first request, which only a
// token holder gets past. Until then the gate holds at most
// `max_connections` connections, each for at most `auth_deadline` and with
// nothing read but its first request's frames (peeked, at most
// kMaxFirstRequestBytes); a refused one is answered by a RefusingConnection,
// which grants no flow-control window: at most one 64 KiB window of a body
// is ever sent to it, and it reads and drops that. (HostileRpcTest floods a
// GCS with 48 MiB requests on refused connections and checks its memory.)
//
//   ASSIGN_OR_RETURN(auto gate, ConnectionGate::Listen("0.0.0.0:6379", {.token = token}));
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();   // no ports
//   gate->Start(server.get());
//   ...
//   gate->Stop();            // before server->Shutdown()
//
// Threads: one thread per gate runs its epoll loop. Listen/Start/Stop from
// one thread; counts from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace grpc {
class Server;
class ServerBuilder;
}  // namespace grpc

namespace manta::rpc {

class RefusingConnection;

class ConnectionGate {
 public:
  struct Options {
    // 0: a third of the process's descriptor limit (each connection holds two).
    int max_connections = 0;
    absl::Duration auth_deadline = absl::Seconds(20);
    absl::Duration pressure_deadline = absl::Seconds(2);
    std::string token;  // empty: --auth=none, every connection goes to the server at once
  };

  // Binds and listens on "host:port" (port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Listen(const std::string& address, Options options);
  ~ConnectionGate();

  int port() const { return port_; }
  int max_connections() const { return max_connections_; }

  // Starts handing connections to `server` (started, with no listening port).
  void Start(grpc::Server* server);
  // Stops accepting and closes the listening socket; connections already
  // handed over stay with the server. Idempotent.
  void Stop();

  // Open connections: those handed to the server and those the gate still
  // holds; and connections refused or closed by the gate so far.
  int open_connections() const;
  int64_t refused_connections() const { return refused_.load(); }

 private:
  // A connection handed to the server.
  struct Conn {
    int dup_fd = -1;  // the gate's duplicate; the server owns the other
    uint64_t inode = 0;
  };
  // A connection the gate holds: waiting for its first request, or
  // refused and answered by the gate for a short while.
  struct Held {
    absl::Time since;
    bool refused = false;
  };

  ConnectionGate(int listen_fd, int port, Options options);
  void Run();
  void AcceptReady();
  void Admit(int fd);
  // The first request of a held connection may have arrived.
  void ReadFirstRequest(int fd);
  void HandOver(int fd);
  void Refuse(int fd, const std::string& why);
  // A refused connection sent more: answered by its RefusingConnection.
  void Answer(int fd);
  // Sends a refused connection's GOAWAY and closes it.
  void EndRefused(int fd);
  void CloseHeld(int fd);
  void DropOnDescriptorExhaustion();
  void Sweep();

  const int listen_fd_;
  const int port_;
  const Options options_;
  int max_connections_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;
  grpc::Server* server_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> refused_{0};
  absl::Time last_refusal_log_ = absl::InfinitePast();
  // Made before any connection: logging when descriptors have run out must
  // not need new ones (a first Logger() call creates its sink).
  std::shared_ptr<spdlog::logger> log_ = Logger("rpc");
  absl::Time last_sweep_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Conn> conns_ ABSL_GUARDED_BY(mu_);  // by the server's descriptor
  absl::flat_hash_map<int, Held> held_ ABSL_GUARDED_BY(mu_);   // written by the gate's thread only
  // The gate's thread only: the refused connections' answering state.
  absl::flat_hash_map<int, std::unique_ptr<RefusingConnection>> refusers_;
};

// A started gRPC server whose connections pass through a ConnectionGate
// holding `token`, and which answers methods it does not serve with
// UNAUTHENTICATED when the token is missing or wrong (before reading the
// request), else UNIMPLEMENTED.
//
//   grpc::ServerBuilder builder;
//   rpc::ConfigureServerBuilder(&builder);
//   builder.RegisterService(&service);
//   ASSIGN_OR_RETURN(auto server, GatedServer::Start(&builder, "0.0.0.0:0", token));
//   ... server->port() ...
//   server->Shutdown(absl::Seconds(1));
class GatedServer {
 public:
  static absl::StatusOr<std::unique_ptr<GatedServer>> Start(grpc::ServerBuilder* builder, const std::string& address,
                                                            const std::string& token,
                                                            ConnectionGate::Options options = {});
  ~GatedServer();

  int port() const { return gate_->port(); }
  ConnectionGate* gate() { return gate_.get(); }
  // Stops accepting, then shuts the server down (waiting up to `grace` for
  // calls in flight). Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  class UnknownMethods;
  GatedServer() = default;

  std::unique_ptr<UnknownMethods> unknown_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionGate> gate_;
  bool shut_down_ = false;
};

}  // namespace manta::rpc
