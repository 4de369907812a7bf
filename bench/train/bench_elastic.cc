// bench_elastic: how fast an elastic run (num_workers {4, 8} on two
// simulated v6e-16 slices) shrinks, grows and drains, against Ray Train's
// path computed from its constants and this machine's own restart figures.
//
//   bench_elastic [--json FILE] [--model=default] [--seq=128] [--period=10]
//                 [--return-only]
//
// 1. Kill: a host of slice 1 killed (its raylet and workers): kill -> the
//    next completed step, as detect / decide / re-form / first step (goal:
//    <= 1 s + one step).
// 2. Return: a replacement host started: start -> the first step at 8
//    workers, as detect (the raylet joining) / reserve and wait for the step
//    boundary / re-form and transfer / first step (goal: <= 2 s + one step).
//    The returning slice's new workers are sampled meanwhile: their CPU up
//    to that step, its kernel part (on a fresh process, mostly the first
//    touch of its memory) over the machine's cores, and their peak memory.
// 3. Drain: `manta drain-node` of a host mid-run: steps lost (goal 0) and
//    drain -> the first step at 4.
// 4. Restore: the same kill with fsdp across slices: the group restores the
//    latest checkpoint; its join and restore time is the checkpoint load
//    Ray's path pays on every resize.
// Ray's path: a 2 s worker health poll (1 s on average to notice a death),
// a 60 s resize monitor (30 s on average to notice a returned slice), then
// a whole group restart (tear down, reserve, start: measured here by a fixed
// run's restart) from the latest checkpoint (load measured in 4), redoing
// half a checkpoint period of steps on average.
#include <manta/api.h>
#include <manta/state.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/common/cluster.h"
#include "bench/common/proc_stats.h"
#include "bench/common/report.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "nlohmann/json.hpp"

