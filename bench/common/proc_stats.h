// Reading processes' and the machine's CPU time and memory from /proc, for
// benchmarks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace manta::bench {

// User + system CPU time consumed so far, in seconds; -1 when unreadable.
double CpuSeconds(pid_t pid);
// The system (kernel) part of that: page faults, copies, wake-ups; -1 when
// unreadable.
double SystemCpuSeconds(pid_t pid);
// CPU seconds every core of the machine has spent busy (not idle, not
// waiting for I/O) since boot, summed over the cores; -1 when unreadable.
double MachineBusySeconds();
// Resident set size (VmRSS) in bytes; -1 when unreadable.
int64_t RssBytes(pid_t pid);
// The largest resident set size the process had (VmHWM) in bytes; -1 when
// unreadable.
int64_t PeakRssBytes(pid_t pid);
// Proportional set size (shared pages divided among their users) in bytes.
int64_t PssBytes(pid_t pid);
// Private (unshared) resident bytes: what the process alone holds.
int64_t PrivateBytes(pid_t pid);
std::string ProcessName(pid_t pid);
// The live processes whose parent is `pid`.
std::vector<pid_t> ChildrenOf(pid_t pid);

}  // namespace manta::bench
