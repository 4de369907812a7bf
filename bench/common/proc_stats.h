// Reading processes' and the machine's CPU time and memory from /proc, for
// benchmarks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace manta::bench {

// User + system CPU time consumed so far, in seconds; -1 when unreadable.
double CpuSeconds(pid_t pid);
// Clock ticks (as /proc counts CPU time) in seconds.
double TicksToSeconds(uint64_t ticks);
// CPU seconds the machine's cores have spent running its own work (not
// idle, not waiting for I/O, not taken by the hypervisor) since boot,
// summed over the cores; -1 when unreadable. Whatever else runs on the
// machine counts too.
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

}  // namespace manta::bench