namespace {

using manta::CommandResult;

struct Options {
  std::string model = "default";
  int seq = 128;
  int period = 10;  // checkpoint period
};

bool Fail(const std::string& why) {
  std::cerr << why << "\n";
  return false;
}

std::vector<std::string> Args(const Options& o, const std::string& dir, const std::string& run, int steps,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml",
                                "model_name=" + o.model,
                                "max_target_length=" + std::to_string(o.seq),
                                "per_device_batch_size=1",
                                "steps=" + std::to_string(steps),
                                "ici_fsdp_parallelism=8",
                                "ici_tensor_parallelism=2",
                                "base_output_directory=" + dir,
                                "run_name=" + run,
                                "enable_checkpointing=true",
                                "checkpoint_period=" + std::to_string(o.period),
                                "metrics_file=" + dir + "/" + run + ".jsonl"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

int MetricLines(const std::string& path) {
  std::ifstream in(path);
  return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

// Steps of a metrics file, in order of the lines.
std::vector<int64_t> Steps(const std::string& path) {
  std::vector<int64_t> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(j["step"].get<int64_t>());
  }
  return out;
}

std::string NodeOf(const std::string& slice, int worker) {
  for (const manta::NodeInfo& n : manta::Nodes()) {
    auto s = n.labels.find("manta.io/tpu-slice-name");
    auto w = n.labels.find("manta.io/tpu-worker-id");
    if (n.alive && s != n.labels.end() && s->second == slice && w != n.labels.end() &&
        w->second == std::to_string(worker)) {
      return n.node_id;
    }
  }
  return "";
}

// A run of train_driver in the background; killed if abandoned.
class Run {
 public:
  Run(const manta::bench::LocalCluster& c, const std::string& dir, const std::string& nw,
      const std::vector<std::string>& args) {
    manta::SpawnOptions o;
    o.executable = c.bin_dir() + "/train_driver";
    o.args = {"--temp-dir=" + c.temp_dir(),
              "--num_workers=" + nw,
              "--max_failures=-1",
              "--scheduling_timeout_s=300",
              "--storage_path=" + dir + "/results",
              "--"};
    o.args.insert(o.args.end(), args.begin(), args.end());
    log_ = dir + "/driver_" + std::to_string(manta::NowUnixMs()) + ".log";
    o.log_file = log_;
    auto pid = manta::SpawnDaemon(o);
    pid_ = pid.ok() ? *pid : -1;
    if (!pid.ok()) std::cerr << "cannot start train_driver: " << pid.status().message() << "\n";
  }
  ~Run() {
    if (pid_ > 0 && manta::IsAlive(pid_)) {
      (void)manta::TerminateProcess(pid_, absl::Now() + absl::Seconds(20));
    }
  }
  bool Running() const { return pid_ > 0 && manta::IsAlive(pid_); }
  // Waits for the driver to end: its exit code and its output.
  const CommandResult& Wait() {
    if (pid_ > 0) {
      (void)manta::WaitForExit(pid_, absl::Now() + absl::Minutes(30));
      const std::optional<int> status = manta::ExitStatusOf(pid_);
      result_.exit_code = status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
      pid_ = -1;
    }
    result_.out = manta::ReadFile(log_).value_or("");
    return result_;
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
  CommandResult result_;
};

bool WaitSteps(const Run& run, const std::string& metrics, int n) {
  for (int i = 0; i < 30000; ++i) {  // ten minutes
    if (MetricLines(metrics) >= n) return true;
    if (!run.Running()) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

std::string StepsFailure(Run& run, const std::string& metrics) {
  if (run.Running()) return "too few steps in " + metrics + " after ten minutes";
  return "the run ended early:\n" + run.Wait().out;
}

// "received 09:04:03.402" of the n-th line holding `what`, as unix ms.
int64_t Received(const std::string& out, const std::string& what, int nth = 0) {
  std::regex re(what + R"(.*received (\d\d:\d\d:\d\d\.\d\d\d)\))");
  auto it = std::sregex_iterator(out.begin(), out.end(), re);
  for (int i = 0; i < nth && it != std::sregex_iterator(); ++i) ++it;
  if (it == std::sregex_iterator()) return -1;
  absl::Time today = absl::Now();
  std::string date = absl::FormatTime("%Y-%m-%d ", today, absl::LocalTimeZone());
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%E3S", date + (*it)[1].str(), absl::LocalTimeZone(), &t, &err)) return -1;
  return absl::ToUnixMillis(t);
}

// "decided X s after the event" of group `epoch`.
double Decided(const std::string& out, int epoch) {
  std::smatch m;
  std::regex re("Forming group " + std::to_string(epoch) + R"( .*decided ([0-9.]+) s after the event)");
  return std::regex_search(out, m, re) ? std::stod(m[1].str()) : -1;
}

// The run's metric points at or after `after_ms`, in order.
std::vector<manta::state::TrainMetricPoint> PointsAfter(const std::string& out, int64_t after_ms) {
  std::vector<manta::state::TrainMetricPoint> points;
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(run_id=([0-9a-f]{32}))"))) return points;
  for (const auto& run : manta::state::ListTrainRuns(true)) {
    if (run.run_id != m[1].str()) continue;
    for (const auto& p : run.metrics) {
      if (p.time_ms >= after_ms) points.push_back(p);
    }
  }
  return points;
}

// The first metric point at or after `after_ms` carrying startup_seconds:
// the first step of a group.
std::optional<manta::state::TrainMetricPoint> FirstStepAfter(const std::string& out, int64_t after_ms) {
  for (const auto& p : PointsAfter(out, after_ms)) {
    if (p.metrics.count("startup_seconds")) return p;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// The new workers of a returning slice: children of its hosts' raylets
// that were not there before it returned, read in one /proc scan each time
// Sample() is called.
class ReturningWorkers {
 public:
  struct Totals {
    int64_t time_ms = 0;
    double cpu = 0, system = 0;  // seconds, over every new worker
    int64_t peak = 0;            // bytes: the sum of their VmHWM
  };

  // Call before the slice returns: its live raylets' children are not new.
  ReturningWorkers(const manta::bench::LocalCluster& c, std::string slice, int hosts)
      : cluster_(c), slice_(std::move(slice)), hosts_(hosts) {
    FindRaylets();
    for (pid_t p : Children()) old_.insert(p);
  }

  // Call once the returning host has started, to watch its raylet too.
  void FindRaylets() {
    raylets_.clear();
    for (int h = 0; h < hosts_; ++h) {
      if (const pid_t raylet = cluster_.TpuHostRaylet(slice_, h); raylet > 0) raylets_.insert(raylet);
    }
  }

  void Sample() {
    for (pid_t p : Children()) {
      if (old_.count(p) > 0) continue;
      const std::optional<manta::LiveProcess> live = manta::ReadLiveProcess(p);
      const int64_t peak = manta::bench::PeakRssBytes(p);
      if (!live || peak < 0) continue;  // gone meanwhile: its last reading stays
      latest_[p] = {0, manta::bench::TicksToSeconds(live->user_ticks + live->system_ticks),
                    manta::bench::TicksToSeconds(live->system_ticks), peak};
    }
    Totals t;
    t.time_ms = manta::NowUnixMs();
    for (const auto& [pid, v] : latest_) {
      t.cpu += v.cpu;
      t.system += v.system;
      t.peak += v.peak;
    }
    samples_.push_back(t);
  }

  int64_t last_ms() const { return samples_.empty() ? 0 : samples_.back().time_ms; }
  // The last sample taken at or before `ms`, if any.
  std::optional<Totals> At(int64_t ms) const {
    std::optional<Totals> out;
    for (const Totals& t : samples_) {
      if (t.time_ms <= ms) out = t;
    }
    return out;
  }

 private:
  std::vector<pid_t> Children() const {
    return manta::LiveProcesses([this](const manta::LiveProcess& p) { return raylets_.count(p.ppid) > 0; });
  }

  const manta::bench::LocalCluster& cluster_;
  const std::string slice_;
  const int hosts_;
  std::set<int64_t> raylets_;  // as LiveProcess holds a parent
  std::set<pid_t> old_;
  std::map<pid_t, Totals> latest_;
  std::vector<Totals> samples_;
};

// What the returning workers cost up to their first step at 8 (at
// `first_ms`), beside the kernel time of a steady step after it (between
// `steady_from_ms` and `steady_to_ms`; skipped when those are 0).
void ReportReturningWorkers(const ReturningWorkers& w, int64_t first_ms, int64_t steady_from_ms, int64_t steady_to_ms,
                            manta::bench::Report* report) {
  const auto first = w.At(first_ms);
  if (!first || w.last_ms() < first_ms) return;  // sampling had ended before that step
  report->Add("return_new_workers_cpu", first->cpu, "s");
  report->Add("return_new_workers_kernel", first->system, "s");
  report->Add("return_new_workers_peak_memory", static_cast<double>(first->peak) / (1 << 30), "GiB");
  const auto from = w.At(steady_from_ms), to = w.At(steady_to_ms);
  if (steady_to_ms <= 0 || !from || !to || w.last_ms() < steady_to_ms) return;  // sampling had ended
  // Their kernel time beyond a steady step's, over the cores, is wall time
  // no other work could use, against the goal's 2 s beyond one step.
  const double steady = to->system - from->system;
  const double cores = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  report->Add("return_new_workers_kernel_in_a_steady_step", steady, "s");
  report->Add("return_new_workers_extra_kernel_over_cores", (first->system - steady) / cores, "s", /*baseline=*/2.0);
}

struct Figures {
  double step = 0;                                   // a step at 8 workers, steady
  double teardown = 0, reserve = 0, workers_up = 0;  // a fixed run's restart
  double restore_join = -1;                          // join + checkpoint load
  double kill_to_step = -1, return_to_step = -1;     // the headline figures
  double drain_lost = -1;
};

// Kill a host of slice 1, then start its replacement.
bool KillAndReturn(const manta::bench::LocalCluster& c, const Options& o, const std::string& dir,
                   manta::bench::Report* report, Figures* f) {
  const std::string metrics = dir + "/kill.jsonl";
  Run run(c, dir, "4,8", Args(o, dir, "kill", 12 * o.period));
  if (!WaitSteps(run, metrics, 2 * o.period + 2)) return Fail(StepsFailure(run, metrics));
  const pid_t victim = c.TpuHostRaylet("tpu-group-1", 2);
  const int64_t kill_ms = manta::NowUnixMs();
  if (victim <= 0 || kill(victim, SIGKILL) != 0) return Fail("cannot kill the host's raylet");
  if (!WaitSteps(run, metrics, MetricLines(metrics) + o.period))
    return Fail(StepsFailure(run, metrics));  // trains on at 4
  ReturningWorkers returning(c, "tpu-group-1", 4);
  const int lines = MetricLines(metrics);
  const int64_t start_ms = manta::NowUnixMs();
  (void)c.StartTpuHost(manta::bench::V6e16(1), 2);
  returning.FindRaylets();
  // Sampled until a few steps past the first at 8, then left alone: later
  // steps are the goals' baseline. Figures whose steps came after the
  // sampling are not reported.
  const absl::Time sampling_ends = absl::Now() + absl::Minutes(30);
  while (run.Running() && MetricLines(metrics) < lines + 10 && absl::Now() < sampling_ends) {
    returning.Sample();
    absl::SleepFor(absl::Milliseconds(200));
  }
  returning.Sample();
  const CommandResult& r = run.Wait();
  if (r.exit_code != 0) {
    std::cerr << "the kill run failed:\n" << r.out << r.err << "\n";
    return false;
  }
  auto shrink = FirstStepAfter(r.out, kill_ms);
  auto grow = FirstStepAfter(r.out, start_ms);
  const int64_t died = Received(r.out, "died");
  const int64_t alive = Received(r.out, "whole slice\\(s\\) free again");
  if (!shrink || !grow || died < 0 || alive < 0) {
    std::cerr << "the kill run's log lacks a figure:\n" << r.out << "\n";
    return false;
  }
  report->Add("kill_detect", (died - kill_ms) / 1e3, "s");
  report->Add("kill_decide", Decided(r.out, 2), "s");
  report->Add("kill_reform", shrink->metrics.at("startup_seconds"), "s");
  report->Add("kill_first_step", shrink->metrics.at("seconds"), "s");
  report->Add("return_detect", (alive - start_ms) / 1e3, "s");
  report->Add("return_reserve_start_and_boundary", Decided(r.out, 3), "s");
  report->Add("return_reform_and_transfer", grow->metrics.at("startup_seconds"), "s");
  report->Add("return_first_step", grow->metrics.at("seconds"), "s");
  // Of that step, the time rank 0 (a survivor) waited in collectives: the
  // rest of the group's lag.
  if (auto c = grow->metrics.find("seconds_in_collectives"); c != grow->metrics.end()) {
    report->Add("return_first_step_in_collectives", c->second, "s");
  }
  std::vector<manta::state::TrainMetricPoint> after = PointsAfter(r.out, grow->time_ms + 1);
  ReportReturningWorkers(returning, grow->time_ms, after.size() > 1 ? after[0].time_ms : 0,
                         after.size() > 1 ? after[1].time_ms : 0, report);
  // A steady step at 8 workers: the median of the last ten.
  std::vector<double> tail;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) tail.push_back(j["seconds"].get<double>());
  }
  if (tail.size() > 10) tail.erase(tail.begin(), tail.end() - 10);
  std::sort(tail.begin(), tail.end());
  f->step = tail.empty() ? 0 : tail[tail.size() / 2];
  report->Add("step_at_8_workers", f->step, "s");
  f->kill_to_step = (shrink->time_ms - kill_ms) / 1e3;
  f->return_to_step = (grow->time_ms - start_ms) / 1e3;
  return true;
}

bool Drain(const manta::bench::LocalCluster& c, const Options& o, const std::string& dir, manta::bench::Report* report,
           Figures* f) {
  const std::string metrics = dir + "/drain.jsonl";
  Run run(c, dir, "4,8", Args(o, dir, "drain", 4 * o.period));
  if (!WaitSteps(run, metrics, o.period + 2)) return Fail(StepsFailure(run, metrics));
  const std::string node = NodeOf("tpu-group-0", 1);
  const int64_t drain_ms = manta::NowUnixMs();
  manta::bench::RunManta(c.bin_dir(),
                         {"drain-node", node, "--reason=preemption", "--deadline=60s", "--temp-dir=" + c.temp_dir()});
  const CommandResult& r = run.Wait();
  if (r.exit_code != 0) {
    std::cerr << "the drain run failed:\n" << r.out << r.err << "\n";
    return false;
  }
  const std::vector<int64_t> steps = Steps(metrics);
  int lost = 0;
  for (size_t i = 0; i < steps.size(); ++i) lost += steps[i] != static_cast<int64_t>(i) ? 1 : 0;
  lost += static_cast<int>(4 * o.period - std::min<size_t>(steps.size(), 4 * o.period));
  auto first = FirstStepAfter(r.out, drain_ms);
  f->drain_lost = lost;
  if (first) {
    report->Add("drain_to_step_at_4", (first->time_ms - drain_ms) / 1e3, "s");
    report->Add("drain_detect", (Received(r.out, "is draining") - drain_ms) / 1e3, "s");
    report->Add("drain_step_in_flight_and_decide", Decided(r.out, 2), "s");
    report->Add("drain_reform", first->metrics.at("startup_seconds"), "s");
    report->Add("drain_first_step", first->metrics.at("seconds"), "s");
  }
  // The drained host goes away once idle; bring a new one for the next run.
  for (int i = 0; i < 100 && !NodeOf("tpu-group-0", 1).empty(); ++i) absl::SleepFor(absl::Milliseconds(100));
  (void)c.StartTpuHost(manta::bench::V6e16(0), 1);
  return true;
}

bool Restore(const manta::bench::LocalCluster& c, const Options& o, const std::string& dir,
             manta::bench::Report* report, Figures* f) {
  const std::string metrics = dir + "/restore.jsonl";
  Run run(c, dir, "4,8", Args(o, dir, "restore", 3 * o.period, {"dcn_fsdp_parallelism=2", "dcn_data_parallelism=1"}));
  if (!WaitSteps(run, metrics, o.period + 2)) return Fail(StepsFailure(run, metrics));
  const int64_t kill_ms = manta::NowUnixMs();
  const pid_t victim = c.TpuHostRaylet("tpu-group-1", 1);
  if (victim <= 0 || kill(victim, SIGKILL) != 0) return Fail("cannot kill the host's raylet");
  const CommandResult& r = run.Wait();
  auto first = FirstStepAfter(r.out, kill_ms);
  if (r.exit_code != 0 || !first) {
    std::cerr << "the restore run failed:\n" << r.out << r.err << "\n";
    return false;
  }
  f->restore_join = first->metrics.at("startup_seconds");
  report->Add("restore_kill_to_next_step", (first->time_ms - kill_ms) / 1e3, "s");
  report->Add("restore_join_and_load", f->restore_join, "s");
  (void)c.StartTpuHost(manta::bench::V6e16(1), 1);
  return true;
}

// A fixed run of 8 killed once: tear down, reserve and start, as Ray restarts.
bool FixedRestart(const manta::bench::LocalCluster& c, const Options& o, const std::string& dir, Figures* f) {
  const std::string metrics = dir + "/fixed.jsonl";
  Run run(c, dir, "8", Args(o, dir, "fixed", 2 * o.period + 5));
  if (!WaitSteps(run, metrics, o.period + 2)) return Fail(StepsFailure(run, metrics));
  const pid_t victim = c.TpuHostRaylet("tpu-group-0", 3);
  if (victim <= 0 || kill(victim, SIGKILL) != 0) return Fail("cannot kill the host's raylet");
  (void)c.StartTpuHost(manta::bench::V6e16(0), 3);
  const CommandResult& r = run.Wait();
  auto num = [&](const std::string& pattern) {
    std::smatch m;
    const size_t from = r.out.find("RESTARTING");
    std::string rest = from == std::string::npos ? r.out : r.out.substr(from);
    return std::regex_search(rest, m, std::regex(pattern)) ? std::stod(m[1].str()) : 0.0;
  };
  f->teardown = num(R"(Shut down the worker group in ([0-9.]+) s)");
  f->reserve = num(R"(reserved in ([0-9.]+) s)");
  f->workers_up = num(R"(workers up in ([0-9.]+) s)");
  return r.exit_code == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Elastic training: shrink, grow and drain on two simulated v6e-16 slices, beside Ray's path."};
  Options o;
  std::string json_path;
  app.add_option("--json", json_path, "Write the figures here as JSON.");
  app.add_option("--model", o.model, "model_name of the config.");
  app.add_option("--seq", o.seq, "max_target_length.");
  app.add_option("--period", o.period, "checkpoint_period.");
  bool return_only = false;
  app.add_flag("--return-only", return_only,
               "Measure only the kill and the return (no drain, restore or Ray's path): a quick look at growing back.");
  CLI11_PARSE(app, argc, argv);

  manta::bench::LocalCluster cluster;
  if (auto s = cluster.Start("", manta::bench::TwoV6e16Slices()); !s.ok()) {
    std::cerr << "cannot start a cluster: " << s.message() << "\n";
    return 1;
  }
  manta::InitOptions init;
  init.address = cluster.address();
  init.temp_dir = cluster.temp_dir();
  if (auto s = manta::TryInit(init); !s.ok()) {
    std::cerr << "cannot join the cluster: " << s.message() << "\n";
    return 1;
  }
  const std::string dir = cluster.temp_dir() + "/bench_elastic";
  std::filesystem::create_directories(dir);
  manta::bench::Report report;
  Figures f;
  const bool ok = KillAndReturn(cluster, o, dir, &report, &f) &&
                  (return_only || (Drain(cluster, o, dir, &report, &f) && Restore(cluster, o, dir, &report, &f) &&
                                   FixedRestart(cluster, o, dir, &f)));
  if (ok && !return_only) {
    // Ray Train's path, from its constants and this machine's figures.
    const double restart = f.teardown + f.reserve + f.workers_up + f.restore_join;
    const double redo = o.period / 2.0 * f.step;
    report.Add("kill_to_next_step", f.kill_to_step, "s", /*baseline=*/1.0 + restart + redo + f.step);
    report.Add("return_to_step_at_8", f.return_to_step, "s", /*baseline=*/30.0 + restart + redo + f.step);
    report.Add("drain_steps_lost", f.drain_lost, "steps", /*baseline=*/o.period / 2.0);
  }
  if (ok) {
    // The goals: at most 1 s + one step, 2 s + one step (ratio <= 1: met).
    report.Add("kill_to_next_step_vs_goal", f.kill_to_step, "s", /*baseline=*/1.0 + f.step);
    report.Add("return_to_step_at_8_vs_goal", f.return_to_step, "s", /*baseline=*/2.0 + f.step);
  }
  manta::Shutdown();
  cluster.Stop();
  report.Print();
  if (!json_path.empty()) {
    if (auto s = report.WriteJson(json_path); !s.ok()) std::cerr << s.message() << "\n";
  }
  return ok ? 0 : 1;
}
