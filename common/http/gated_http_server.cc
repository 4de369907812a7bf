#include "common/http/gated_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/http/front_reader.h"

namespace manta::http {
namespace {

// What a refused connection may still send before it is dropped.
constexpr size_t kMaxLingerBytes = 8 << 20;

void Address(int fd, bool remote, std::string& ip, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int rc = remote ? getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                  : getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  char host[INET6_ADDRSTRLEN] = {0};
  if (rc != 0) return;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  ip = host;
}

std::string PeerIp(int fd) {
  std::string ip;
  int port = 0;
  Address(fd, true, ip, port);
  return ip;
}

int PollMs(absl::Duration d) { return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, 1 << 30)); }

bool WaitFd(int fd, short events, absl::Duration timeout) {
  pollfd p{fd, events, 0};
  int rc;
  do {
    rc = poll(&p, 1, PollMs(timeout));
  } while (rc < 0 && errno == EINTR);
  return rc > 0 && (p.revents & (events | POLLHUP | POLLERR));
}

// The request as the loop read it (the restated head and what of the body
// arrived), then the socket for the rest of an upload: at most `left` more
// bytes, all of them before `deadline`.
class BufferedStream : public httplib::Stream {
 public:
  BufferedStream(int fd, std::string bytes, uint64_t left, absl::Time deadline, const HttpLimits& limits)
      : fd_(fd), bytes_(std::move(bytes)), left_(left), deadline_(deadline), limits_(limits) {}

  bool is_readable() const override { return pos_ < bytes_.size() || (left_ > 0 && Wait(POLLIN, Left())); }
  bool is_writable() const override { return Wait(POLLOUT, limits_.io_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < bytes_.size()) {
      size_t n = std::min(size, bytes_.size() - pos_);
      memcpy(ptr, bytes_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (left_ == 0) return 0;  // nothing past the declared body is read
    absl::Duration left = Left();
    if (left <= absl::ZeroDuration() || !Wait(POLLIN, left)) return -1;
    ssize_t n = recv(fd_, ptr, static_cast<size_t>(std::min<uint64_t>(size, left_)), 0);
    if (n > 0) left_ -= static_cast<uint64_t>(n);
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT, limits_.io_timeout)) return -1;
    return send(fd_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  absl::Duration Left() const { return std::min(limits_.io_timeout, deadline_ - absl::Now()); }
  bool Wait(short events, absl::Duration timeout) const { return WaitFd(fd_, events, timeout); }

  const int fd_;
  const std::string bytes_;
  size_t pos_ = 0;
  uint64_t left_;
  const absl::Time deadline_;
  const HttpLimits& limits_;
};

// The connection whose request this pool thread handles (-1: none).
thread_local int current_fd = -1;

}  // namespace

// What the loop hands a pool thread.
struct GatedHttpServer::Handoff {
  int fd = -1;
  std::string bytes;        // the restated head and the body (or its start)
  uint64_t left = 0;        // body bytes still on the socket
  absl::Time deadline;      // by when they must have arrived
  std::string upload_peer;  // set for a pool-held upload
};

// Accepts connections and runs each one's FrontReader: refuses what its
// front refuses, reads what it accepts, and hands whole requests to the
// pool. One thread, epoll.
class GatedHttpServer::Loop {
 public:
  Loop(GatedHttpServer* server, int listen_fd)
      : server_(server), limits_(server->limits_), listen_fd_(listen_fd), budget_(limits_.max_loop_buffered_bytes) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    Watch(listen_fd_);
    Watch(wake_fd_);
  }
  ~Loop() {
    for (auto& [fd, conn] : pending_) close(fd);
    pending_.clear();
    close(epoll_fd_);
    close(wake_fd_);
    if (spare_fd_ >= 0) close(spare_fd_);
  }

