#include "cli/start.h"

#include <arpa/inet.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/cluster_address.h"
#include "cli/daemons.h"
#include "cli/start_banner.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/status.h"
#include "common/token.h"
#include "nlohmann/json.hpp"
#include "state/gcs_reads.h"

namespace manta::cli {
namespace {

constexpr absl::Duration kStopGrace = absl::Seconds(10);
constexpr int kDefaultDashboardPort = 8265;
// KubeRay's container port "metrics", and Ray's --metrics-export-port there.
constexpr int kDefaultMetricsPort = 8080;

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// " --temp-dir=X" when X is not the default, for the commands we suggest.
std::string TempDirSuffix(const StartOptions& o) {
  return o.temp_dir == kDefaultTempDir ? "" : " --temp-dir=" + o.temp_dir;
}

std::vector<std::string> AuthArgs(const std::string& token_file) {
  if (token_file.empty()) return {"--auth=none"};
  return {"--token_file=" + token_file};
}

absl::Status ValidateCommon(const StartOptions& o, std::vector<std::string>* raylet_args) {
  in_addr unused;
  if (inet_pton(AF_INET, o.node_ip.c_str(), &unused) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--node-ip-address '", o.node_ip, "' is not an IPv4 address"));
  }
  ASSIGN_OR_RETURN(*raylet_args, RayletResourceArgs(o.node));
  return CheckTpuEnvironment();
}

void StopAll(const std::vector<Daemon>& daemons) {
  for (const Daemon& d : daemons) StopDaemon(d, kStopGrace).IgnoreError();
}

// Waits for SIGINT/SIGTERM (blocked by the caller) or the death of a daemon;
// then stops the rest. `daemons` are stopped in order (raylets first).
absl::Status BlockUntilDone(const std::vector<Daemon>& daemons, std::ostream& out) {
  out << "--block\n"
      << "  This command will now block until terminated by a signal.\n"
      << "  The daemons are monitored; if one of them exits, the others are stopped.\n";
  out.flush();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  while (true) {
    timespec wait{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&set, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      StopAll(daemons);
      out << "Stopped " << daemons.size() << " Manta processes.\n";
      return absl::OkStatus();
    }
    for (const Daemon& d : daemons) {
      if (IsAlive(d.pid)) continue;
      std::string how = "exited";
      if (auto st = ExitStatusOf(d.pid)) how = DescribeWaitStatus(*st);
      std::string line = LastDaemonLine(d);
      unlink(d.pid_file.c_str());
      StopAll(daemons);
      return absl::UnavailableError(
          absl::StrCat(d.program, " (pid ", d.pid, ") ", how, line.empty() ? "" : ": ", line, "; stopped the others"));
    }
  }
}

void BlockSignalsIfNeeded(const StartOptions& o) {
  if (!o.block) return;
  // Before any thread exists, so that every thread inherits the mask and the
  // signals wait for sigtimedwait.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

absl::Status CheckMetricsFlags(const StartOptions& o) {
  if (o.metrics_auth != "token" && o.metrics_auth != "none") {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-auth must be token or none, got '", o.metrics_auth, "'"));
  }
  if (o.metrics_export_port < -1 || o.metrics_export_port == 0 || o.metrics_export_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-export-port ", o.metrics_export_port, " is out of range"));
  }
  return absl::OkStatus();
}

// The port a daemon says it serves on in its ready file (`key`), else `port`.
int ReadyPort(const std::string& ready_json, const char* key, int port) {
  const nlohmann::json ready = nlohmann::json::parse(ready_json, nullptr, /*allow_exceptions=*/false);
  if (ready.is_object() && ready.contains(key) && ready[key].is_number_integer()) return ready[key].get<int>();
  return port;
}

// Launches the dashboard and records its URL in <session>/dashboard_address;
// `o.dashboard_port` becomes the port it serves on.
absl::StatusOr<Daemon> StartDashboard(const std::string& bin, const SessionPaths& session, StartOptions& o,
                                      const std::string& gcs_address, const std::string& token_file,
                                      bool any_port_if_taken) {
  std::vector<std::string> args = {"--host=" + o.dashboard_host,   absl::StrCat("--port=", o.dashboard_port),
                                   "--session_dir=" + session.dir, "--gcs_address=" + gcs_address,
                                   "--metrics_export_port=0",      "--metrics_auth=" + o.metrics_auth};
  if (any_port_if_taken) args.push_back("--port_fallback");
  for (auto& a : AuthArgs(token_file)) args.push_back(a);
  ASSIGN_OR_RETURN(Daemon d,
                   LaunchDaemon(bin, DaemonFiles(session, kDashboard, kDashboard), args, o.dashboard_ready_timeout));
  o.dashboard_port = ReadyPort(d.ready_json, "port", o.dashboard_port);
  std::string url = absl::StrCat("http://", o.dashboard_host, ":", o.dashboard_port);
  if (auto s = WriteFileAtomic(session.dir + "/dashboard_address", url + "\n", 0644); !s.ok()) {
    StopDaemon(d, kStopGrace).IgnoreError();
    return s;
  }
  return d;
}

absl::Status StartHead(StartOptions o, std::ostream& out, std::ostream& err) {
  if (o.auth != "token" && o.auth != "none") {
    return absl::InvalidArgumentError(absl::StrCat("--auth must be token or none, got '", o.auth, "'"));
  }
  RETURN_IF_ERROR(CheckMetricsFlags(o));
  if (o.port <= 0 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port ", o.port, " is out of range"));
  }
  std::vector<std::string> node_args;
  RETURN_IF_ERROR(ValidateCommon(o, &node_args));
  ASSIGN_OR_RETURN(std::string bin, DaemonBinDir());
  RETURN_IF_ERROR(CheckPortFree(o.node_ip, o.port));
  // The default metrics port, when taken (now, or by another head starting
  // at the same moment), gives way to a free one the GCS picks.
  const bool default_metrics_port = o.metrics_export_port == -1;
  if (default_metrics_port) {
    o.metrics_export_port = kDefaultMetricsPort;
  } else {
    RETURN_IF_ERROR(CheckPortFree(o.node_ip, o.metrics_export_port));
  }
  // The default dashboard port too (the dashboard picks and says which).
  const bool default_dashboard_port = o.dashboard_port == -1;
  if (o.include_dashboard && default_dashboard_port) o.dashboard_port = kDefaultDashboardPort;
  if (o.include_dashboard) {
    if (o.dashboard_port <= 0 || o.dashboard_port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--dashboard-port ", o.dashboard_port, " is out of range"));
    }
    in_addr unused;
    if (inet_pton(AF_INET, o.dashboard_host.c_str(), &unused) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dashboard-host '", o.dashboard_host, "' is not an IPv4 address"));
    }
    if (!default_dashboard_port) RETURN_IF_ERROR(CheckPortFree(o.dashboard_host, o.dashboard_port));
  }
  // A head given --token-file (a Kubernetes Secret, say) enforces that
  // token, so nodes started elsewhere with the same file can join.
  std::string token = GenerateToken();
  if (o.auth == "token" && !o.token_file.empty()) {
    auto given = ReadTokenFile(o.token_file);
    if (!given.ok()) return Annotate(given.status(), "--token-file " + o.token_file);
    token = *given;
  } else if (o.auth == "none" && !o.token_file.empty()) {
    return absl::InvalidArgumentError("--token-file and --auth=none contradict each other");
  }
  BlockSignalsIfNeeded(o);

  ASSIGN_OR_RETURN(SessionPaths session, CreateSession(o.temp_dir));
  std::string address = absl::StrCat(o.node_ip, ":", o.port);
  std::string token_file;
  if (o.auth == "token") {
    token_file = session.token();
    RETURN_IF_ERROR(WriteTokenFile(token_file, token));
  }
  RETURN_IF_ERROR(WriteFileAtomic(session.gcs_address(), address + "\n", 0644));

  std::vector<std::string> gcs_args = {
      absl::StrCat("--port=", o.port), "--bind_address=" + o.node_ip, "--session_dir=" + session.dir,
      absl::StrCat("--metrics_export_port=", o.metrics_export_port), "--metrics_auth=" + o.metrics_auth};
  if (default_metrics_port) gcs_args.push_back("--metrics_export_port_fallback");
  for (auto& a : AuthArgs(token_file)) gcs_args.push_back(a);
  if (!o.gcs_storage.empty()) gcs_args.push_back("--storage=" + o.gcs_storage);
  if (!o.gcs_storage_namespace.empty()) gcs_args.push_back("--storage_namespace=" + o.gcs_storage_namespace);
  ASSIGN_OR_RETURN(Daemon gcs,
                   LaunchDaemon(bin, DaemonFiles(session, kGcsServer, kGcsServer), gcs_args, o.gcs_ready_timeout));
  // Where the GCS serves its metrics, from its ready file.
  o.metrics_export_port = ReadyPort(gcs.ready_json, "metrics_port", o.metrics_export_port);

  std::vector<std::string> raylet_args = {"--gcs_address=" + address,     "--node_ip_address=" + o.node_ip,
                                          "--session_dir=" + session.dir, "--head",
                                          "--metrics_export_port=0",      "--metrics_auth=" + o.metrics_auth};
  for (auto& a : AuthArgs(token_file)) raylet_args.push_back(a);
  for (auto& a : node_args) raylet_args.push_back(a);
  auto raylet = LaunchDaemon(bin, DaemonFiles(session, NewRayletName(), kRaylet), raylet_args, o.raylet_ready_timeout);
  if (!raylet.ok()) {
    StopDaemon(gcs, kStopGrace).IgnoreError();
    return raylet.status();
  }
  std::vector<Daemon> daemons = {*raylet, gcs};
  std::string dashboard_url;
  if (o.include_dashboard) {
    auto dashboard = StartDashboard(bin, session, o, address, token_file, default_dashboard_port);
    if (!dashboard.ok()) {
      StopAll(daemons);
      return dashboard.status();
    }
    dashboard_url = absl::StrCat("http://", o.dashboard_host, ":", o.dashboard_port);
    daemons.insert(daemons.begin(), *dashboard);
  }

  if (token_file.empty()) {
    std::vector<ListenAddress> listening = {{"GCS", address}, {"raylet", o.node_ip}};
    if (o.include_dashboard) listening.push_back({"dashboard", absl::StrCat(o.dashboard_host, ":", o.dashboard_port)});
    err << AuthDisabledWarning(listening);
    err.flush();
  }
  out << FormatHeadBanner({.node_ip = o.node_ip,
                           .gcs_address = address,
                           .token_file = token_file,
                           .dashboard_url = dashboard_url,
                           .temp_dir_suffix = TempDirSuffix(o),
                           .metrics_address = absl::StrCat(o.node_ip, ":", o.metrics_export_port),
                           .metrics_auth = o.metrics_auth == "token" && !token_file.empty(),
                           .service_discovery_file = session.dir + "/prom_metrics_service_discovery.json"});
  out.flush();
  if (!o.block) return absl::OkStatus();
  return BlockUntilDone(daemons, out);
}

absl::Status JoinCluster(StartOptions o, std::ostream& out, std::ostream& err) {
  RETURN_IF_ERROR(CheckMetricsFlags(o));
  ASSIGN_OR_RETURN(HostPort gcs, ParseHostPort(o.address));
  std::string address = gcs.ToString();
  std::vector<std::string> node_args;
  RETURN_IF_ERROR(ValidateCommon(o, &node_args));
  ASSIGN_OR_RETURN(std::string bin, DaemonBinDir());
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, o.token_file, o.temp_dir));
  BlockSignalsIfNeeded(o);
  RETURN_IF_ERROR(state::FetchClusterId(address, token, absl::Seconds(5)).status());
  // A call without a token that succeeds proves that the cluster checks none.
  const bool auth_disabled = token.empty() || state::FetchClusterId(address, "", absl::Seconds(5)).ok();

