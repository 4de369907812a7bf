#include "train/kernels/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace manta::train {
namespace {

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteBytes(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return WriteAll(fd, &n, 4) && WriteAll(fd, s.data(), s.size());
}

bool ReadBytes(int fd, std::string* s) {
  uint32_t n = 0;
  if (!ReadAll(fd, &n, 4)) return false;
  s->resize(n);
  return ReadAll(fd, s->data(), n);
}

// A TCP socket bound to `port` on every interface, with SO_REUSEADDR (as the
// server listens); Unavailable when the port is taken.
absl::StatusOr<int> BindAnyInterface(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(std::strerror(err));
  }
  return fd;
}

}  // namespace

absl::Status ParseHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError("coordinator address '" + address + "' is not host:port");
  }
  *host = address.substr(0, colon);
  return absl::OkStatus();
}

std::string GlooListenAddress(const std::string& host) {
  in_addr addr{};
  if (::inet_pton(AF_INET, host.c_str(), &addr) != 1 || (ntohl(addr.s_addr) >> 24) != 127) return host;
  std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> second(1, 254), third(0, 255), fourth(1, 254);
  return absl::StrCat("127.", second(rng), ".", third(rng), ".", fourth(rng));
}

int EphemeralPortLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 1024) return low;
  return 32768;
}

absl::StatusOr<int> PickCoordinatorPort() {
  const int low = 20000, high = std::max(low + 1000, EphemeralPortLow());
  std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> dist(low, high - 1);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = dist(rng);
    auto fd = BindAnyInterface(port);
    if (fd.ok()) {
      ::close(*fd);
      return port;
    }
    if (fd.status().code() != absl::StatusCode::kUnavailable) return fd.status();
  }
  return absl::UnavailableError(absl::StrCat("no free coordinator port between ", low, " and ", high));
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(int port) {
  auto bound = BindAnyInterface(port);
  if (!bound.ok()) {
    return absl::Status(bound.status().code(),
                        absl::StrCat("rendezvous server cannot listen on port ", port, ": ", bound.status().message()));
  }
  const int fd = *bound;
  if (::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("rendezvous server cannot listen on port ", port, ": ", std::strerror(err)));
  }
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::unique_ptr<RendezvousServer> server(new RendezvousServer());
  server->listen_fd_ = fd;
  server->port_ = ntohs(addr.sin_port);
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  accept_thread_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(conn_threads_);
  }
  for (std::thread& t : threads) t.join();
}

void RendezvousServer::AcceptLoop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock lock(&mu_);
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

// Requests: 'S' key value -> 'K'; 'G' key -> '1' value | '0'.
void RendezvousServer::Serve(int fd) {
  for (;;) {
    char op = 0;
    std::string key, value;
    if (!ReadAll(fd, &op, 1) || !ReadBytes(fd, &key)) break;
    if (op == 'S') {
      if (!ReadBytes(fd, &value)) break;
      {
        absl::MutexLock lock(&mu_);
        data_[key].assign(value.begin(), value.end());
      }
      if (!WriteAll(fd, "K", 1)) break;
    } else if (op == 'G') {
      bool found = false;
      {
        absl::MutexLock lock(&mu_);
        auto it = data_.find(key);
        if (it != data_.end()) {
          found = true;
          value.assign(it->second.begin(), it->second.end());
        }
      }
      if (!WriteAll(fd, found ? "1" : "0", 1)) break;
      if (found && !WriteBytes(fd, value)) break;
    } else {
      break;
    }
  }
  ::close(fd);
}

absl::StatusOr<std::unique_ptr<RendezvousClient>> RendezvousClient::Connect(const std::string& address,
                                                                            absl::Duration timeout,
                                                                            const std::atomic<bool>* aborted) {
  std::string host;
  int port = 0;
  absl::Status parsed = ParseHostPort(address, &host, &port);
  if (!parsed.ok()) return parsed;
  const absl::Time deadline = absl::Now() + timeout;
  std::string last_error;
  while (absl::Now() < deadline) {
    if (aborted != nullptr && aborted->load()) {
      return absl::CancelledError("stopped reaching the coordinator at " + address);
    }
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc == 0) {
      int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return std::unique_ptr<RendezvousClient>(new RendezvousClient(fd, timeout));
      }
      last_error = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      ::freeaddrinfo(res);
    } else {
      last_error = gai_strerror(rc);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError("cannot reach the coordinator at " + address + ": " + last_error);
}

RendezvousClient::~RendezvousClient() { ::close(fd_); }

void RendezvousClient::Abort() { ::shutdown(fd_, SHUT_RDWR); }

std::string RendezvousClient::LocalAddress() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "127.0.0.1";
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  }
  return text;
}

void RendezvousClient::set(const std::string& key, const std::vector<char>& data) {
  absl::MutexLock lock(&mu_);
  char ack = 0;
  if (!WriteAll(fd_, "S", 1) || !WriteBytes(fd_, key) || !WriteBytes(fd_, std::string(data.begin(), data.end())) ||
      !ReadAll(fd_, &ack, 1)) {
    GLOO_THROW_IO_EXCEPTION("rendezvous set failed for key ", key);
  }
}

bool RendezvousClient::TryGet(const std::string& key, std::vector<char>* value) {
  absl::MutexLock lock(&mu_);
  char found = 0;
  if (!WriteAll(fd_, "G", 1) || !WriteBytes(fd_, key) || !ReadAll(fd_, &found, 1)) {
    GLOO_THROW_IO_EXCEPTION("rendezvous get failed for key ", key);
  }
  if (found != '1') return false;
  std::string s;
  if (!ReadBytes(fd_, &s)) GLOO_THROW_IO_EXCEPTION("rendezvous get failed for key ", key);
  value->assign(s.begin(), s.end());
  return true;
}

std::vector<char> RendezvousClient::get(const std::string& key) {
  wait({key});
  std::vector<char> value;
  TryGet(key, &value);
  return value;
}

void RendezvousClient::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
}

void RendezvousClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  std::vector<char> ignored;
  for (const std::string& key : keys) {
    absl::Duration backoff = absl::Milliseconds(1);
    while (!TryGet(key, &ignored)) {
      if (absl::Now() > deadline) GLOO_THROW_IO_EXCEPTION("timed out waiting for rendezvous key ", key);
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(5));
    }
  }
}

}  // namespace manta::train
