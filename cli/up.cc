#include "cli/up.h"

#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "cli/daemons.h"
#include "cli/start.h"
#include "cli/stop.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/status.h"
#include "common/tpu.h"
#include "gcs/client/sync_gcs_client.h"
#include "state/gcs_reads.h"

namespace manta::cli {
namespace {

// What `manta up` started, in the session directory: a later `up` compares.
constexpr char kUpShapeFile[] = "up_shape";

constexpr int kStartsAtOnce = 8;  // `manta start` processes in flight

struct RunningCluster {
  std::string address;
  std::string token;
  SessionPaths session;
};

std::string Trimmed(const std::string& text) { return std::string(absl::StripAsciiWhitespace(text)); }

// The cluster of the latest session under `temp_dir`, if its GCS answers.
absl::StatusOr<RunningCluster> FindRunning(const std::string& temp_dir) {
  RunningCluster c;
  ASSIGN_OR_RETURN(c.session, LatestSession(temp_dir));
  ASSIGN_OR_RETURN(std::string address, ReadFile(c.session.gcs_address()));
  c.address = Trimmed(address);
  if (auto token = ReadFile(c.session.token()); token.ok()) c.token = Trimmed(*token);
  RETURN_IF_ERROR(state::FetchClusterId(c.address, c.token, absl::Seconds(2)).status());
  return c;
}

// `manta start --address` for every host, at most kStartsAtOnce at a time,
// printing "hosts joined k/N" as each one's raylet is registered.
absl::Status StartHosts(const std::string& manta, const RunningCluster& head, const UpOptions& o,
                        const std::vector<SimulatedHost>& hosts, std::ostream& out) {
  absl::Mutex mu;
  absl::Status first_error;
  size_t joined = 0;
  for (size_t begin = 0; begin < hosts.size(); begin += kStartsAtOnce) {
    std::vector<std::thread> starts;
    for (size_t i = begin; i < std::min(hosts.size(), begin + kStartsAtOnce); ++i) {
      starts.emplace_back([&, i] {
        SpawnOptions start;
        start.executable = manta;
        start.args = {"start", "--address=" + head.address, "--temp-dir=" + o.temp_dir,
                      absl::StrCat("--num-cpus=", o.host_cpus)};
        start.env = hosts[i].env;
        start.env.emplace_back("MANTA_TOKEN", head.token);
        auto r = RunAndCapture(start, absl::Seconds(60));
        absl::Status s = !r.ok()             ? r.status()
                         : r->exit_code != 0 ? absl::InternalError(Trimmed(r->err.empty() ? r->out : r->err))
                                             : absl::OkStatus();
        absl::MutexLock lock(&mu);
        if (!s.ok() && first_error.ok()) first_error = Annotate(s, "starting " + hosts[i].label);
        if (s.ok()) out << "hosts joined " << ++joined << "/" << hosts.size() << std::endl;
      });
    }
    for (std::thread& t : starts) t.join();
    absl::MutexLock lock(&mu);
    if (!first_error.ok()) return first_error;
  }
  return absl::OkStatus();
}

// Waits until the GCS lists `expected` alive nodes (the head among them),
// printing any change from what StartHosts printed last.
absl::Status WaitJoined(const RunningCluster& head, int expected, absl::Duration timeout, std::ostream& out) {
  const absl::Time deadline = absl::Now() + timeout;
  int shown = expected;
  auto gcs = gcs::SyncGcsClient::Connect(head.address, head.token, absl::Seconds(5));  // one connection for every poll
  state::ClusterViewOptions brief;
  brief.summary = true;
  while (true) {
    auto view = state::FetchClusterView(*gcs, brief);
    int alive = 0;
    if (view.ok()) {
      for (const state::NodeView& n : view->nodes) alive += n.alive ? 1 : 0;
    }
    if (alive != shown) {
      out << "hosts joined " << std::max(alive - 1, 0) << "/" << expected - 1 << std::endl;
      shown = alive;
    }
    if (alive >= expected) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", alive, " of ", expected, " nodes joined within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

std::string Describe(const UpOptions& o, const std::vector<SimulatedHost>& hosts, const std::string& topology) {
  const int tpu_hosts = static_cast<int>(hosts.size()) - o.cpu_hosts;
  std::string text = absl::StrCat(hosts.size(), " host", hosts.size() == 1 ? "" : "s");
  if (tpu_hosts > 0) {
    absl::StrAppend(&text, " (", o.slices, " slice", o.slices == 1 ? "" : "s", " of ", o.tpu, ", topology ", topology,
                    ", ", tpu_hosts / o.slices, " hosts each",
                    o.cpu_hosts > 0 ? absl::StrCat("; ", o.cpu_hosts, " CPU hosts") : "", ")");
  }
  return text;
}

void PrintReach(const RunningCluster& c, const std::string& temp_dir, std::ostream& out) {
  auto dashboard = ReadFile(c.session.dir + "/dashboard_address");
  out << "  GCS:        " << c.address << "\n";
  if (dashboard.ok()) out << "  Dashboard:  " << Trimmed(*dashboard) << "\n";
  if (!c.token.empty()) out << "  Token:      " << c.session.token() << "\n";
  out << "  Metrics:    " << c.session.dir << "/prom_metrics_service_discovery.json (Prometheus file_sd)\n";
  out << "\n  manta status --temp-dir=" << temp_dir << "\n";
  if (dashboard.ok()) out << "  manta job submit --address=" << Trimmed(*dashboard) << " -- <command>\n";
  out << "  manta down --temp-dir=" << temp_dir << std::endl;
}

}  // namespace

absl::Status RunUp(const UpOptions& o, std::ostream& out, std::ostream& err) {
  ASSIGN_OR_RETURN(std::vector<SimulatedHost> hosts, PlanHosts(o));
  const std::string topology = o.topology.empty() && !o.tpu.empty() ? DefaultTopology(o.tpu).value_or("") : o.topology;
  const std::string shape = Describe(o, hosts, topology);
  if (auto running = FindRunning(o.temp_dir); running.ok()) {
    // The same shape is already there; another is not started over it.
    auto up = ReadFile(running->session.dir + "/" + kUpShapeFile);
    const std::string have = up.ok() ? Trimmed(*up) : "a cluster `manta up` did not start";
    if (have != shape) {
      return absl::FailedPreconditionError(
          absl::StrCat("another Manta cluster is already up under ", o.temp_dir, " (session ", running->session.dir,
                       "): it is ", have, ", not the ", shape,
                       " asked for; nothing was started. `manta down --temp-dir=", o.temp_dir, "` stops it"));
    }
    out << "A Manta cluster of this shape is already up under " << o.temp_dir << " (session " << running->session.dir
        << "): " << shape << "; nothing was started.\n";
    PrintReach(*running, o.temp_dir, out);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string bin, DaemonBinDir());
  StartOptions head;
  head.head = true;
  head.port = o.port;
  head.temp_dir = o.temp_dir;
  head.dashboard_port = o.dashboard_port;
  head.metrics_export_port = o.metrics_export_port;
  std::ostringstream head_out;
  RETURN_IF_ERROR(Annotate(RunStart(head, head_out, err), "starting the head"));
  auto started = FindRunning(o.temp_dir);
  absl::Status s = started.status();
  if (s.ok()) {
    out << "Head up at " << started->address << "; starting " << shape << std::endl;
    s = StartHosts(bin + "/manta", *started, o, hosts, out);
  }
  if (s.ok()) s = WaitJoined(*started, static_cast<int>(hosts.size()) + 1, o.timeout, out);
  if (s.ok()) s = WriteFileAtomic(started->session.dir + "/" + kUpShapeFile, shape + "\n", 0644);
  if (!s.ok()) {
    std::ostringstream quiet;
    RunStop({o.temp_dir, false, absl::Seconds(10)}, quiet).IgnoreError();
    return Annotate(s, "manta up stopped everything it had started");
  }
  out << "\nManta cluster up: the head and " << shape << ".\n";
  PrintReach(*started, o.temp_dir, out);
  return absl::OkStatus();
}

absl::Status RunDown(const std::string& temp_dir, std::ostream& out) {
  return RunStop({temp_dir, false, absl::Seconds(10)}, out);
}

}  // namespace manta::cli