  void Run() {
    epoll_event events[64];
    absl::Time next_sweep = absl::Now();
    while (!stopping_.load()) {
      int n = epoll_wait(epoll_fd_, events, 64, 200);
      for (int i = 0; i < n && !stopping_.load(); ++i) {
        int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          Accept();
        } else if (fd != wake_fd_) {
          Read(fd);
        }
      }
      if (absl::Now() >= next_sweep) {
        Sweep();
        next_sweep = absl::Now() + absl::Milliseconds(200);
      }
    }
  }

  void Stop() {
    stopping_.store(true);
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

 private:
  struct Pending {
    std::unique_ptr<FrontReader> reader;
    absl::Time accepted;
    absl::Time body_started;  // when the reader began reading a body
    bool lingering = false;   // refused: draining what the client still sends
    absl::Time linger_until;
    size_t drained = 0;
  };
  using Iter = absl::flat_hash_map<int, Pending>::iterator;

  void Watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  static void SendNow(int fd, const std::string& bytes) {
    if (!bytes.empty()) (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void Accept() {
    for (int i = 0; i < 256; ++i) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
          close(spare_fd_);  // take the connection off the queue and close it
          int dropped = accept(listen_fd_, nullptr, nullptr);
          if (dropped >= 0) close(dropped);
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        return;
      }
      Pending p;
      p.reader = std::make_unique<FrontReader>(&server_->front_, &limits_, PeerIp(fd), &budget_);
      p.accepted = absl::Now();
      if (server_->open_.load() >= limits_.max_connections) {
        SendNow(fd, p.reader->Refusal(503, "too many connections"));
        close(fd);
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      server_->open_.fetch_add(1);
      pending_.emplace(fd, std::move(p));
      Watch(fd);
    }
  }

  void Read(int fd) {
    auto it = pending_.find(fd);
    if (it == pending_.end()) return;
    char buf[16 << 10];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Drop(it);  // closed or failed before the request was whole
      if (!Take(it, std::string_view(buf, static_cast<size_t>(n)))) return;
    }
  }

  // Takes bytes of a connection; false once it left the loop or lingers.
  bool Take(Iter it, std::string_view bytes) {
    Pending& p = it->second;
    if (p.lingering) {
      p.drained += bytes.size();
      if (p.drained <= kMaxLingerBytes) return true;
      Drop(it);
      return false;
    }
    const bool was_reading_body = p.reader->reading_body();
    FrontReader::Step step = p.reader->Feed(bytes);
    SendNow(it->first, step.interim);
    switch (step.kind) {
      case FrontReader::Kind::kMore:
        if (!was_reading_body && p.reader->reading_body()) {
          p.body_started = absl::Now();
          if (p.reader->public_body() && PublicBodies(p.reader->peer()) > limits_.max_public_bodies_per_peer) {
            Linger(it, p.reader->Refusal(503, "too many requests from this address at once"));
            return false;
          }
        }
        return true;
      case FrontReader::Kind::kRefuse:
        Linger(it, step.bytes);
        return false;
      case FrontReader::Kind::kHandOff:
        HandOff(it, Handoff{it->first, std::move(step.bytes), 0, absl::Now(), ""});
        return false;
      case FrontReader::Kind::kUpload: {
        const std::string peer = p.reader->peer();
        if (!server_->StartUpload(peer)) {
          Linger(it, p.reader->Refusal(503, "too many uploads from this address at once"));
          return false;
        }
        HandOff(it, Handoff{it->first, std::move(step.bytes), step.left, absl::Now() + step.body_time, peer});
        return false;
      }
    }
    return false;
  }

  int PublicBodies(const std::string& peer) const {
    int n = 0;
    for (const auto& [fd, q] : pending_) n += !q.lingering && q.reader->public_body() && q.reader->peer() == peer;
    return n;
  }

  // Answers `response` and closes once the client had time to read it (a
  // close with unread bytes would reset the connection and lose the answer):
  // what the client still sends is read and dropped, for at most 2 s and
  // kMaxLingerBytes, so that a client that writes its whole (refused) body
  // before it reads still gets the answer. Nothing of it is kept.
  void Linger(Iter it, const std::string& response) {
    SendNow(it->first, response);
    shutdown(it->first, SHUT_WR);
    Pending& p = it->second;
    p.reader->Abandon();
    p.lingering = true;
    p.linger_until = absl::Now() + absl::Seconds(2);
  }

  void HandOff(Iter it, Handoff h) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
    pending_.erase(it);
    // The pool thread waits with poll(); the socket stays non-blocking.
    server_->pool_->enqueue([server = server_, h = std::move(h)]() mutable { server->Handle(std::move(h)); });
  }

  void Drop(Iter it) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
    close(it->first);
    pending_.erase(it);
    server_->open_.fetch_sub(1);
  }

  void Sweep() {
    const bool pressure = server_->open_.load() * 2 >= limits_.max_connections;
    const absl::Duration head_deadline = pressure ? limits_.pressure_deadline : limits_.header_deadline;
    absl::Time now = absl::Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      Pending& p = it->second;
      if (p.lingering) {
        if (now > p.linger_until) Drop(it);
      } else if (!p.reader->reading_body()) {
        if (now - p.accepted > head_deadline) {
          if (p.reader->has_bytes())
            SendNow(it->first, p.reader->Refusal(408, "the request's headers came too slowly"));
          Drop(it);
        }
      } else if (now - p.body_started > p.reader->body_time() ||
                 (pressure && p.reader->public_body() && now - p.accepted > head_deadline)) {
        // Under pressure a public route's body (what anyone may send) gets
        // no more time than headers do.
        SendNow(it->first, p.reader->Refusal(408, "the request's body came too slowly"));
        Drop(it);
      }
      it = next;
    }
  }

  GatedHttpServer* const server_;
  const HttpLimits& limits_;
  const int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;
  std::atomic<bool> stopping_{false};
  BodyBudget budget_;
  absl::flat_hash_map<int, Pending> pending_;
};

