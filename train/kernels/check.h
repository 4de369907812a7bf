// TRAIN_CHECK: aborts on a broken internal invariant of the kernels. Input
// from users, peers or the disk gets an absl::Status instead. Included only
// by .cc files so it never meets another component's CHECK.
//
//   TRAIN_CHECK(n % shards == 0) << "n=" << n;
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace manta::train::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": TRAIN_CHECK failed: " << condition << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "%s\n", stream_.str().c_str());
    std::fflush(stderr);
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace manta::train::internal

#define TRAIN_CHECK(condition)                        \
  (condition) ? (void)0                               \
              : ::manta::train::internal::Voidify() & \
                    ::manta::train::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
