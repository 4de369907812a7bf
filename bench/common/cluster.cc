#include "bench/common/cluster.h"

#include <grpcpp/grpcpp.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/rpc/grpc_util.h"
#include "common/tpu.h"
#include "proto/node_manager.grpc.pb.h"

namespace manta::bench {

using Clock = std::chrono::steady_clock;

double Rate(double seconds, int per_round, const std::function<void()>& round) {
  round();  // warm up: leases, connections
  auto start = Clock::now();
  int64_t ops = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    round();
    ops += per_round;
  }
  return static_cast<double>(ops) / std::chrono::duration<double>(Clock::now() - start).count();
}

PairedRates PairedRate(double seconds, int per_round, const std::function<void()>& round, int baseline_per_round,
                       const std::function<void()>& baseline_round) {
  round();  // warm up both
  baseline_round();
  const double slice = 0.1;
  struct Side {
    int64_t ops = 0;
    double elapsed = 0;
    int64_t step = 1;  // rounds between two reads of the clock
  } metric, baseline;
  // Runs `fn` for one slice (at least one round) and adds to `side`. As
  // Ray's timeit, the clock is read once per batch of rounds, the batch
  // doubling while it takes under a millisecond.
  auto run_slice = [slice](const std::function<void()>& fn, int per, Side& side) {
    auto start = Clock::now();
    double t = 0;
    do {
      for (int64_t i = 0; i < side.step; ++i) fn();
      side.ops += per * side.step;
      const double before = t;
      t = std::chrono::duration<double>(Clock::now() - start).count();
      if (t - before < 1e-3) side.step *= 2;
    } while (t < slice);
    side.elapsed += t;
  };
  while (metric.elapsed < seconds || baseline.elapsed < seconds) {
    run_slice(baseline_round, baseline_per_round, baseline);
    run_slice(round, per_round, metric);
  }
  return {static_cast<double>(metric.ops) / metric.elapsed, static_cast<double>(baseline.ops) / baseline.elapsed};
}

std::string BinDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string path(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/'));
}

int RunManta(const std::string& bin, std::vector<std::string> args,
             std::vector<std::pair<std::string, std::string>> env) {
  SpawnOptions opts;
  opts.executable = bin + "/manta";
  opts.args = std::move(args);
  opts.env = std::move(env);
  auto r = RunAndCapture(opts, absl::Seconds(60));
  if (!r.ok()) return 1;
  if (r->exit_code != 0) std::cerr << r->err;
  return r->exit_code;
}

