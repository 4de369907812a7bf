#include "common/id.h"

#include <sys/random.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/check.h"

namespace manta {

namespace {

void GetRandom(uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      CHECK_EQ(errno, EINTR) << "getrandom failed";
      continue;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

// Bumped in a forked child, whose thread-local pools are its parent's
// bytes: a pool from an older generation is thrown away, never reused.
std::atomic<uint64_t> fork_generation{0};

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Each thread draws ids from a page of the kernel's random bytes, one
// system call a page instead of one an id (a call costs microseconds in
// a virtual machine; a task takes several ids). Bytes handed out are
// wiped from the pool.
struct RandomPool {
  static constexpr size_t kSize = 4096;
  uint8_t bytes[kSize];
  size_t used = kSize;
  uint64_t generation = 0;
};

}  // namespace

void FillRandom(void* out, size_t n) {
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, OnForkChild); });
  auto* p = static_cast<uint8_t*>(out);
  if (n > RandomPool::kSize / 16) {
    GetRandom(p, n);
    return;
  }
  thread_local RandomPool pool;
  uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (pool.generation != generation || RandomPool::kSize - pool.used < n) {
    GetRandom(pool.bytes, RandomPool::kSize);
    pool.used = 0;
    pool.generation = generation;
  }
  std::memcpy(p, pool.bytes + pool.used, n);
  std::memset(pool.bytes + pool.used, 0, n);
  pool.used += n;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<uint8_t>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 0xf];
  }
  return out;
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

absl::StatusOr<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("hex string has odd length");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("not a hex string: " + std::string(hex));
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

}  // namespace manta
