#include "cli/stop.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/daemons.h"
#include "common/process.h"
#include "common/session.h"

namespace manta::cli {
namespace {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

// The daemons with a live process behind their pid file; stale pid files
// (and their ready files) are removed.
std::vector<Daemon> FindDaemons(const std::string& temp_dir) {
  std::vector<Daemon> found;
  std::set<pid_t> seen;
  for (const std::string& entry : ListDir(temp_dir)) {
    if (!absl::StartsWith(entry, "session_") || entry == "session_latest") continue;
    SessionPaths session{temp_dir + "/" + entry};
    for (const std::string& file : ListDir(session.pids())) {
      if (!absl::EndsWith(file, ".pid")) continue;
      std::string name = file.substr(0, file.size() - 4);
      std::string program = absl::StartsWith(name, kRaylet) ? kRaylet
                            : name == kGcsServer            ? kGcsServer
                            : name == kDashboard            ? kDashboard
                                                            : "";
      if (program.empty()) continue;
      Daemon d = DaemonFiles(session, name, program);
      auto pid = ReadPidFile(d.pid_file);
      if (pid.ok() && RunsExecutable(*pid, program)) {
        d.pid = *pid;
        if (seen.insert(d.pid).second) found.push_back(d);
      } else {
        unlink(d.pid_file.c_str());
        unlink(d.ready_file.c_str());
      }
    }
  }
  return found;
}

// Signals `daemons` (`sig`, or SIGKILL with `force`), waits until
// `deadline`, SIGKILLs the rest. Returns how many are gone.
int StopGroup(const std::vector<Daemon>& daemons, bool force, int sig, absl::Time deadline) {
  for (const Daemon& d : daemons) {
    if (force) {
      SignalProcessGroup(d.pid, SIGKILL).IgnoreError();
      SendSignal(d.pid, SIGKILL).IgnoreError();
    } else {
      SendSignal(d.pid, sig).IgnoreError();
    }
  }
  auto all_gone = [&] {
    for (const Daemon& d : daemons) {
      if (IsAlive(d.pid)) return false;
    }
    return true;
  };
  if (!PollUntil(all_gone, deadline)) {
    for (const Daemon& d : daemons) {
      if (!IsAlive(d.pid)) continue;
      SignalProcessGroup(d.pid, SIGKILL).IgnoreError();
      SendSignal(d.pid, SIGKILL).IgnoreError();
    }
    PollUntil(all_gone, absl::Now() + absl::Seconds(5));
  }
  int stopped = 0;
  for (const Daemon& d : daemons) {
    if (IsAlive(d.pid)) continue;
    // Workers a daemon left behind in its group go too.
    SignalProcessGroup(d.pid, SIGKILL).IgnoreError();
    unlink(d.pid_file.c_str());
    unlink(d.ready_file.c_str());
    ++stopped;
  }
  return stopped;
}

}  // namespace

absl::Status RunStop(const StopOptions& options, std::ostream& out) {
  std::vector<Daemon> dashboards, raylets, gcs_servers;
  for (Daemon& d : FindDaemons(options.temp_dir)) {
    (d.program == kRaylet ? raylets : d.program == kDashboard ? dashboards : gcs_servers).push_back(std::move(d));
  }
  size_t total = dashboards.size() + raylets.size() + gcs_servers.size();
  if (total == 0) {
    out << "Did not find any active Manta processes.\n";
    return absl::OkStatus();
  }
  // The dashboard first, so it records its stopped jobs in a GCS that still
  // runs; then raylets, so they unregister from it.
  // Raylets get SIGINT: it stops them at once, while SIGTERM would drain a
  // raylet started with --drain-grace-s.
  int stopped = StopGroup(dashboards, options.force, SIGTERM, absl::Now() + options.grace);
  stopped += StopGroup(raylets, options.force, SIGINT, absl::Now() + options.grace);
  stopped += StopGroup(gcs_servers, options.force, SIGTERM, absl::Now() + options.grace);
  if (static_cast<size_t>(stopped) != total) {
    return absl::InternalError(
        absl::StrCat("stopped ", stopped, " of ", total, " Manta processes; the others did not exit after SIGKILL"));
  }
  out << "Stopped all " << stopped << " Manta processes.\n";
  return absl::OkStatus();
}

}  // namespace manta::cli