absl::Status LocalCluster::Start(const std::string& address, const ClusterSpec& spec) {
  if (!address.empty()) {
    address_ = address;
    return absl::OkStatus();
  }
  // Signals go to one thread that tears down (blocked before any thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  char tmpl[] = "/tmp/manta-bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot create a temporary directory");
  temp_dir_ = tmpl;
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  std::thread([bin = bin_, dir = temp_dir_, stopped = stopped_, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!*stopped) {
      std::cerr << "interrupted; stopping the benchmark's cluster\n";
      RunManta(bin, {"stop", "--force", "--temp-dir=" + dir});
    }
    std::_Exit(128 + sig);
  }).detach();
  if (RunManta(bin_, {"start", "--head", absl::StrCat("--port=", *port), absl::StrCat("--num-cpus=", spec.num_cpus),
                      "--include-dashboard=false", "--temp-dir=" + temp_dir_}) != 0) {
    Stop();
    return absl::InternalError("manta start --head failed");
  }
  address_ = absl::StrCat("127.0.0.1:", *port);
  for (const TpuSlice& slice : spec.tpu_slices) {
    auto type = tpu::ParsePodType(slice.pod_type);
    auto topology = tpu::ParseTopology(slice.topology);
    if (!type.ok() || !topology.ok()) return absl::InvalidArgumentError("bad slice " + slice.pod_type);
    auto hosts = tpu::HostsPerSlice(*type, *topology);
    if (!hosts.ok()) return hosts.status();
    for (int w = 0; w < *hosts; ++w) {
      if (absl::Status s = StartTpuHost(slice, w); !s.ok()) {
        Stop();
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartTpuHost(const TpuSlice& slice, int worker) const {
  std::vector<std::pair<std::string, std::string>> env = {{tpu::kEnvAcceleratorType, slice.pod_type},
                                                          {tpu::kEnvTopology, slice.topology},
                                                          {tpu::kEnvWorkerId, std::to_string(worker)},
                                                          {tpu::kEnvName, slice.name}};
  if (RunManta(bin_, {"start", "--address=" + address_, "--num-cpus=1", "--temp-dir=" + temp_dir_}, env) != 0) {
    return absl::InternalError(absl::StrCat("manta start --address failed for host ", worker, " of ", slice.name));
  }
  return absl::OkStatus();
}

pid_t LocalCluster::TpuHostRaylet(const std::string& slice, int worker) const {
  const std::string name = absl::StrCat(tpu::kEnvName, "=", slice);
  const std::string id = absl::StrCat(tpu::kEnvWorkerId, "=", worker);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(temp_dir_ + "/session_latest/pids", ec)) {
    if (e.path().filename().string().rfind("raylet_", 0) != 0) continue;
    auto pid = ReadPidFile(e.path().string());
    if (!pid.ok()) continue;
    auto env = ReadFile(absl::StrCat("/proc/", *pid, "/environ"));
    if (!env.ok()) continue;
    std::vector<std::string> vars = absl::StrSplit(*env, '\0');
    if (std::count(vars.begin(), vars.end(), name) > 0 && std::count(vars.begin(), vars.end(), id) > 0) return *pid;
  }
  return -1;
}

void LocalCluster::Stop() {
  if (temp_dir_.empty() || *stopped_) return;
  *stopped_ = true;
  RunManta(bin_, {"stop", "--force", "--temp-dir=" + temp_dir_});
  std::string cmd = "rm -rf '" + temp_dir_ + "'";
  if (std::system(cmd.c_str()) != 0) std::cerr << "could not remove " << temp_dir_ << "\n";
}

struct RawGrpc::State {
  std::unique_ptr<rpc::NodeManagerService::Stub> stub;
};

RawGrpc::RawGrpc() : state_(std::make_unique<State>()) {}

RawGrpc::~RawGrpc() {
  if (server_ > 0) TerminateProcess(server_, absl::Now() + absl::Seconds(2)).IgnoreError();
}

bool RawGrpc::Start(const std::string& bin) {
  auto port = PickFreePort();
  if (!port.ok()) return false;
  SpawnOptions opts;
  opts.executable = bin + "/bench_grpc_idle_server";
  opts.args = {absl::StrCat("127.0.0.1:", *port)};
  opts.kill_with_parent = true;  // gone with us, however we end
  auto pid = SpawnDaemon(opts);
  if (!pid.ok()) return false;
  server_ = *pid;
  state_->stub = rpc::NodeManagerService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", *port)));
  return PollUntil([&] { return Sequential(1) > 0; }, absl::Now() + absl::Seconds(10));
}

int RawGrpc::Sequential(int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    rpc::HealthCheckRequest req;
    rpc::HealthCheckReply reply;
    ok += state_->stub->HealthCheck(&ctx, req, &reply).ok();
  }
  return ok;
}

void RawGrpc::InFlight(int n) {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, finished = 0, in_flight = 0;
  struct Call {
    grpc::ClientContext ctx;
    rpc::HealthCheckRequest req;
    rpc::HealthCheckReply reply;
  };
  std::unique_lock<std::mutex> lock(mu);
  while (finished < n) {
    while (in_flight < 64 && started < n) {
      auto* c = new Call;
      ++started;
      ++in_flight;
      state_->stub->async()->HealthCheck(&c->ctx, &c->req, &c->reply, [&, c](grpc::Status) {
        delete c;
        std::lock_guard<std::mutex> l(mu);
        --in_flight;
        ++finished;
        cv.notify_one();
      });
    }
    cv.wait(lock);
  }
}

}  // namespace manta::bench
