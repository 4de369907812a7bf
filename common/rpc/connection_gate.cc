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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/rpc/first_request.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/http2_frames.h"
#include "common/rpc/refusing_connection.h"
#include "common/token.h"

namespace manta::rpc {
namespace {

// The inode behind a descriptor number, 0 if none. The number may already
// name another file (gRPC closed ours and the number was reused): telling
// that apart is what it is for. TSan builds (scripts/sanitize.sh tsan) make the system call
// themselves, since TSan's fstat would count the probe as a use of whatever
// file now holds the number.
uint64_t InodeOf(int fd) {
  struct stat st;
#if defined(MANTA_TSAN)
  if (syscall(SYS_fstat, fd, &st) != 0) return 0;
#else
  if (fstat(fd, &st) != 0) return 0;
#endif
  return static_cast<uint64_t>(st.st_ino);
}

// The gate's own duplicate of a connection it handed to gRPC, which pins
// the connection's inode until the gate sees gRPC close it. TSan builds make
// and close it with raw system calls, out of TSan's sight: libuv closes its
// descriptors with a raw system call too, so TSan takes a number libuv freed
// for one still open, and would report the duplicate that reuses it.
int Duplicate(int fd) {
#if defined(MANTA_TSAN)
  return static_cast<int>(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0));
#else
  return fcntl(fd, F_DUPFD_CLOEXEC, 0);
#endif
}

void CloseDuplicate(int fd) {
#if defined(MANTA_TSAN)
  syscall(SYS_close, fd);
#else
  close(fd);
#endif
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
  int resolved = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (resolved != 0 || res == nullptr) {
    if (res != nullptr) freeaddrinfo(res);
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, resolved != 0 ? absl::StrCat(": ", gai_strerror(resolved)) : ""));
  }
  // The errno of the first call that fails, read before any other call
  // (freeaddrinfo, close) can overwrite it; 0 while all succeed.
  int error = 0;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) error = errno;
  int one = 1;
  if (error == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) error = errno;
  if (error == 0 && bind(fd, res->ai_addr, res->ai_addrlen) != 0) error = errno;
  if (error == 0 && listen(fd, SOMAXCONN) != 0) error = errno;
  freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (error == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) error = errno;
  if (error == 0) {
    *port_out = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                              : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  } else {
    std::string why = strerror(error);
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

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(const std::string& address, Options options) {
  int port = 0;
  auto fd = BindListener(address, &port);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(*fd, port, options));
}

ConnectionGate::ConnectionGate(int listen_fd, int port, Options options)
    : listen_fd_(listen_fd), port_(port), options_(std::move(options)) {
  int limit = RaiseDescriptorLimit();
  // Each connection holds two descriptors; keep room for files, pipes and
  // outgoing channels.
  max_connections_ = options_.max_connections > 0 ? options_.max_connections : std::max(16, (limit - 256) / 3);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

ConnectionGate::~ConnectionGate() {
  Stop();
  absl::MutexLock lock(&mu_);
  for (auto& [fd, conn] : conns_) CloseDuplicate(conn.dup_fd);
  for (auto& [fd, held] : held_) close(fd);
  refusers_.clear();
  conns_.clear();
  held_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void ConnectionGate::Start(grpc::Server* server) {
  server_ = server;
  thread_ = std::thread([this] { Run(); });
}

void ConnectionGate::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void ConnectionGate::Run() {
  absl::Time next_sweep = absl::Now();
  epoll_event events[64];
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_, events, 64, 250);
    if (stopping_.load()) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        AcceptReady();
      } else if (fd != wake_fd_) {
        bool refused;
        {
          absl::MutexLock lock(&mu_);
          auto it = held_.find(fd);
          if (it == held_.end()) continue;
          refused = it->second.refused;
        }
        refused ? Answer(fd) : ReadFirstRequest(fd);
      }
    }
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
          log_->warn("refusing connections: {} open, the limit is {} ({} refused so far)", open_connections(),
                     max_connections_, refused_.load());
        }
        continue;
      }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Admit(fd);
  }
}

