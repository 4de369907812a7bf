// bench_gcs_load: the GCS under a large cluster's load.
//
// Simulated mode: a real gcs_server, and in this process N simulated
// raylets (SimulatedRaylets: each with its own port, registering, reporting
// resources, polling and answering health checks as a raylet does). Once
// they are registered, a driver fills the GCS's tables over the real RPCs
// with detached actors and placement groups, which the GCS schedules on the
// simulated nodes. Measured: time to register every node, the GCS's RSS per
// node, the time to fill the tables, the GCS's CPU while it only health
// checks (and holds polls), its RSS and descriptors when full, and the
// latency of the real `manta status` run against it. The baseline is the
// same run with few nodes (and actors and groups in proportion), in the
// same invocation.
//
// Raylet mode: R real raylet processes started at once on this machine
// with low resources; the time until the GCS lists them all alive and the
// `manta status` latency then, against the same with a few raylets.
//
//   bench_gcs_load [--nodes=2000 --actors=10000 --pgs=1000 --raylets=64]
//                  [--quick] [--mode=all|sim|raylets] [--json FILE] [--hold-seconds=S]
//
// Timings are reported, never asserted.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/common/proc_stats.h"
#include "bench/common/cluster.h"
#include "bench/common/report.h"
#include "bench/gcs/gcs_head.h"
#include "bench/gcs/raylet_fleet.h"
#include "bench/gcs/sim_raylets.h"
#include "bench/gcs/table_filler.h"
#include "common/status.h"

namespace manta::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  int nodes = 2000;
  int actors = 10000;
  int pgs = 1000;
  int baseline_nodes = 10;
  int raylets = 64;
  int baseline_raylets = 4;
  int status_runs = 20;
  double hold_seconds = 0;  // keep the full simulated cluster up this long after measuring
  double cpu_seconds = 10;
  double settle_seconds = 3;
  double node_cpus = 8;
  bool poll = true;                    // simulated nodes hold polls, as raylets do
  std::vector<std::string> gcs_flags;  // passed on to gcs_server
  std::string mode = "all";
  std::string json;
};

struct Sizes {
  int nodes, actors, pgs;
};

struct SimFigures {
  double register_s = 0;
  double register_per_node_ms = 0, rss_per_node_kb = 0;  // derived in AddSim
  double late_registrations = 0;                         // nodes a raylet's 5 s connect timeout would have lost
  double rss_empty_mb = 0, rss_nodes_mb = 0, rss_full_mb = 0;
  double gcs_cpu_register_s = 0, sim_cpu_register_s = 0;  // CPU seconds spent registering
  double fill_actors_s = 0, fill_pgs_s = 0;
  double gcs_cpu_fill_s = 0;
  double actors_per_s = 0, gcs_cpu_ms_per_actor = 0;  // the actors' part of the fill
  double cpu_pct = 0;
  double health_checks_per_s = 0;
  double status_p50_ms = 0, status_p99_ms = 0;
  double help_p50_ms = 0;   // `manta --help`: the command's own start-up
  double calls_p50_ms = 0;  // the status's two calls alone, from this process
  double fds = 0;
  SimStats stats;
};

