// GcsHead: a gcs_server process for a benchmark, started with the flags
// `manta start --head` gives it (SQLite store, token auth, default health
// checking) in a session directory of its own under a temporary directory,
// but without a head raylet: every node it knows is one the benchmark
// brought. Also runs the real `manta status` against it.
//
//   ASSIGN_OR_RETURN(auto head, GcsHead::Start(BinDir()));
//   SimOptions o{.gcs_address = head->address(), .token = head->token(), ...};
//   ASSIGN_OR_RETURN(std::vector<double> ms, head->TimeStatus(20));
//   head->Stop();   // also by the destructor; removes the directory
//
// Thread-compatible: one thread uses an instance.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::bench {

class GcsHead {
 public:
  // Spawns `bin`/gcs_server (killed with this thread if the benchmark dies)
  // with `extra_flags` after its own, and waits until it serves. Its errors
  // name the log file.
  static absl::StatusOr<std::unique_ptr<GcsHead>> Start(const std::string& bin,
                                                        const std::vector<std::string>& extra_flags = {});
  ~GcsHead();
  GcsHead(const GcsHead&) = delete;
  GcsHead& operator=(const GcsHead&) = delete;

  // SIGTERM, then SIGKILL after 5 s; removes the temporary directory.
  // Idempotent.
  void Stop();

  // Runs `manta ARGS` `runs` times, one after another; each run's wall time
  // (start of the process to its exit) in ms. Internal when a run fails.
  absl::StatusOr<std::vector<double>> TimeManta(const std::vector<std::string>& args, int runs) const;
  // `manta status` as an operator on this host runs it (the address and
  // token come from the session under temp_dir()).
  absl::StatusOr<std::vector<double>> TimeStatus(int runs) const {
    return TimeManta({"status", "--temp-dir=" + temp_dir_}, runs);
  }

  // The two calls `manta status` makes (GetAllNodeInfo brief, then
  // GetClusterResources with totals only) made one after the other from
  // this process on one connection, `runs` times: the GCS's share of a
  // status, in ms each.
  absl::StatusOr<std::vector<double>> TimeStatusCalls(int runs) const;

  // The last `lines` lines of the GCS's log, for an error report.
  std::string LogTail(int lines) const;

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  const std::string& session_dir() const { return session_dir_; }
  const std::string& token_file() const { return token_file_; }
  const std::string& bin() const { return bin_; }

 private:
  GcsHead() = default;

  std::string bin_;
  std::string temp_dir_;
  std::string session_dir_;
  std::string token_file_;
  std::string token_;
  std::string address_;
  pid_t pid_ = -1;
};

// Blocks SIGINT and SIGTERM in the calling thread (call it before any other
// thread starts) and starts a thread that, on either, removes the
// temporary directories of the GcsHeads alive then and exits; the daemons
// die with the benchmark.
void CleanUpOnSignal();

// Open descriptors of `pid` (entries of /proc/<pid>/fd); -1 when unreadable.
int OpenFds(pid_t pid);

// Raises this process's soft RLIMIT_NOFILE to its hard limit (children
// inherit it); returns the new soft limit.
long RaiseFdLimit();

// The `q`-quantile (0..1) of `values` by nearest rank; 0 for none.
double Quantile(std::vector<double> values, double q);

}  // namespace manta::bench
