#include "bench/train/gloo_bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "gloo/allgather_ring.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "nlohmann/json.hpp"
#include "train/kernels/rendezvous.h"

namespace manta::train::bench {
namespace {

template <typename F>
double GiBPerSecond(size_t bytes, int reps, F&& run) {
  run();  // warm-up, connects buffers
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) run();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return bytes * static_cast<double>(reps) / s / (1 << 30);
}

}  // namespace

int RunGlooChild(int rank, int port) {
  std::unique_ptr<RendezvousServer> server;
  if (rank == 0) server = std::move(*RendezvousServer::Start(port));
  auto store = RendezvousClient::Connect("127.0.0.1:" + std::to_string(port), absl::Seconds(30));
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  context->connectFullMesh(**store, device);
  nlohmann::json out;
  for (size_t mib : {1, 16}) {
    const size_t n = mib * (1 << 20) / sizeof(float);
    std::vector<float> a(n, 1.0f), b(n * 2, 0.0f);
    gloo::AllreduceRingChunked<float> ring(context, {a.data()}, static_cast<int>(n));
    out["allreduce_ring_chunked_" + std::to_string(mib) + "MiB"] =
        GiBPerSecond(n * sizeof(float), 10, [&] { ring.run(); });
    gloo::AllgatherRing<float> gather(context, {a.data()}, b.data(), static_cast<int>(n));
    gloo::BarrierAllToOne barrier(context);
    out["allgather_ring_" + std::to_string(mib) + "MiB"] = GiBPerSecond(n * sizeof(float), 10, [&] {
      gather.run();
      barrier.run();
    });
    out["broadcast_fresh_" + std::to_string(mib) + "MiB"] = GiBPerSecond(n * sizeof(float), 10, [&] {
      gloo::BroadcastOneToAll<float> bcast(context, {a.data()}, static_cast<int>(n), 0);
      bcast.run();
    });
    uint32_t tag = 0;
    out["allreduce_options_api_" + std::to_string(mib) + "MiB"] =
        GiBPerSecond(n * sizeof(float), mib == 1 ? 10 : 3, [&] {
          gloo::AllreduceOptions opts(context);
          opts.setInput(a.data(), n);
          opts.setOutput(a.data(), n);
          opts.setTag(++tag);
          opts.setReduceFunction([](void* c, const void* x, const void* y, size_t k) {
            float* cf = static_cast<float*>(c);
            const float* xf = static_cast<const float*>(x);
            const float* yf = static_cast<const float*>(y);
            for (size_t i = 0; i < k; ++i) cf[i] = xf[i] + yf[i];
          });
          gloo::allreduce(opts);
        });
  }
  gloo::BarrierAllToOne(context).run();
  if (rank == 0) std::cout << out.dump() << std::endl;
  return 0;
}

std::map<std::string, double> MeasureGloo(const std::string& self) {
  const int port = PickCoordinatorPort().value_or(20000 + static_cast<int>(::getpid() % 10000));
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0) return {};
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (rank == 0) ::dup2(pipe_fd[1], STDOUT_FILENO);
      ::close(pipe_fd[0]);
      ::close(pipe_fd[1]);
      std::string r = "--gloo_child=" + std::to_string(rank), p = "--port=" + std::to_string(port);
      ::execl(self.c_str(), self.c_str(), r.c_str(), p.c_str(), nullptr);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  ::close(pipe_fd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fd[0], buf, sizeof(buf))) > 0) text.append(buf, n);
  ::close(pipe_fd[0]);
  for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
  std::map<std::string, double> result;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) result[k] = v.get<double>();
  }
  return result;
}

}  // namespace manta::train::bench
