// bench_disaggregated: the time between tokens of running streams when a
// burst of long prompts arrives. Interleaved (one engine prefills and
// decodes, a prefill taking a whole step) against disaggregated (a prefill
// engine and a generate engine, the K/V moved between them over gloo as on
// two slices), in the same run, on the same weights, one BLAS thread per
// engine.
//
//   build/bin/bench_disaggregated --json out.json
//   build/bin/bench_disaggregated --streams 4 --burst 8 --prompt_tokens 384 --stream_tokens 200
//
// Reported: p50 and p99 time between tokens of the streams from the burst
// on, in each mode, and disaggregated / interleaved (goal for p99: <= 0.5).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/common/report.h"
#include "serve/engine/batcher.h"
#include "serve/engine/group_engine.h"
#include "serve/engine/weights.h"
#include "train/kernels/blas.h"
#include "train/kernels/rendezvous.h"

namespace {

using Clock = std::chrono::steady_clock;
using manta::serve::Batcher;
using manta::serve::GenerateRequest;
using manta::serve::StepRunner;

struct Load {
  int streams = 4;
  int burst = 8;
  int prompt_tokens = 384;
  int stream_tokens = 200;
};

struct Gaps {
  double p50 = 0, p99 = 0;
  size_t samples = 0;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Streams start, and once each has 20 tokens the burst arrives; the gaps
// between the streams' tokens from then on.
Gaps Measure(StepRunner* runner, const Load& load, int vocab) {
  Batcher batcher(runner);
  absl::Mutex mu;
  std::vector<std::vector<Clock::time_point>> times(load.streams);
  std::atomic<int> done{0};
  const int total = load.streams + load.burst;
  auto submit = [&](std::vector<int32_t> prompt, int max_tokens, int stream) {
    GenerateRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    if (stream >= 0) {
      r.on_token = [&, stream](int32_t) {
        absl::MutexLock lock(&mu);
        times[stream].push_back(Clock::now());
      };
    }
    r.on_done = [&](const absl::Status& s, manta::serve::FinishReason) {
      if (!s.ok()) std::fprintf(stderr, "request failed: %s\n", s.ToString().c_str());
      ++done;
    };
    batcher.Submit(std::move(r));
  };
  for (int s = 0; s < load.streams; ++s) submit({1 + s, 2, 3, 4, 5, 6, 7, 8}, load.stream_tokens, s);
  Clock::time_point burst_at{};
  bool burst_sent = false;
  while (done < total) {
    if (!batcher.Step()) continue;
    if (!burst_sent) {
      absl::MutexLock lock(&mu);
      bool warm = true;
      for (const auto& t : times) warm &= t.size() >= 20;
      if (!warm) continue;
    }
    if (!burst_sent) {
      burst_sent = true;
      burst_at = Clock::now();
      for (int b = 0; b < load.burst; ++b) {
        std::vector<int32_t> prompt(load.prompt_tokens);
        for (int i = 0; i < load.prompt_tokens; ++i) prompt[i] = (b * 131 + i * 17) % (vocab - 1) + 1;
        submit(std::move(prompt), 4, -1);
      }
    }
  }
  std::vector<double> gaps;
  absl::MutexLock lock(&mu);
  for (const auto& t : times) {
    for (size_t i = 1; i < t.size(); ++i) {
      if (t[i - 1] >= burst_at) gaps.push_back(std::chrono::duration<double>(t[i] - t[i - 1]).count());
    }
  }
  return {Quantile(gaps, 0.5), Quantile(gaps, 0.99), gaps.size()};
}

manta::train::ModelShape Shape() {
  manta::train::ModelShape m;
  m.emb_dim = 256;
  m.num_query_heads = 8;
  m.num_kv_heads = 4;
  m.head_dim = 32;
  m.mlp_dim = 1024;
  m.num_layers = 4;
  m.vocab_size = 1024;
  return m;
}

// A prefill process and a generate process (threads here, each with its
// own gloo connections) over a mesh whose data axis spans the two.
Gaps Disaggregated(const manta::serve::ServingWeights& w, const Load& load, int max_len) {
  auto port = manta::train::PickCoordinatorPort();
  if (!port.ok()) return {};
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  std::atomic<manta::serve::GroupEngine*> prefill_leader{nullptr};
  absl::Notification prefill_ready, generate_done;
  Gaps gaps;
  auto process = [&](int p) {
    manta::train::DistributedEnv env;
    env.coordinator_address = address;
    env.process_id = p;
    env.num_processes = 2;
    env.num_slices = 2;
    env.slice_id = p;
    manta::train::ParallelismConfig par;
    par.dcn_data = 2;
    par.ici_fsdp = 1;
    par.ici_tensor = 1;
    auto mesh = manta::train::Mesh::Create(par, env);
    auto comm = manta::train::Communicator::Create(*mesh, env, absl::Seconds(60));
    if (!comm.ok()) {
      std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
      std::exit(1);
    }
    manta::serve::GroupRole role;
    role.kind = p == 0 ? manta::serve::GroupRole::kPrefill : manta::serve::GroupRole::kGenerate;
    role.send_prompt = [&](int64_t id, const std::vector<int32_t>& prompt,
                           const manta::serve::SamplingParams& sampling) {
      prefill_ready.WaitForNotification();
      return prefill_leader.load()->EnqueuePrefill(id, prompt, sampling);
    };
    const int slots = p == 0 ? 1 : load.streams + load.burst;
    manta::serve::GroupEngine group(comm->get(), p, {&w}, {.slots = slots, .max_len = max_len}, role);
    if (p == 0) {
      prefill_leader = &group;
      prefill_ready.Notify();
      generate_done.WaitForNotification();
    } else {
      gaps = Measure(group.leader(), load, static_cast<int>(w.shape().vocab_size));
      generate_done.Notify();
    }
    group.Stop();
  };
  std::thread prefill(process, 0), generate(process, 1);
  prefill.join();
  generate.join();
  return gaps;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time between tokens under a burst of long prompts: interleaved vs disaggregated serving"};
  Load load;
  std::string json;
  app.add_option("--streams", load.streams, "Requests decoding when the burst comes");
  app.add_option("--burst", load.burst, "Long prompts arriving at once");
  app.add_option("--prompt_tokens", load.prompt_tokens, "Tokens of each long prompt");
  app.add_option("--stream_tokens", load.stream_tokens, "Tokens each stream generates");
  app.add_option("--json", json, "Write the report here");
  CLI11_PARSE(app, argc, argv);
  manta::train::SetBlasThreads(1);
  const int max_len = load.prompt_tokens + load.stream_tokens + 16;
  auto w = manta::serve::ServingWeights::Init(Shape(), /*seed=*/3, 1, 0);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return 1;
  }
  std::printf("model: %.1fM parameters; %d streams of %d tokens, a burst of %d prompts of %d tokens\n",
              static_cast<double>(Shape().ParamCount()) / 1e6, load.streams, load.stream_tokens, load.burst,
              load.prompt_tokens);
  manta::serve::Engine engine(*w, {.slots = load.streams + load.burst, .max_len = max_len}, nullptr);
  const Gaps interleaved = Measure(&engine, load, static_cast<int>(Shape().vocab_size));
  const Gaps disaggregated = Disaggregated(*w, load, max_len);
  manta::bench::Report report;
  report.Add("interleaved_tbt_p50", interleaved.p50 * 1e3, "ms");
  report.Add("interleaved_tbt_p99", interleaved.p99 * 1e3, "ms");
  report.Add("disaggregated_tbt_p50", disaggregated.p50 * 1e3, "ms", interleaved.p50 * 1e3);
  report.Add("disaggregated_tbt_p99", disaggregated.p99 * 1e3, "ms", interleaved.p99 * 1e3);
  report.Print();
  std::printf("goal: disaggregated p99 time between tokens <= 0.5 x interleaved (%s)\n",
              disaggregated.p99 <= 0.5 * interleaved.p99 ? "met" : "not met");
  if (!json.empty()) {
    if (absl::Status s = report.WriteJson(json); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