  auto existing = SessionForAddress(address, o.temp_dir);
  SessionPaths session;
  if (existing.ok()) {
    session = *existing;
  } else {
    ASSIGN_OR_RETURN(session, CreateSession(o.temp_dir));
    RETURN_IF_ERROR(WriteFileAtomic(session.gcs_address(), address + "\n", 0644));
  }
  std::string token_file;
  if (!token.empty()) {
    token_file = session.token();
    auto current = ReadTokenFile(token_file);
    if (!current.ok() || *current != token) RETURN_IF_ERROR(WriteTokenFile(token_file, token));
  }

  std::vector<std::string> raylet_args = {
      "--gcs_address=" + address, "--node_ip_address=" + o.node_ip, "--session_dir=" + session.dir,
      absl::StrCat("--metrics_export_port=", std::max(o.metrics_export_port, 0)), "--metrics_auth=" + o.metrics_auth};
  for (auto& a : AuthArgs(token_file)) raylet_args.push_back(a);
  for (auto& a : node_args) raylet_args.push_back(a);
  ASSIGN_OR_RETURN(Daemon raylet, LaunchDaemon(bin, DaemonFiles(session, NewRayletName(), kRaylet), raylet_args,
                                               o.raylet_ready_timeout));
  if (auth_disabled) {
    err << AuthDisabledWarning({{"raylet", o.node_ip}});
    err.flush();
  }
  out << "--------------------\n"
      << "Manta runtime started.\n"
      << "--------------------\n\n"
      << "To terminate the Manta runtime, run\n"
      << "  manta stop" << TempDirSuffix(o) << "\n";
  out.flush();
  if (!o.block) return absl::OkStatus();
  return BlockUntilDone({raylet}, out);
}

}  // namespace

absl::Status RunStart(const StartOptions& options, std::ostream& out, std::ostream& err) {
  StartOptions o = options;
  o.temp_dir = Absolute(o.temp_dir);
  if (o.head && !o.address.empty()) return absl::InvalidArgumentError("--head and --address cannot be used together");
  if (o.head) return StartHead(o, out, err);
  if (!o.gcs_storage.empty() || !o.gcs_storage_namespace.empty()) {
    return absl::InvalidArgumentError("--gcs-storage and --gcs-storage-namespace are for the head (--head) only");
  }
  if (!o.address.empty()) return JoinCluster(o, out, err);
  return absl::InvalidArgumentError("pass --head to start a cluster or --address=HOST:PORT to join one");
}

}  // namespace manta::cli
