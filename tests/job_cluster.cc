#include "tests/job_cluster.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/session.h"
#include "common/status.h"
#include "common/token.h"
#include "dashboard/tar_reader.h"

namespace manta::testing {

std::string JobCluster::BinDir() {
  if (const char* dir = std::getenv("MANTA_BIN_DIR"); dir != nullptr && *dir != '\0') return dir;
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string self(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return self.substr(0, self.rfind('/')) + "/../bin";
}

bool JobCluster::WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  return PollUntil(done, absl::Now() + timeout);
}

JobCluster::JobCluster() {
  char tmpl[] = "/tmp/manta_job_test_XXXXXX";
  if (mkdtemp(tmpl) != nullptr) temp_dir_ = tmpl;
}

JobCluster::~JobCluster() {
  if (started_) RunManta({"stop", "--temp-dir", temp_dir_, "--grace-period", "5"}, {}, absl::Seconds(30));
  // Whatever survived (jobs included) goes with its process group.
  if (!session_dir_.empty()) {
    DIR* d = opendir((session_dir_ + "/pids").c_str());
    while (d != nullptr) {
      dirent* e = readdir(d);
      if (e == nullptr) break;
      auto pid = ReadPidFile(session_dir_ + "/pids/" + e->d_name);
      if (pid.ok()) SignalProcessGroup(*pid, SIGKILL).IgnoreError();
    }
    if (d != nullptr) closedir(d);
  }
  if (restarted_pid_ > 0) SignalProcessGroup(restarted_pid_, SIGKILL).IgnoreError();
  if (!temp_dir_.empty()) dashboard::RemoveTree(temp_dir_).IgnoreError();
}

absl::Status JobCluster::Start() {
  if (temp_dir_.empty()) return absl::InternalError("mkdtemp failed");
  ASSIGN_OR_RETURN(int gcs_port, PickFreePort());
  ASSIGN_OR_RETURN(dashboard_port_, PickFreePort());
  started_ = true;
  CommandResult r = RunManta({"start", "--head", "--temp-dir", temp_dir_, absl::StrCat("--port=", gcs_port),
                              absl::StrCat("--dashboard-port=", dashboard_port_), "--num-cpus=4"},
                             {}, absl::Seconds(60));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("manta start failed (", r.exit_code, "): ", r.out, r.err));
  }
  ASSIGN_OR_RETURN(SessionPaths session, LatestSession(temp_dir_));
  session_dir_ = session.dir;
  ASSIGN_OR_RETURN(token_, ReadTokenFile(session.token()));
  ASSIGN_OR_RETURN(std::string url, ReadFile(session.dir + "/dashboard_address"));
  url_ = std::string(absl::StripAsciiWhitespace(url));
  gcs_address_ = absl::StrCat("127.0.0.1:", gcs_port);
  if (url_ != absl::StrCat("http://127.0.0.1:", dashboard_port_)) {
    return absl::InternalError("unexpected dashboard address " + url_);
  }
  return absl::OkStatus();
}

absl::Status JobCluster::AddTpuSlice(const std::string& name, const std::string& pod_type, const std::string& topology,
                                     int hosts) {
  for (int w = 0; w < hosts; ++w) {
    CommandResult r = RunManta({"start", "--address=" + gcs_address_, "--temp-dir", temp_dir_, "--num-cpus=1"},
                               {{"TPU_ACCELERATOR_TYPE", pod_type},
                                {"TPU_TOPOLOGY", topology},
                                {"TPU_WORKER_ID", std::to_string(w)},
                                {"TPU_NAME", name},
                                {"MANTA_TOKEN", token_}},
                               absl::Seconds(60));
    if (r.exit_code != 0) {
      return absl::InternalError(absl::StrCat("manta start of ", name, " host ", w, " failed: ", r.out, r.err));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<pid_t> JobCluster::DashboardPid() const {
  if (restarted_pid_ > 0) return restarted_pid_;
  return ReadPidFile(session_dir_ + "/pids/dashboard.pid");
}

absl::Status JobCluster::KillDashboard() {
  ASSIGN_OR_RETURN(pid_t pid, DashboardPid());
  RETURN_IF_ERROR(SendSignal(pid, SIGKILL));
  return WaitForExit(pid, absl::Now() + absl::Seconds(10));
}

absl::Status JobCluster::RestartDashboard() {
  std::string ready = session_dir_ + "/ready/dashboard_restarted.json";
  SpawnOptions options;
  options.executable = BinDir() + "/dashboard";
  options.args = {"--host=127.0.0.1",
                  absl::StrCat("--port=", dashboard_port_),
                  "--session_dir=" + session_dir_,
                  "--gcs_address=" + gcs_address_,
                  "--token_file=" + session_dir_ + "/token",
                  "--ready_file=" + ready,
                  "--log_file=" + session_dir_ + "/logs/dashboard_restarted.log"};
  options.log_file = session_dir_ + "/logs/dashboard_restarted.out";
  ASSIGN_OR_RETURN(restarted_pid_, SpawnDaemon(options));
  RETURN_IF_ERROR(WritePidFile(session_dir_ + "/pids/dashboard.pid", restarted_pid_));
  return WaitForFile(ready, absl::Now() + absl::Seconds(20), restarted_pid_, options.log_file).status();
}

CommandResult JobCluster::RunManta(const std::vector<std::string>& args,
                                   const std::vector<std::pair<std::string, std::string>>& env,
                                   absl::Duration timeout) const {
  SpawnOptions options;
  options.executable = BinDir() + "/manta";
  options.args = args;
  options.unset_env = {"MANTA_ADDRESS", "MANTA_TOKEN", "MANTA_DASHBOARD_ADDRESS"};
  options.env = env;
  options.env.emplace_back("MANTA_BIN_DIR", BinDir());
  auto r = RunAndCapture(options, timeout);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = std::string(r.status().message());
    return failed;
  }
  return *r;
}

CommandResult JobCluster::Curl(const std::vector<std::string>& args, absl::Duration timeout) const {
  SpawnOptions options;
  options.executable = "/usr/bin/curl";
  options.args = {"-sS"};
  for (const auto& a : args) options.args.push_back(a);
  auto r = RunAndCapture(options, timeout);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = std::string(r.status().message());
    return failed;
  }
  return *r;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (d != nullptr) {
    dirent* e = readdir(d);
    if (e == nullptr) break;
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  if (d != nullptr) closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace manta::testing
