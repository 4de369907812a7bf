// Launching and stopping the daemons `manta start` runs on this host. Each
// daemon owns four files in its session directory, named after it:
//   logs/<name>.out    its stdout and stderr
//   logs/<name>.log    its own log (--log_file)
//   pids/<name>.pid    its pid, while it runs
//   ready/<name>.json  written by the daemon once it serves (--ready_file)
// `manta stop` finds daemons through the pid files; the file name tells the
// program ("gcs_server", or "raylet" for any name starting with "raylet").
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/session.h"

namespace manta::cli {

inline constexpr char kGcsServer[] = "gcs_server";
inline constexpr char kRaylet[] = "raylet";
inline constexpr char kDashboard[] = "dashboard";

struct Daemon {
  std::string name;     // "gcs_server", "raylet_3f2a91c0"
  std::string program;  // kGcsServer or kRaylet
  pid_t pid = 0;        // set once spawned
  std::string pid_file;
  std::string ready_file;
  std::string out_file;
  std::string log_file;
  std::string ready_json;  // the ready file's contents once ready
};

// The directory holding gcs_server and raylet: $MANTA_BIN_DIR when set, else
// the directory of the running manta binary. NotFound if they are missing.
absl::StatusOr<std::string> DaemonBinDir();

// The files of a daemon called `name` running `program` in `session`.
Daemon DaemonFiles(const SessionPaths& session, const std::string& name, const std::string& program);

// "raylet_<8 hex>": a fresh name for one more raylet in a session.
std::string NewRayletName();

// Spawns `d.program` from `bin_dir` with `args` (plus --ready_file and
// --log_file), writes its pid file and waits up to `ready_timeout` for its
// ready file. On failure nothing of it remains (process killed, pid and ready
// files removed) and the error reads "<program> failed to start: <the last
// line it printed>".
absl::StatusOr<Daemon> LaunchDaemon(const std::string& bin_dir, Daemon d, const std::vector<std::string>& args,
                                    absl::Duration ready_timeout);

// SIGTERM (SIGINT for a raylet, which must not drain), then SIGKILL to its
// group after `grace`; removes its pid and ready files. OK once the process
// is gone.
absl::Status StopDaemon(const Daemon& d, absl::Duration grace);

// The last line a daemon printed, without the logger's "[time] [name] [level]"
// prefix; falls back to its log file. Empty if it printed nothing.
std::string LastDaemonLine(const Daemon& d);

}  // namespace manta::cli
