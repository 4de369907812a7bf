// LogPrinter: prints worker output in a driver the way Ray does,
// "(Counter pid=1234, ip=127.0.0.1) line", and collapses repeats across
// workers within an aggregation window.
//
// Two lines are the same pattern when they are equal after dropping every
// whitespace-separated word that holds a digit run or a 0x hex number, so
// "completed step: 12, seconds: 1.1, ..." from eight workers and several
// steps is one pattern. The first line of a pattern is printed at once. Lines
// of that pattern from the same worker alone are printed too; once a second
// worker has shown the pattern, later lines are counted instead, and when
// the window closes the latest of them is printed with
// " [repeated Nx across cluster]". A line with no word left (only numbers)
// is always printed.
//
// Thread-safe. Time comes from the caller, so tests need no sleeps.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace manta::core {

// A worker that runs tasks of several names writes this, then the task's
// name, as a line of its own on stdout and stderr when the name changes; the
// driver prefixes the worker's later lines with it and prints no marker.
inline constexpr char kTaskNameMarker[] = ":task_name:";

// `line` without its words that hold a digit run or a 0x hex number, the
// remaining words joined by single spaces.
std::string CanonicalLogLine(const std::string& line);

class LogPrinter {
 public:
  explicit LogPrinter(absl::Duration window = absl::Seconds(5), FILE* out = stdout, FILE* err = stderr)
      : window_(window), out_(out), err_(err) {}

  // `prefix` names the worker ("(Counter pid=1, ip=...)") and is its
  // identity for the same-worker rule.
  void Add(const std::string& prefix, const std::string& line, bool is_error, absl::Time now);
  // Prints the repeat counts of windows that closed by `now` (all: Flush).
  void Tick(absl::Time now);
  void Flush() { Tick(absl::InfiniteFuture()); }

 private:
  struct Pattern {
    absl::Time first;
    std::set<std::string> sources;  // prefixes that showed the pattern
    int repeats = 0;                // lines counted, not printed
    std::string latest_prefix, latest_line;
  };
  void Print(bool is_error, const std::string& text);
  // Closes windows opened before `now - window_`.
  void CloseWindows(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  const absl::Duration window_;
  FILE* const out_;
  FILE* const err_;
  // By (is_error, canonical line).
  std::map<std::pair<bool, std::string>, Pattern> patterns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