void ConnectionGate::Admit(int fd) {
  if (options_.token.empty()) return HandOver(fd);
  // The client sends its first request once it has the server's SETTINGS.
  static const std::string preface = http2::ServerPreface();
  if (send(fd, preface.data(), preface.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(preface.size())) {
    close(fd);
    refused_.fetch_add(1);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    refused_.fetch_add(1);
    return;
  }
  absl::MutexLock lock(&mu_);
  held_[fd] = Held{absl::Now(), false};
}

void ConnectionGate::ReadFirstRequest(int fd) {
  // Peeked, not read: what passes reaches gRPC whole.
  std::string bytes(kMaxFirstRequestBytes, '\0');
  ssize_t n = recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return CloseHeld(fd);  // the client went away
  bytes.resize(static_cast<size_t>(n));
  FirstRequest first = ParseFirstRequest(bytes);
  switch (first.kind) {
    case FirstRequest::kNeedMore: {
      // Wake again only once the rest is there (poll honours SO_RCVLOWAT).
      int lowat = static_cast<int>(std::max(first.need, bytes.size() + 1));
      setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
      return;
    }
    case FirstRequest::kInvalid:
      log_->debug("closing a connection that is not a gRPC client's: {}", first.error);
      refused_.fetch_add(1);
      return CloseHeld(fd);
    case FirstRequest::kHeaders: {
      std::string_view auth = first.authorization ? std::string_view(*first.authorization) : std::string_view();
      if (first.authorization && TokenMatches(TokenFromAuthorization(auth), options_.token)) return HandOver(fd);
      return Refuse(fd, first.authorization ? "wrong cluster token" : "missing cluster token");
    }
  }
}

void ConnectionGate::HandOver(int fd) {
  if (!options_.token.empty()) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
  }
  int dup_fd = Duplicate(fd);
  {
    absl::MutexLock lock(&mu_);
    held_.erase(fd);
    if (dup_fd < 0) {
      close(fd);
      refused_.fetch_add(1);
      return;
    }
    // A stale entry of a connection gRPC closed since the last sweep.
    auto [it, inserted] = conns_.try_emplace(fd, Conn{dup_fd, InodeOf(fd)});
    if (!inserted) {
      CloseDuplicate(it->second.dup_fd);
      it->second = Conn{dup_fd, InodeOf(fd)};
    }
  }
  grpc::AddInsecureChannelFromFd(server_, fd);
}

void ConnectionGate::Refuse(int fd, const std::string& why) {
  refused_.fetch_add(1);
  // From here the gate answers the connection itself: every request on it
  // UNAUTHENTICATED, the first (still unread) included, for a short while.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
  refusers_[fd] = std::make_unique<RefusingConnection>(why, options_.token);
  {
    absl::MutexLock lock(&mu_);
    held_[fd] = Held{absl::Now(), true};
  }
  Answer(fd);
}

void ConnectionGate::Answer(int fd) {
  RefusingConnection* refuser = refusers_.at(fd).get();
  char buf[16 << 10];
  for (int i = 0; i < 64; ++i) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return CloseHeld(fd);
    const std::string out = refuser->Consume(std::string_view(buf, static_cast<size_t>(n)));
    // Small answers into the client's window; a client that does not read
    // them is not waited for.
    if (!out.empty() &&
        send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(out.size())) {
      return CloseHeld(fd);
    }
    if (refuser->done()) return EndRefused(fd);
  }
}

void ConnectionGate::EndRefused(int fd) {
  const std::string goaway = refusers_.at(fd)->Goaway();
  (void)!send(fd, goaway.data(), goaway.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  CloseHeld(fd);
}

void ConnectionGate::CloseHeld(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  refusers_.erase(fd);
  absl::MutexLock lock(&mu_);
  held_.erase(fd);
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
  const absl::Time now = absl::Now();
  std::vector<std::pair<int, bool>> expired;  // fd, refused
  {
    absl::MutexLock lock(&mu_);
    last_sweep_ = now;
    // gRPC closed its descriptor (the number is free or holds another file).
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (InodeOf(it->first) != it->second.inode) {
        CloseDuplicate(it->second.dup_fd);
        conns_.erase(it++);
      } else {
        ++it;
      }
    }
    const int open = static_cast<int>(conns_.size() + held_.size());
    const absl::Duration deadline = open * 2 >= max_connections_ ? options_.pressure_deadline : options_.auth_deadline;
    for (const auto& [fd, held] : held_) {
      // A refused connection is drained for a short while only.
      if (now - held.since > (held.refused ? std::min(deadline, absl::Seconds(2)) : deadline)) {
        expired.emplace_back(fd, held.refused);
      }
    }
  }
  for (auto [fd, refused] : expired) {
    refused_.fetch_add(1);
    refused ? EndRefused(fd) : CloseHeld(fd);
  }
}

int ConnectionGate::open_connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(conns_.size() + held_.size());
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
                                                                const std::string& address, const std::string& token,
                                                                ConnectionGate::Options options) {
  options.token = token;
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
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::microseconds(absl::ToInt64Microseconds(grace)));
}

GatedServer::~GatedServer() {
  if (server_ && gate_) Shutdown(absl::ZeroDuration());
  gate_.reset();
  server_.reset();
}

}  // namespace manta::rpc
