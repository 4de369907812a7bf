// A head node with its dashboard for the Jobs integration tests, started the
// way users start it: `manta start --head --temp-dir T --port P
// --dashboard-port D` in a fresh temporary directory, stopped with `manta
// stop` (and SIGKILL to whatever survives) in the destructor.
//
//   JobCluster cluster;
//   ASSERT_TRUE(cluster.Start().ok());
//   manta::cli::JobClient client = cluster.Client();
//   CommandResult r = cluster.Curl({"-X", "POST", cluster.url() + "/api/jobs/", ...});
//
// Not thread-safe: use from the test thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/job_client.h"
#include "common/process.h"

namespace manta::testing {

class JobCluster {
 public:
  JobCluster();
  ~JobCluster();
  JobCluster(const JobCluster&) = delete;
  JobCluster& operator=(const JobCluster&) = delete;

  absl::Status Start();

  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  const std::string& session_dir() const { return session_dir_; }
  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& gcs_address() const { return gcs_address_; }
  // Joins one host per worker of TPU slice `name` (`pod_type`, `topology`,
  // `hosts` hosts) with `manta start --address=...` and GKE's variables.
  absl::Status AddTpuSlice(const std::string& name, const std::string& pod_type, const std::string& topology,
                           int hosts);
  cli::JobClient Client() const { return cli::JobClient(url_, token_); }
  cli::JobClient ClientWithToken(const std::string& token) const { return cli::JobClient(url_, token); }

  // The dashboard's pid (from its pid file).
  absl::StatusOr<pid_t> DashboardPid() const;
  // SIGKILLs the dashboard, as a crash would; jobs keep running.
  absl::Status KillDashboard();
  // Starts the dashboard again on the same session and port, as `manta
  // start` did, and waits until it serves.
  absl::Status RestartDashboard();

  // `manta ARGS` with --temp-dir added by the caller where needed.
  CommandResult RunManta(const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env = {},
                         absl::Duration timeout = absl::Seconds(60)) const;
  // curl -sS with `args`; out holds the body, err curl's own errors.
  CommandResult Curl(const std::vector<std::string>& args, absl::Duration timeout = absl::Seconds(60)) const;
  // "Authorization: Bearer <token>" for curl -H.
  std::string AuthHeader() const { return "Authorization: Bearer " + token_; }

  // Polls `done` until true or `timeout`.
  static bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20));
  static std::string BinDir();

 private:
  std::string temp_dir_;
  std::string session_dir_;
  std::string url_;
  std::string token_;
  std::string gcs_address_;
  int dashboard_port_ = 0;
  bool started_ = false;
  pid_t restarted_pid_ = 0;
};

// The names in `dir` (without "." and ".."), sorted; empty if unreadable.
std::vector<std::string> ListDir(const std::string& dir);

}  // namespace manta::testing
