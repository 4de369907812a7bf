// CHECK: for broken internal invariants only. Input from users, peers, the
// network or the disk gets an absl::Status instead.
//
//   CHECK(it != workers_.end()) << "no worker " << id.Hex();
//
// The thread an object lives on is checked with MANTA_CHECK_THREAD
// (common/thread_checker.h).
#pragma once

#include <sstream>

namespace manta::internal {

// Collects the streamed message and aborts the process in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << ...` be a void expression.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace manta::internal

#define CHECK(condition) \
  (condition)            \
      ? (void)0          \
      : ::manta::internal::Voidify() & ::manta::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define CHECK_EQ(a, b) CHECK((a) == (b))
