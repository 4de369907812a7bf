// bench_cluster_idle: starts a head and 8 TPU raylets (two v6e-16 slices)
// with the `manta` command in a temporary directory, leaves them idle, and
// reports their total CPU (% of one core) and each daemon's memory. Beside
// them runs the baseline: the smallest gRPC daemon (one health-check
// service), measured over the same window.
//
//   bench_cluster_idle [--seconds=10] [--json FILE] [--temp-dir DIR]
//
// With --temp-dir of a running cluster (started by `manta start` there), it
// measures that cluster's daemons on this host instead of starting its own.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/common/proc_stats.h"
#include "bench/common/report.h"
#include "common/process.h"
#include "common/session.h"

namespace manta::bench {
namespace {

std::string BinDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

absl::Status RunManta(const std::string& bin, std::vector<std::string> args,
                      std::vector<std::pair<std::string, std::string>> env = {}) {
  SpawnOptions opts;
  opts.executable = bin + "/manta";
  opts.args = std::move(args);
  opts.env = std::move(env);
  auto r = RunAndCapture(opts, absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError("manta failed: " + r->err);
  return absl::OkStatus();
}

std::vector<pid_t> SessionPids(const std::string& temp_dir) {
  std::vector<pid_t> pids;
  auto session = LatestSession(temp_dir);
  if (!session.ok()) return pids;
  DIR* d = opendir(session->pids().c_str());
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".pid") continue;
    auto pid = ReadPidFile(session->pids() + "/" + name);
    if (pid.ok() && IsAlive(*pid)) pids.push_back(*pid);
  }
  closedir(d);
  std::sort(pids.begin(), pids.end());
  return pids;
}

double Mb(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// A head and two v6e-16 slices of 4 hosts each, in `temp_dir`.
absl::Status StartTpuCluster(const std::string& bin, const std::string& temp_dir) {
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  std::string address = absl::StrCat("127.0.0.1:", *port);
  absl::Status s = RunManta(bin, {"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp_dir});
  for (int slice = 0; slice < 2 && s.ok(); ++slice) {
    for (int worker = 0; worker < 4 && s.ok(); ++worker) {
      s = RunManta(bin, {"start", "--address=" + address, "--temp-dir=" + temp_dir},
                   {{"TPU_ACCELERATOR_TYPE", "v6e-16"},
                    {"TPU_TOPOLOGY", "4x4"},
                    {"TPU_WORKER_ID", std::to_string(worker)},
                    {"TPU_NAME", absl::StrCat("tpu-group-", slice)}});
    }
  }
  return s;
}

int Run(int argc, char** argv) {
  CLI::App app{"Idle cost of a Manta cluster: head + 8 TPU raylets."};
  int seconds = 10;
  std::string json_path;
  std::string temp_dir;
  app.add_option("--seconds", seconds, "How long to measure.")->check(CLI::Range(1, 600));
  app.add_option("--json", json_path, "Write the figures here as JSON.");
  app.add_option("--temp-dir", temp_dir, "Measure the running cluster of this temp dir instead.");
  CLI11_PARSE(app, argc, argv);

  const std::string bin = BinDir();
  bool own_cluster = temp_dir.empty();
  pid_t baseline = -1;
  auto teardown = [&] {
    if (own_cluster && !temp_dir.empty()) {
      RunManta(bin, {"stop", "--force", "--temp-dir=" + temp_dir}).IgnoreError();
      std::string cmd = "rm -rf '" + temp_dir + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", temp_dir.c_str());
    }
    if (baseline > 0) TerminateProcess(baseline, absl::Now() + absl::Seconds(2)).IgnoreError();
  };

  if (own_cluster) {
    char tmpl[] = "/tmp/manta-bench-idle.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    temp_dir = tmpl;
    absl::Status s = StartTpuCluster(bin, temp_dir);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start the cluster: %s\n", std::string(s.message()).c_str());
      teardown();
      return 1;
    }
  }
  SpawnOptions base;
  base.executable = bin + "/bench_grpc_idle_server";
  base.kill_with_parent = true;  // gone with us, however we end
  auto b = SpawnDaemon(base);
  if (b.ok()) baseline = *b;

  std::vector<pid_t> pids = SessionPids(temp_dir);
  // Let start-up work (registration, first reports) finish before measuring.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::map<pid_t, double> cpu0;
  for (pid_t p : pids) cpu0[p] = CpuSeconds(p);
  double base_cpu0 = baseline > 0 ? CpuSeconds(baseline) : 0;
  std::this_thread::sleep_for(std::chrono::seconds(seconds));

  double total_cpu = 0;
  int64_t raylet_rss_max = 0, raylet_pss_max = 0, raylet_private_max = 0, gcs_rss = 0;
  int raylets = 0;
  std::printf("%-8s %-12s %10s %10s %12s %10s\n", "pid", "process", "RSS MB", "PSS MB", "private MB", "CPU %");
  for (pid_t p : pids) {
    double cpu = (CpuSeconds(p) - cpu0[p]) / seconds * 100.0;
    total_cpu += cpu;
    std::string name = ProcessName(p);
    int64_t rss = RssBytes(p), pss = PssBytes(p), priv = PrivateBytes(p);
    std::printf("%-8d %-12s %10.2f %10.2f %12.2f %10.3f\n", p, name.c_str(), Mb(rss), Mb(pss), Mb(priv), cpu);
    if (name == "raylet") {
      ++raylets;
      raylet_rss_max = std::max(raylet_rss_max, rss);
      raylet_pss_max = std::max(raylet_pss_max, pss);
      raylet_private_max = std::max(raylet_private_max, priv);
    } else if (name == "gcs_server") {
      gcs_rss = rss;
    }
  }
  double base_cpu = baseline > 0 ? (CpuSeconds(baseline) - base_cpu0) / seconds * 100.0 : 0;
  int64_t base_rss = baseline > 0 ? RssBytes(baseline) : 0;
  int64_t base_pss = baseline > 0 ? PssBytes(baseline) : 0;
  int64_t base_priv = baseline > 0 ? PrivateBytes(baseline) : 0;
  std::printf("%-8d %-12s %10.2f %10.2f %12.2f %10.3f   (baseline: bare gRPC server)\n\n", baseline, "grpc-idle",
              Mb(base_rss), Mb(base_pss), Mb(base_priv), base_cpu);
  teardown();
  if (raylets == 0) {
    std::fprintf(stderr, "no raylets found to measure\n");
    return 1;
  }

  Report report;
  report.Add("idle_cpu_total", total_cpu, "% of one core");
  report.Add("raylet_rss_max", Mb(raylet_rss_max), "MB", Mb(base_rss));
  report.Add("raylet_pss_max", Mb(raylet_pss_max), "MB", Mb(base_pss));
  report.Add("raylet_private_max", Mb(raylet_private_max), "MB", Mb(base_priv));
  report.Add("gcs_rss", Mb(gcs_rss), "MB", Mb(base_rss));
  report.Add("daemons_measured", static_cast<double>(pids.size()), "processes");
  report.Print();
  if (!json_path.empty()) {
    if (auto s = report.WriteJson(json_path); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace manta::bench

int main(int argc, char** argv) { return manta::bench::Run(argc, argv); }