GatedHttpServer::GatedHttpServer(HttpLimits limits) : limits_(limits) {}

GatedHttpServer::~GatedHttpServer() {
  StopServing();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void GatedHttpServer::SetFront(FrontPolicy front) {
  CHECK(!loop_) << "SetFront after Serve";
  front_ = std::move(front);
  has_front_ = true;
}

absl::Status GatedHttpServer::Bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  std::string why = ok ? "" : strerror(errno);  // before freeaddrinfo and close can change errno
  freeaddrinfo(res);
  if (!ok) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":", port, ": ", why));
  }
  std::string ip;
  Address(fd, false, ip, port_);
  listen_fd_ = fd;
  // httplib's streaming responses run while this is a socket.
  svr_sock_ = fd;
  return absl::OkStatus();
}

void GatedHttpServer::Serve() {
  CHECK(has_front_) << "GatedHttpServer::Serve without SetFront: every server says what its routes take";
  HttpLimits& limits = const_cast<HttpLimits&>(limits_);
  if (limits.max_connections <= 0) {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    limits.max_connections = static_cast<int>(std::max<rlim_t>(64, std::min<rlim_t>(rl.rlim_cur, 1 << 20) / 4));
  }
  pool_ = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(limits_.threads));
  loop_ = std::make_unique<Loop>(this, listen_fd_);
  loop_thread_ = std::thread([this] { loop_->Run(); });
}

void GatedHttpServer::StopServing() {
  if (stopped_ || !loop_) return;
  stopped_ = true;
  svr_sock_ = INVALID_SOCKET;  // streaming responses end
  loop_->Stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  pool_->shutdown();  // runs what is queued, then joins
  loop_.reset();
  close(listen_fd_);
  listen_fd_ = -1;
}

bool GatedHttpServer::StartUpload(const std::string& peer) {
  absl::MutexLock lock(&uploads_mu_);
  int& n = uploads_[peer];
  if (n >= limits_.max_uploads_per_peer) return false;
  ++n;
  return true;
}

void GatedHttpServer::EndUpload(const std::string& peer) {
  absl::MutexLock lock(&uploads_mu_);
  if (--uploads_[peer] <= 0) uploads_.erase(peer);
}

bool GatedHttpServer::ClientGone() {
  if (current_fd < 0) return false;
  pollfd p{current_fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void GatedHttpServer::Handle(Handoff h) {
  {
    BufferedStream stream(h.fd, std::move(h.bytes), h.left, h.deadline, limits_);
    bool closed = false;
    current_fd = h.fd;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
    current_fd = -1;
  }
  if (!h.upload_peer.empty()) EndUpload(h.upload_peer);
  shutdown(h.fd, SHUT_WR);
  close(h.fd);
  open_.fetch_sub(1);
}

}  // namespace manta::http
