#include "common/rpc/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/rpc/grpc_util.h"

namespace manta::rpc {
namespace {

// Gates of this process, for MarkAuthenticated.
absl::Mutex registry_mu(absl::kConstInit);
std::vector<ConnectionGate*>& Registry() {
  static auto* gates = new std::vector<ConnectionGate*>();
  return *gates;
}
// Connections of all gates still waiting for an authenticated RPC.
std::atomic<int> waiting_total{0};

uint64_t InodeOf(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// Splits "host:port" or "[v6]:port".
bool SplitAddress(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return !host->empty() && !port->empty();
}

absl::StatusOr<int> BindListener(const std::string& address, int* port_out) {
  std::string host, port;
  int port_number = 0;
  if (!SplitAddress(address, &host, &port) || !absl::SimpleAtoi(port, &port_number) || port_number < 0 ||
      port_number > 65535) {
    return absl::InvalidArgumentError("not a host:port address: " + address);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError("cannot resolve " + host);
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            bind(fd, res->ai_addr, res->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0;
  freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (ok && getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    *port_out = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                              : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  } else {
    ok = false;
  }
  if (!ok) {
    std::string why = strerror(errno);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", why));
  }
  return fd;
}

// Raises the soft descriptor limit to the hard one; returns the soft limit.
int RaiseDescriptorLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(const std::string& address,
                                                                       Options options) {
  int port = 0;
  auto fd = BindListener(address, &port);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(*fd, port, options));
}

ConnectionGate::ConnectionGate(int listen_fd, int port, Options options)
    : listen_fd_(listen_fd), port_(port), options_(options) {
  int limit = RaiseDescriptorLimit();
  // Each connection holds two descriptors; keep room for files, pipes and
  // outgoing channels.
  max_connections_ = options_.max_connections > 0 ? options_.max_connections : std::max(16, (limit - 256) / 3);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

ConnectionGate::~ConnectionGate() {
  Stop();
  absl::MutexLock lock(&mu_);
  for (auto& [peer, conn] : conns_) close(conn.dup_fd);
  waiting_total.fetch_sub(unauthenticated_);
  unauthenticated_ = 0;
  conns_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

void ConnectionGate::Start(grpc::Server* server) {
  server_ = server;
  {
    absl::MutexLock lock(&registry_mu);
    Registry().push_back(this);
  }
  thread_ = std::thread([this] { Run(); });
}

void ConnectionGate::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&registry_mu);
    auto& gates = Registry();
    gates.erase(std::remove(gates.begin(), gates.end(), this), gates.end());
  }
  close(listen_fd_);
}

void ConnectionGate::Run() {
  absl::Time next_sweep = absl::Now();
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = poll(fds, 2, 250);
    if (stopping_.load()) break;
    if (n > 0 && (fds[0].revents & POLLIN)) AcceptReady();
    if (absl::Now() >= next_sweep) {
      Sweep();
      next_sweep = absl::Now() + absl::Milliseconds(500);
    }
  }
}

void ConnectionGate::AcceptReady() {
  for (int i = 0; i < 256 && !stopping_.load(); ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) DropOnDescriptorExhaustion();
      return;  // EAGAIN, or backing off
    }
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
      close(fd);
      continue;
    }
    if (open_connections() >= max_connections_) {
      // Connections gRPC closed since the last sweep free their places.
      if (absl::Now() - last_sweep_ > absl::Milliseconds(100)) Sweep();
      if (open_connections() >= max_connections_) {
        close(fd);
        refused_.fetch_add(1);
        if (absl::Now() - last_refusal_log_ > absl::Seconds(10)) {
          last_refusal_log_ = absl::Now();
          log_->warn("refusing connections: {} open, the limit is {} ({} refused so far)",
                              open_connections(), max_connections_, refused_.load());
        }
        continue;
      }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) {
      close(fd);
      refused_.fetch_add(1);
      continue;
    }
    Conn conn{dup_fd, fd, InodeOf(fd), absl::Now(), false};
    {
      absl::MutexLock lock(&mu_);
      auto [it, inserted] = conns_.try_emplace(fd, conn);
      if (!inserted) {  // a stale entry of a closed connection from the same address
        if (!it->second.authenticated) {
          --unauthenticated_;
          waiting_total.fetch_sub(1);
        }
        close(it->second.dup_fd);
        it->second = conn;
      }
      ++unauthenticated_;
      waiting_total.fetch_add(1);
    }
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

void ConnectionGate::DropOnDescriptorExhaustion() {
  // Accept the pending connection through the spare descriptor and close it,
  // so the queue does not fill with connections that can never be served.
  if (spare_fd_ >= 0) {
    close(spare_fd_);
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd >= 0) close(fd);
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  refused_.fetch_add(1);
  if (absl::Now() - last_refusal_log_ > absl::Seconds(10)) {
    last_refusal_log_ = absl::Now();
    log_->warn("out of file descriptors: dropping new connections until some close");
  }
  Sweep();
}

void ConnectionGate::Sweep() {
  absl::MutexLock lock(&mu_);
  absl::Time now = absl::Now();
  last_sweep_ = now;
  absl::Duration deadline = static_cast<int>(conns_.size()) * 2 >= max_connections_ ? options_.pressure_deadline
                                                                                    : options_.auth_deadline;
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn& c = it->second;
    // gRPC closed its descriptor (the number is free or holds another file).
    if (InodeOf(c.server_fd) != c.inode) {
      close(c.dup_fd);
      if (!c.authenticated) {
        --unauthenticated_;
        waiting_total.fetch_sub(1);
      }
      conns_.erase(it++);
      continue;
    }
    if (!c.authenticated && now - c.accepted > deadline) {
      shutdown(c.dup_fd, SHUT_RDWR);  // gRPC sees the end and closes its side
      refused_.fetch_add(1);
      c.accepted = absl::InfiniteFuture();  // shut down once
    }
    ++it;
  }
}