struct FleetFigures {
  double alive_s = 0;
  double cpu_pct = 0;  // the GCS's, once all are alive
  double status_p50_ms = 0, status_p99_ms = 0;
};

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }
double Mb(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

void Progress(const std::string& line) {
  std::fprintf(stderr, "[bench_gcs_load] %s\n", line.c_str());
  std::fflush(stderr);
}

// Steps 3-5: actors and groups through the real RPCs, timed.
absl::Status Fill(const GcsHead& head, const Sizes& sizes, SimFigures& f) {
  TableFiller filler(head.address(), head.token());
  RETURN_IF_ERROR(filler.AddJob());
  const double gcs_cpu0 = CpuSeconds(head.pid());
  auto start = Clock::now();
  RETURN_IF_ERROR(filler.CreateActors(sizes.actors, /*cpus=*/1, absl::Minutes(20)));
  f.fill_actors_s = Seconds(start);
  if (sizes.actors > 0) {
    f.actors_per_s = sizes.actors / f.fill_actors_s;
    f.gcs_cpu_ms_per_actor = 1e3 * (CpuSeconds(head.pid()) - gcs_cpu0) / sizes.actors;
  }
  Progress(absl::StrCat(sizes.actors, " actors ALIVE in ", f.fill_actors_s, " s"));
  start = Clock::now();
  RETURN_IF_ERROR(filler.CreatePlacementGroups(sizes.pgs, /*bundles=*/2, /*cpus=*/1, absl::Minutes(20)));
  f.fill_pgs_s = Seconds(start);
  Progress(absl::StrCat(sizes.pgs, " placement groups CREATED in ", f.fill_pgs_s, " s"));
  return absl::OkStatus();
}

// Steps 1-7 against a started GCS; `sim` is set once the nodes run.
absl::Status MeasureSimulated(const Config& cfg, const Sizes& sizes, GcsHead& head,
                              std::unique_ptr<SimulatedRaylets>& sim, SimFigures& f) {
  const pid_t gcs = head.pid();
  Sleep(std::max(cfg.settle_seconds, 0.2));  // start-up done
  f.rss_empty_mb = Mb(RssBytes(gcs));

  // 1. Register every node at once.
  ASSIGN_OR_RETURN(ResourceSet offer, ResourceSet::FromMap({{"CPU", cfg.node_cpus}, {"memory", 16e9}}));
  ASSIGN_OR_RETURN(sim, SimulatedRaylets::Start({sizes.nodes, offer, head.address(), head.token(), cfg.poll,
                                                 head.bin() + "/bench_gcs_sim_workers", head.session_dir()}));
  double gcs_cpu0 = CpuSeconds(gcs), own_cpu0 = CpuSeconds(getpid());
  auto start = Clock::now();
  RETURN_IF_ERROR(sim->RegisterAll(absl::Minutes(5)));
  f.register_s = Seconds(start);
  f.gcs_cpu_register_s = CpuSeconds(gcs) - gcs_cpu0;
  f.sim_cpu_register_s = CpuSeconds(getpid()) - own_cpu0;
  f.late_registrations = static_cast<double>(sim->stats().late_registrations);
  Progress(absl::StrCat(sizes.nodes, " nodes registered in ", f.register_s, " s (GCS CPU ", f.gcs_cpu_register_s,
                        " s, simulator CPU ", f.sim_cpu_register_s, " s)"));

  // 2. The GCS's memory with the nodes alone, once their first reports are in.
  RETURN_IF_ERROR(sim->WaitReported(absl::Minutes(2)));
  Sleep(cfg.settle_seconds);
  f.rss_nodes_mb = Mb(RssBytes(gcs));

  gcs_cpu0 = CpuSeconds(gcs);
  RETURN_IF_ERROR(Fill(head, sizes, f));
  f.gcs_cpu_fill_s = CpuSeconds(gcs) - gcs_cpu0;

  // 6. Steady state: nothing changes, the GCS health-checks every node.
  RETURN_IF_ERROR(sim->WaitReported(absl::Minutes(2)));
  Sleep(cfg.settle_seconds);
  int64_t checks0 = sim->stats().health_checks;
  gcs_cpu0 = CpuSeconds(gcs);
  auto window = Clock::now();
  Sleep(cfg.cpu_seconds);
  double elapsed = Seconds(window);
  f.cpu_pct = (CpuSeconds(gcs) - gcs_cpu0) / elapsed * 100.0;
  f.health_checks_per_s = static_cast<double>(sim->stats().health_checks - checks0) / elapsed;
  f.rss_full_mb = Mb(RssBytes(gcs));
  f.fds = OpenFds(gcs);

  // 7. What an operator sees.
  ASSIGN_OR_RETURN(std::vector<double> ms, head.TimeStatus(cfg.status_runs));
  f.status_p50_ms = Quantile(ms, 0.5);
  f.status_p99_ms = Quantile(ms, 0.99);
  ASSIGN_OR_RETURN(ms, head.TimeManta({"--help"}, cfg.status_runs));
  f.help_p50_ms = Quantile(ms, 0.5);
  ASSIGN_OR_RETURN(ms, head.TimeStatusCalls(cfg.status_runs));
  f.calls_p50_ms = Quantile(ms, 0.5);
  f.stats = sim->stats();
  if (cfg.hold_seconds > 0 && sizes.nodes == cfg.nodes) {  // the measured run, not the baseline
    Progress(absl::StrCat("holding the cluster for ", cfg.hold_seconds, " s: MANTA_TOKEN=", head.token(),
                          " manta status --address ", head.address()));
    Sleep(cfg.hold_seconds);
  }
  return sim->Healthy();
}

absl::StatusOr<SimFigures> RunSimulated(const std::string& bin, const Config& cfg, const Sizes& sizes) {
  Progress(
      absl::StrCat("simulated: ", sizes.nodes, " nodes, ", sizes.actors, " actors, ", sizes.pgs, " placement groups"));
  SimFigures f;
  // Declared first, destroyed last: the GCS stops first, ending held polls.
  std::unique_ptr<SimulatedRaylets> sim;
  ASSIGN_OR_RETURN(auto head, GcsHead::Start(bin, cfg.gcs_flags));
  absl::Status s = MeasureSimulated(cfg, sizes, *head, sim, f);
  if (!s.ok()) {
    Progress("the GCS's log ends:\n" + head->LogTail(5));
    if (sim) {
      SimStats st = sim->stats();
      Progress(absl::StrCat("simulated nodes: ", st.registered, " registered (", st.register_retries,
                            " RegisterNode calls retried, ", st.late_registrations, " after 5 s), ", st.health_checks,
                            " health checks (", st.health_checks_late, " late, ", st.health_check_gaps,
                            " gaps over 3 s), ", st.polls, " poll replies (", st.poll_messages, " messages)"));
    }
  }
  head->Stop();  // ends the held polls
  if (sim) sim->Stop();
  if (!s.ok()) return s;
  return f;
}

absl::StatusOr<FleetFigures> RunFleet(const std::string& bin, const Config& cfg, int count) {
  Progress(absl::StrCat("real raylets: ", count));
  FleetFigures f;
  ASSIGN_OR_RETURN(auto head, GcsHead::Start(bin, cfg.gcs_flags));
  RayletFleet fleet(*head);
  RETURN_IF_ERROR(fleet.Start(count));
  ASSIGN_OR_RETURN(f.alive_s, fleet.WaitAlive(absl::Minutes(3)));
  Progress(absl::StrCat(count, " raylets alive in ", f.alive_s, " s"));
  Sleep(cfg.settle_seconds);
  double cpu0 = CpuSeconds(head->pid());
  auto window = Clock::now();
  Sleep(cfg.cpu_seconds);
  f.cpu_pct = (CpuSeconds(head->pid()) - cpu0) / Seconds(window) * 100.0;
  ASSIGN_OR_RETURN(std::vector<double> ms, head->TimeStatus(cfg.status_runs));
  f.status_p50_ms = Quantile(ms, 0.5);
  f.status_p99_ms = Quantile(ms, 0.99);
  fleet.Stop();
  head->Stop();
  return f;
}

Sizes Scaled(const Config& cfg, int nodes) {
  auto scale = [&](int n) {
    return n == 0 ? 0 : std::max(1, static_cast<int>(std::lround(static_cast<double>(n) * nodes / cfg.nodes)));
  };
  return {nodes, scale(cfg.actors), scale(cfg.pgs)};
}

void AddSim(Report& report, const Sizes& full, SimFigures v, const Sizes& base, SimFigures b) {
  for (SimFigures* f : {&v, &b}) {
    int n = f == &v ? full.nodes : base.nodes;
    f->register_per_node_ms = f->register_s * 1000 / n;
    f->rss_per_node_kb = (f->rss_nodes_mb - f->rss_empty_mb) * 1024.0 / n;
  }
  report.Add("sim_nodes", full.nodes, "nodes", base.nodes);
  struct Row {
    const char* metric;
    double SimFigures::*field;
    const char* unit;
  };
  static constexpr Row kRows[] = {
      {"register_all_s", &SimFigures::register_s, "s"},
      {"register_per_node_ms", &SimFigures::register_per_node_ms, "ms"},
      {"register_late_nodes", &SimFigures::late_registrations, "nodes"},
      {"gcs_cpu_register_s", &SimFigures::gcs_cpu_register_s, "CPU s"},
      {"sim_cpu_register_s", &SimFigures::sim_cpu_register_s, "CPU s"},
      {"gcs_rss_per_node", &SimFigures::rss_per_node_kb, "KB"},
      {"gcs_rss_empty", &SimFigures::rss_empty_mb, "MB"},
      {"gcs_rss_full", &SimFigures::rss_full_mb, "MB"},
      {"gcs_open_fds", &SimFigures::fds, "fds"},
      {"fill_actors_s", &SimFigures::fill_actors_s, "s"},
      {"fill_pgs_s", &SimFigures::fill_pgs_s, "s"},
      {"gcs_cpu_fill_s", &SimFigures::gcs_cpu_fill_s, "CPU s"},
      {"actors_per_s", &SimFigures::actors_per_s, "actors/s"},
      {"gcs_cpu_ms_per_actor", &SimFigures::gcs_cpu_ms_per_actor, "CPU ms"},
      {"gcs_cpu_steady", &SimFigures::cpu_pct, "% of one core"},
      {"health_checks_per_s", &SimFigures::health_checks_per_s, "checks/s"},
      {"status_p50_ms", &SimFigures::status_p50_ms, "ms"},
      {"status_p99_ms", &SimFigures::status_p99_ms, "ms"},
      {"status_calls_p50_ms", &SimFigures::calls_p50_ms, "ms"},
      {"manta_help_p50_ms", &SimFigures::help_p50_ms, "ms"},
  };
  for (const Row& r : kRows) report.Add(r.metric, v.*r.field, r.unit, b.*r.field);
}

void PrintGoals(const Config& cfg, const SimFigures* sim, const FleetFigures* fleet) {
  auto line = [](const char* what, double value, double goal, const char* unit, bool at_least = false) {
    const bool met = at_least ? value >= goal : value < goal;
    std::printf("  %-40s %10.1f %-4s goal %s %.0f: %s (%.2f of it)\n", what, value, unit, at_least ? ">=" : "<", goal,
                met ? "met" : "NOT met", value / goal);
  };
  std::printf("\ngoals\n");
  if (sim != nullptr) {
    line(absl::StrCat("manta status p99, ", cfg.nodes, " nodes").c_str(), sim->status_p99_ms, 200, "ms");
    line("GCS CPU while health checking", sim->cpu_pct, 100, "%");
    line(absl::StrCat(cfg.actors, " actors ALIVE a second").c_str(), sim->actors_per_s, 1000, "/s", true);
    line("GCS CPU per actor", sim->gcs_cpu_ms_per_actor, 1, "ms");
  }
  if (fleet != nullptr) {
    line(absl::StrCat("manta status p99, ", cfg.raylets, " raylets").c_str(), fleet->status_p99_ms, 200, "ms");
  }
}

int Run(const Config& cfg) {
  CleanUpOnSignal();
  long fd_limit = RaiseFdLimit();
  // Each side of the GCS holds about four descriptors per node (two
  // connections each way) and one per actor's worker connection.
  long wanted = 4L * cfg.nodes + cfg.actors + 1000;
  if (fd_limit < wanted) {
    std::fprintf(stderr, "warning: descriptor limit %ld is below the %ld this run may need\n", fd_limit, wanted);
  }
  const std::string bin = BinDir();
  Report report;
  std::optional<SimFigures> sim;
  std::optional<FleetFigures> fleet;
  if (cfg.mode != "raylets") {
    Sizes base_sizes = Scaled(cfg, cfg.baseline_nodes), full_sizes{cfg.nodes, cfg.actors, cfg.pgs};
    auto base = RunSimulated(bin, cfg, base_sizes);
    auto full = base.ok() ? RunSimulated(bin, cfg, full_sizes) : base;
    if (!full.ok()) {
      std::fprintf(stderr, "simulated run failed: %s\n", full.status().ToString().c_str());
      return 1;
    }
    sim = *full;
    AddSim(report, full_sizes, *full, base_sizes, *base);
    std::printf(
        "simulated nodes answered %lld health checks, sent %lld reports and %lld keepalives, got %lld poll "
        "replies (%lld messages, %.1f MB, %lld gaps), granted %lld leases (%lld rejected)\n",
        static_cast<long long>(full->stats.health_checks), static_cast<long long>(full->stats.reports),
        static_cast<long long>(full->stats.keepalives), static_cast<long long>(full->stats.polls),
        static_cast<long long>(full->stats.poll_messages), static_cast<double>(full->stats.poll_bytes) / 1e6,
        static_cast<long long>(full->stats.poll_gaps), static_cast<long long>(full->stats.leases_granted),
        static_cast<long long>(full->stats.leases_rejected));
  }
  if (cfg.mode != "sim") {
    auto base = RunFleet(bin, cfg, cfg.baseline_raylets);
    auto full = base.ok() ? RunFleet(bin, cfg, cfg.raylets) : base;
    if (!full.ok()) {
      std::fprintf(stderr, "raylet run failed: %s\n", full.status().ToString().c_str());
      return 1;
    }
    fleet = *full;
    report.Add("raylets", cfg.raylets, "raylets", cfg.baseline_raylets);
    report.Add("raylets_alive_s", full->alive_s, "s", base->alive_s);
    report.Add("raylets_gcs_cpu", full->cpu_pct, "% of one core", base->cpu_pct);
    report.Add("raylets_status_p50_ms", full->status_p50_ms, "ms", base->status_p50_ms);
    report.Add("raylets_status_p99_ms", full->status_p99_ms, "ms", base->status_p99_ms);
  }
  std::printf("\n");
  report.Print();
  PrintGoals(cfg, sim ? &*sim : nullptr, fleet ? &*fleet : nullptr);
  if (!cfg.json.empty()) {
    if (auto s = report.WriteJson(cfg.json); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace manta::bench

int main(int argc, char** argv) {
  // As the daemons do: the simulated nodes share the machine with the GCS.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  manta::bench::Config cfg;
  bool quick = false;
  CLI::App app{"GCS load: simulated nodes with actors and placement groups, and real raylets."};
  auto* nodes = app.add_option("--nodes", cfg.nodes, "Simulated nodes.")->check(CLI::Range(1, 4000));
  auto* actors = app.add_option("--actors", cfg.actors, "Detached actors.")->check(CLI::Range(0, 100000));
  auto* pgs = app.add_option("--pgs", cfg.pgs, "Placement groups (2 bundles each).")->check(CLI::Range(0, 10000));
  app.add_option("--baseline-nodes", cfg.baseline_nodes, "Simulated nodes of the baseline run.")
      ->check(CLI::Range(1, 4000));
  auto* raylets = app.add_option("--raylets", cfg.raylets, "Real raylet processes.")->check(CLI::Range(1, 256));
  app.add_option("--baseline-raylets", cfg.baseline_raylets, "Real raylets of the baseline run.")
      ->check(CLI::Range(1, 256));
  auto* runs = app.add_option("--status-runs", cfg.status_runs, "`manta status` runs.")->check(CLI::Range(1, 1000));
  app.add_option("--hold-seconds", cfg.hold_seconds, "Keep the full simulated cluster up this long, to try it.")
      ->check(CLI::Range(0.0, 3600.0));
  auto* cpu = app.add_option("--cpu-seconds", cfg.cpu_seconds, "CPU measuring window.")->check(CLI::Range(0.1, 600.0));
  auto* settle =
      app.add_option("--settle-seconds", cfg.settle_seconds, "Pause before measuring.")->check(CLI::Range(0.0, 60.0));
  app.add_option("--node-cpus", cfg.node_cpus, "CPUs each simulated node offers.")->check(CLI::Range(1.0, 1024.0));
  app.add_flag("!--no-poll", cfg.poll, "Simulated nodes do not subscribe (to see what pub/sub costs).");
  app.add_option("--gcs-flag", cfg.gcs_flags, "A gcs_server flag, e.g. --gcs-flag=--health_check_timeout_ms=5000.")
      ->allow_extra_args(false);
  app.add_option("--mode", cfg.mode, "all, sim or raylets.")->check(CLI::IsMember({"all", "sim", "raylets"}));
  app.add_flag("--quick", quick, "A short run: 200 nodes, 1,000 actors, 100 groups, 16 raylets.");
  app.add_option("--json", cfg.json, "Write the figures here as JSON.");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    // Flags given explicitly win.
    if (nodes->count() == 0) cfg.nodes = 200;
    if (actors->count() == 0) cfg.actors = 1000;
    if (pgs->count() == 0) cfg.pgs = 100;
    if (raylets->count() == 0) cfg.raylets = 16;
    if (runs->count() == 0) cfg.status_runs = 10;
    if (cpu->count() == 0) cfg.cpu_seconds = 4;
    if (settle->count() == 0) cfg.settle_seconds = 1;
  }
  return manta::bench::Run(cfg);
}
