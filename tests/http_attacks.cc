#include "tests/http_attacks.h"

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/process.h"
#include "tests/raw_socket.h"

namespace manta::testing {
namespace {

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// What is readable on `fd` now, appended to `out`; false once it closed.
bool ReadNow(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

std::string FirstLine(const std::string& bytes) {
  size_t end = bytes.find("\r\n");
  return end == std::string::npos ? std::string() : bytes.substr(0, end);
}

int StatusOf(const std::string& line) {
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  int status = 0;
  if (parts.size() >= 2) (void)absl::SimpleAtoi(parts[1], &status);
  return status;
}

}  // namespace

HttpAnswer RawRequest(int port, const std::string& request, absl::Duration timeout) {
  HttpAnswer answer;
  int fd = ConnectLoopback(port);
  if (fd < 0) return answer;
  std::string bytes;
  if (SendAll(fd, request)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) > 0 && !ReadNow(fd, &bytes)) break;
    }
  }
  close(fd);
  answer.status_line = FirstLine(bytes);
  answer.status = StatusOf(answer.status_line);
  size_t body = bytes.find("\r\n\r\n");
  if (body != std::string::npos) answer.body = bytes.substr(body + 4);
  return answer;
}

std::vector<std::string> ChunkedBombs(int port, const std::string& path, uint64_t bytes, int n) {
  std::vector<std::string> lines(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      int fd = ConnectLoopback(port);
      if (fd < 0) return;
      std::string received;
      const std::string chunk = absl::StrCat("100000\r\n", std::string(1 << 20, 'x'), "\r\n");  // 1 MiB
      bool open =
          SendAll(fd, absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
      // A server that answers from the head answers now: read it before the
      // body's bytes meet a closed connection (whose reset drops them).
      pollfd first{fd, POLLIN, 0};
      if (open && poll(&first, 1, 200) > 0) open = ReadNow(fd, &received);
      for (uint64_t sent = 0; open && sent < bytes; sent += 1 << 20) {
        open = ReadNow(fd, &received) && SendAll(fd, chunk);
      }
      if (open) SendAll(fd, "0\r\n\r\n");
      // The answer, if the server gave one.
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (FirstLine(received).empty() && absl::Now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0 && !ReadNow(fd, &received)) break;
      }
      close(fd);
      lines[i] = FirstLine(received);
    });
  }
  for (auto& t : threads) t.join();
  return lines;
}

Trickle::Trickle(int port, const std::string& head, int n) : received_(n) {
  for (int i = 0; i < n; ++i) {
    int fd = ConnectLoopback(port);
    if (fd >= 0) SendAll(fd, head);
    fds_.push_back(fd);
  }
  dripper_ = std::thread([this] {
    while (!stop_.load()) {
      for (int fd : fds_) {
        if (fd >= 0) (void)!send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      for (int i = 0; i < 10 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

Trickle::~Trickle() {
  stop_.store(true);
  dripper_.join();
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

std::vector<int> Trickle::Statuses() {
  std::vector<int> statuses;
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i] >= 0) ReadNow(fds_[i], &received_[i]);
    std::string line = FirstLine(received_[i]);
    if (!line.empty()) statuses.push_back(StatusOf(line));
  }
  return statuses;
}

int Trickle::Answered() { return static_cast<int>(Statuses().size()); }

int64_t RssOf(pid_t pid) { return ResidentBytes(pid); }

int64_t PeakRssWhile(pid_t pid, const std::function<void()>& fn) {
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{RssOf(pid)};
  std::thread sampler([&] {
    while (!done.load()) {
      peak.store(std::max(peak.load(), RssOf(pid)));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  fn();
  done.store(true);
  sampler.join();
  return std::max(peak.load(), RssOf(pid));
}

pid_t PidListeningOn(int port) {
  // The socket's inode, from the kernel's table of listening TCP sockets.
  std::string inode;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, node;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> node;
      unsigned local_port = 0;
      if (state == "0A" && std::sscanf(local.substr(local.find(':') + 1).c_str(), "%x", &local_port) == 1 &&
          static_cast<int>(local_port) == port) {
        inode = node;
      }
    }
  }
  if (inode.empty()) return -1;
  const std::string want = "socket:[" + inode + "]";
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (found >= 0 || !absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (dirent* f = readdir(fds)) {
      char target[128];
      ssize_t n = readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof(target) - 1);
      if (n > 0 && std::string(target, static_cast<size_t>(n)) == want) {
        found = pid;
        break;
      }
    }
    closedir(fds);
  }
  closedir(proc);
  return found;
}

}  // namespace manta::testing
