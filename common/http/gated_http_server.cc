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
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace manta::http {
namespace {

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

int PollMs(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, 1 << 30));
}

// The bytes the loop read (the headers and maybe part of the body), then the
// socket. Reads of the body fail once it arrives slower than the limits allow.
class BufferedStream : public httplib::Stream {
 public:
  BufferedStream(int fd, std::string head, const HttpLimits& limits)
      : fd_(fd), head_(std::move(head)), limits_(limits), body_start_(absl::Now()) {}

  bool is_readable() const override { return pos_ < head_.size() || Wait(POLLIN, limits_.io_timeout); }
  bool is_writable() const override { return Wait(POLLOUT, limits_.io_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < head_.size()) {
      size_t n = std::min(size, head_.size() - pos_);
      memcpy(ptr, head_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    absl::Duration allowed = limits_.body_grace + absl::Seconds(static_cast<double>(body_bytes_) /
                                                                limits_.min_body_bytes_per_second);
    absl::Duration left = std::min(limits_.io_timeout, body_start_ + allowed - absl::Now());
    if (left <= absl::ZeroDuration() || !Wait(POLLIN, left)) return -1;
    ssize_t n = recv(fd_, ptr, size, 0);
    if (n > 0) body_bytes_ += n;
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
  bool Wait(short events, absl::Duration timeout) const {
    pollfd p{fd_, events, 0};
    int rc;
    do {
      rc = poll(&p, 1, PollMs(timeout));
    } while (rc < 0 && errno == EINTR);
    return rc > 0 && (p.revents & (events | POLLHUP | POLLERR));
  }

  const int fd_;
  const std::string head_;
  size_t pos_ = 0;
  const HttpLimits& limits_;
  const absl::Time body_start_;
  int64_t body_bytes_ = 0;
};

void Reply(int fd, const char* status_line) {
  std::string r = absl::StrCat("HTTP/1.1 ", status_line, "\r\nContent-Type: text/plain; charset=utf-8\r\n",
                               "Content-Length: ", strlen(status_line) + 1, "\r\nConnection: close\r\n\r\n",
                               status_line, "\n");
  (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

// Accepts connections and reads their headers; one thread, epoll.
class GatedHttpServer::Loop {
 public:
  Loop(GatedHttpServer* server, int listen_fd) : server_(server), listen_fd_(listen_fd) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    Watch(listen_fd_);
    Watch(wake_fd_);
  }
  ~Loop() {
    for (auto& [fd, conn] : pending_) close(fd);
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
    std::string head;
    absl::Time accepted;
  };

  void Watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void Accept() {
    const HttpLimits& limits = server_->limits_;
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
      if (server_->open_.load() >= limits.max_connections) {
        Reply(fd, "503 Service Unavailable");
        close(fd);
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      server_->open_.fetch_add(1);
      pending_[fd] = Pending{std::string(), absl::Now()};
      Watch(fd);
    }
  }

  void Read(int fd) {
    auto it = pending_.find(fd);
    if (it == pending_.end()) return;
    std::string& head = it->second.head;
    char buf[16 << 10];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        head.append(buf, static_cast<size_t>(n));
        if (head.find("\r\n\r\n") != std::string::npos) return HandOff(it);
        if (head.size() > server_->limits_.max_header_bytes) {
          Reply(fd, "431 Request Header Fields Too Large");
          return Drop(it);
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      return Drop(it);  // closed or failed before its headers were complete
    }
  }

  void HandOff(absl::flat_hash_map<int, Pending>::iterator it) {
    int fd = it->first;
    std::string head = std::move(it->second.head);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    pending_.erase(it);
    // The pool thread waits with poll(); the socket stays non-blocking.
    server_->pool_->enqueue([server = server_, fd, head = std::move(head)]() mutable {
      server->Handle(fd, std::move(head));
    });
  }

  void Drop(absl::flat_hash_map<int, Pending>::iterator it) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
    close(it->first);
    pending_.erase(it);
    server_->open_.fetch_sub(1);
  }

  void Sweep() {
    const HttpLimits& limits = server_->limits_;
    absl::Duration deadline =
        server_->open_.load() * 2 >= limits.max_connections ? limits.pressure_deadline : limits.header_deadline;
    absl::Time now = absl::Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (now - it->second.accepted > deadline) {
        if (!it->second.head.empty()) Reply(it->first, "408 Request Timeout");
        Drop(it);
      }
      it = next;
    }
  }

  GatedHttpServer* const server_;
  const int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;
  std::atomic<bool> stopping_{false};
  absl::flat_hash_map<int, Pending> pending_;
};

GatedHttpServer::GatedHttpServer(HttpLimits limits) : limits_(limits) {}

GatedHttpServer::~GatedHttpServer() {
  StopServing();
  if (listen_fd_ >= 0) close(listen_fd_);
}

absl::Status GatedHttpServer::Bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError("cannot resolve " + host);
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  freeaddrinfo(res);
  if (!ok) {
    std::string why = strerror(errno);
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

void GatedHttpServer::Handle(int fd, std::string head) {
  BufferedStream stream(fd, std::move(head), limits_);
  bool closed = false;
  process_request(stream, /*close_connection=*/true, closed, nullptr);
  shutdown(fd, SHUT_WR);
  close(fd);
  open_.fetch_sub(1);
}

}  // namespace manta::http