void ConnectionGate::MarkPeer(int server_fd) {
  absl::MutexLock lock(&mu_);
  auto it = conns_.find(server_fd);
  if (it == conns_.end() || it->second.authenticated) return;
  it->second.authenticated = true;
  --unauthenticated_;
  waiting_total.fetch_sub(1);
}

bool ConnectionGate::AnyWaiting() { return waiting_total.load(std::memory_order_relaxed) > 0; }

void ConnectionGate::MarkAuthenticated(std::string_view peer) {
  if (!AnyWaiting()) return;
  // Connections added from a descriptor are named by it: "fd:12".
  int fd = -1;
  absl::string_view rest(peer.data(), peer.size());
  if (!absl::ConsumePrefix(&rest, "fd:") || !absl::SimpleAtoi(rest, &fd)) return;
  absl::MutexLock lock(&registry_mu);
  for (ConnectionGate* gate : Registry()) gate->MarkPeer(fd);
}

int ConnectionGate::open_connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(conns_.size());
}

}  // namespace manta::rpc

namespace manta::rpc {

class GatedServer::UnknownMethods : public grpc::CallbackGenericService {
 public:
  explicit UnknownMethods(std::string token) : token_(std::move(token)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Refuse : public grpc::ServerGenericBidiReactor {
     public:
      explicit Refuse(grpc::Status status) { Finish(status); }
      void OnDone() override { delete this; }
    };
    grpc::Status auth = CheckAuth(*ctx, token_);
    if (!auth.ok()) return new Refuse(auth);
    return new Refuse(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no method " + ctx->method()));
  }

 private:
  const std::string token_;
};

absl::StatusOr<std::unique_ptr<GatedServer>> GatedServer::Start(grpc::ServerBuilder* builder,
                                                                const std::string& address,
                                                                const std::string& token,
                                                                ConnectionGate::Options options) {
  auto gate = ConnectionGate::Listen(address, options);
  if (!gate.ok()) return gate.status();
  std::unique_ptr<GatedServer> gated(new GatedServer());
  gated->unknown_ = std::make_unique<UnknownMethods>(token);
  builder->RegisterCallbackGenericService(gated->unknown_.get());
  gated->server_ = builder->BuildAndStart();
  if (!gated->server_) return absl::UnavailableError("cannot start the gRPC server for " + address);
  gated->gate_ = std::move(*gate);
  gated->gate_->Start(gated->server_.get());
  return gated;
}

void GatedServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  gate_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::microseconds(absl::ToInt64Microseconds(grace)));
}

GatedServer::~GatedServer() {
  if (server_ && gate_) Shutdown(absl::ZeroDuration());
  gate_.reset();
  server_.reset();
}

}  // namespace manta::rpc
