// bench_serving: manta_serve under a benchmark_serving-style load, and
// llama.cpp on the same weights (the GGUF export) and threads in the same run.
//
//   build/bin/bench_serving --checkpoint=/tmp/ft/fortunes/checkpoints/400 --json out.json
//   build/bin/bench_serving --model=115m --json out.json   # makes (once) its own checkpoint
//   build/bin/bench_serving --model=115m --weights=int8     # against llama.cpp's Q8_0
//
// Each side decodes max_tokens for every request, past end-of-text (a model
// trained a step or two often ends a prompt within a few tokens).
//
// Manta, over HTTP with streaming (one SSE event per token):
//   * single-stream decode rate: one request at a time, tokens after the
//     first per second (median of 3);
//   * output tokens/s with --concurrency requests at once;
//   * --prompts requests arriving as a Poisson process at --rate per second:
//     throughput, TTFT, TPOT and latency (mean, p50, p99).
// The peer (bench/serving/llama_peer_bench.mjs): llama.cpp's single-stream
// decode rate and its rate with --concurrency sequences in one context.
// Ratios: Manta / llama.cpp, and Manta's concurrent rate / its own single.
// Bandwidth: the bytes of weights a decode step reads times the single-stream
// rate, beside this machine's streaming read of as many bytes in this run.
//
// --weights=bfloat16 or int8 serves the projections in that format
// (manta_serve --weights) and gives the peer the same checkpoint exported
// as BF16 or Q8_0 (llama.cpp's 8-bit format: blocks of 32 with an fp16
// scale); float32 (the default) exports F32.
//
// --model=17m or 115m trains one step of that shape on --dataset (Debian's
// fortunes by default) into --work_dir, unless a checkpoint is already there:
// the weights' values do not matter to the figures, their size does.
#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/common/report.h"
#include "common/process.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "serve/engine/packed_matrix.h"
#include "serve/export/gguf.h"
#include "train/kernels/buffer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Timing {
  double ttft = 0, tpot = 0, latency = 0;
  int tokens = 0;
  bool ok = false;
};

// One streamed request: the time of its first token, per later token, in all.
Timing Stream(int port, const std::string& prompt, int max_tokens) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/generate";
  req.body =
      nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", true}, {"ignore_eos", true}}.dump();
  req.set_header("Content-Type", "application/json");
  const Clock::time_point start = Clock::now();
  Clock::time_point first, last;
  Timing t;
  std::string pending;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    size_t at;
    while ((at = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, at);
      pending.erase(0, at + 2);
      if (event.rfind("data: {\"response\"", 0) != 0) continue;
      last = Clock::now();
      if (t.tokens++ == 0) first = last;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error;
  t.ok = client.send(req, res, error) && res.status == 200 && t.tokens > 0;
  if (!t.ok) return t;
  t.ttft = Seconds(start, first);
  t.latency = Seconds(start, last);
  t.tpot = t.tokens > 1 ? Seconds(first, last) / (t.tokens - 1) : 0;
  return t;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Requests of `prompts` at once; output tokens per second over the whole.
double Concurrent(int port, const std::vector<std::string>& prompts, int max_tokens) {
  std::vector<Timing> out(prompts.size());
  std::vector<std::thread> clients;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { out[i] = Stream(port, prompts[i], max_tokens); });
  }
  for (std::thread& c : clients) c.join();
  int tokens = 0;
  for (const Timing& t : out) tokens += t.tokens;
  return tokens / Seconds(start, Clock::now());
}

// Bytes of weights one decode step reads: every projection and the output
// head as the engine packs them in `format`, and one F32 embedding row.
double WeightBytesPerStep(const manta::train::ModelShape& m, manta::serve::WeightFormat format) {
  using manta::serve::PackedMatrix;
  const int64_t qw = m.num_query_heads * m.head_dim, kvw = m.num_kv_heads * m.head_dim, d = m.emb_dim;
  double layer = 0;
  for (const auto& [k, n] : std::initializer_list<std::pair<int64_t, int64_t>>{
           {d, qw}, {d, kvw}, {d, kvw}, {qw, d}, {d, m.mlp_dim}, {d, m.mlp_dim}, {m.mlp_dim, d}}) {
    layer += static_cast<double>(PackedMatrix::Layout(k, n, format).bytes);
  }
  return m.num_layers * layer + static_cast<double>(PackedMatrix::Layout(d, m.vocab_size, format).bytes) + 4.0 * d;
}

// The peer's export of the same weights for each of Manta's formats.
manta::serve::GgufType PeerType(manta::serve::WeightFormat format) {
  switch (format) {
    case manta::serve::WeightFormat::kBf16:
      return manta::serve::GgufType::kBf16;
    case manta::serve::WeightFormat::kInt8:
      return manta::serve::GgufType::kQ8_0;
    case manta::serve::WeightFormat::kF32:
      break;
  }
  return manta::serve::GgufType::kF32;
}

// This machine's streaming read, bytes per second: the best of 5 passes over
// `bytes` (2 MiB pages, touched once before), SSE2 sums.
double StreamReadBytesPerSecond(double bytes) {
  manta::train::FloatBuffer buf(static_cast<size_t>(bytes / 4) / 64 * 64, 1.0f);
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const Clock::time_point start = Clock::now();
    __m128 acc[8];
    for (__m128& a : acc) a = _mm_setzero_ps();
    for (size_t i = 0; i < buf.size(); i += 32) {
      for (int j = 0; j < 8; ++j) acc[j] = _mm_add_ps(acc[j], _mm_load_ps(&buf[i + 4 * j]));
    }
    for (int j = 1; j < 8; ++j) acc[0] = _mm_add_ps(acc[0], acc[j]);
    asm volatile("" : : "x"(acc[0]));  // the sum is used: the loop stays
    best = std::max(best, 4.0 * buf.size() / Seconds(start, Clock::now()));
  }
  return best;
}

// The checkpoint of --model: made by one training step, or found from an earlier run.
absl::StatusOr<std::string> ModelCheckpoint(const std::string& model, const std::string& work_dir,
                                            const std::string& dataset, const std::string& bin_dir) {
  std::vector<std::string> shape;
  if (model == "17m") {
    shape = {"base_emb_dim=512", "base_num_query_heads=8", "base_num_kv_heads=4", "base_mlp_dim=2048",
             "base_num_decoder_layers=4"};
  } else if (model == "115m") {
    shape = {"base_emb_dim=768", "base_num_query_heads=12", "base_num_kv_heads=12", "base_mlp_dim=3072",
             "base_num_decoder_layers=12"};
  } else {
    return absl::InvalidArgumentError("--model must be 17m or 115m, got " + model);
  }
  const std::string run = "bench" + model, step_dir = work_dir + "/" + run + "/checkpoints/1";
  if (std::filesystem::exists(step_dir + "/manifest.json")) return step_dir;
  manta::SpawnOptions train;
  train.executable = bin_dir + "/manta_train";
  train.args = {"--",
                std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml",
                "dataset_type=text",
                "dataset_path=" + dataset,
                "run_name=" + run,
                "base_output_directory=" + work_dir,
                "steps=1",
                "per_device_batch_size=1",
                "enable_checkpointing=true",
                "checkpoint_period=1"};
  train.args.insert(train.args.end(), shape.begin(), shape.end());
  std::fprintf(stderr, "bench_serving: training one step of the %s model into %s\n", model.c_str(), work_dir.c_str());
  absl::StatusOr<manta::CommandResult> r = manta::RunAndCapture(train, absl::Minutes(20));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError("manta_train failed: " + r->err);
  return step_dir;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"manta_serve against llama.cpp on the same weights"};
  std::string checkpoint, json, bin_dir = std::getenv("MANTA_BIN_DIR") ? std::getenv("MANTA_BIN_DIR") : "build/bin";
  int prompts_n = 64, max_tokens = 128, concurrency = 16, threads = 1;
  double rate = 4;
  std::string model, work_dir = "/tmp/manta_bench_serving", dataset = "/usr/share/games/fortunes";
  std::string weights_name = "float32";
  app.add_option("--checkpoint", checkpoint, "A checkpoint step folder of a text run");
  app.add_option("--model", model, "Instead of --checkpoint: 17m or 115m, trained for one step here");
  app.add_option("--work_dir", work_dir, "Where --model keeps its checkpoint between runs");
  app.add_option("--dataset", dataset, "The text --model trains its tokenizer on");
  app.add_option("--json", json, "Write the figures here");
  app.add_option("--prompts", prompts_n, "Requests of the Poisson run");
  app.add_option("--rate", rate, "Their arrival rate per second");
  app.add_option("--max_tokens", max_tokens, "Output tokens per request");
  app.add_option("--concurrency", concurrency, "Requests at once for the concurrent rate");
  app.add_option("--threads", threads, "Compute threads of each side");
  app.add_option("--weights", weights_name,
                 "Manta's weights: float32, bfloat16 or int8 (the peer's: F32, BF16 or Q8_0)");
  CLI11_PARSE(app, argc, argv);
  manta::serve::WeightFormat format;
  if (!manta::serve::ParseWeightFormat(weights_name.c_str(), &format)) {
    std::fprintf(stderr, "bench_serving: --weights must be float32, bfloat16 or int8, got '%s'\n",
                 weights_name.c_str());
    return 1;
  }
  if (checkpoint.empty() == model.empty()) {
    std::fprintf(stderr, "bench_serving: give --checkpoint or --model\n");
    return 1;
  }
  if (!model.empty()) {
    absl::StatusOr<std::string> made = ModelCheckpoint(model, work_dir, dataset, bin_dir);
    if (!made.ok()) {
      std::fprintf(stderr, "bench_serving: %s\n", std::string(made.status().message()).c_str());
      return 1;
    }
    checkpoint = *made;
  }

  absl::StatusOr<manta::serve::ServingWeights> w = manta::serve::ServingWeights::Load(checkpoint, 1, 0);
  if (!w.ok() || !w->tokenizer()) {
    std::fprintf(stderr, "bench_serving: %s\n", w.ok() ? "no tokenizer" : std::string(w.status().message()).c_str());
    return 1;
  }
  char tmpl[] = "/tmp/bench_serving_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string gguf = dir + "/model.gguf";
  if (absl::Status s = manta::serve::WriteGguf(*w, gguf, "bench", 4096, PeerType(format)); !s.ok()) {
    std::fprintf(stderr, "bench_serving: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double weight_bytes = WeightBytesPerStep(w->shape(), format);
  const double stream_bytes_per_s = StreamReadBytesPerSecond(weight_bytes);
  const std::string prompt = "What are the top 5 programming languages";
  const std::vector<int32_t> prompt_ids = w->tokenizer()->Encode(prompt);

  // Manta: the server on `threads` BLAS threads, `concurrency` slots.
  manta::SpawnOptions serve;
  serve.executable = bin_dir + "/manta_serve";
  const std::string ready = dir + "/ready";
  serve.args = {"--auth=none",
                "--port=0",
                "--ready_file=" + ready,
                "--weights=" + weights_name,
                "--",
                std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml",
                "load_parameters_path=" + checkpoint,
                absl::StrCat("per_device_batch_size=", concurrency),
                "max_prefill_predict_length=64",
                absl::StrCat("max_target_length=", 64 + max_tokens)};
  serve.env = {{"OPENBLAS_NUM_THREADS", std::to_string(threads)}};
  serve.log_file = dir + "/serve.log";
  serve.kill_with_parent = true;
  absl::StatusOr<pid_t> pid = manta::SpawnDaemon(serve);
  absl::StatusOr<std::string> ready_text =
      pid.ok() ? manta::WaitForFile(ready, absl::Now() + absl::Seconds(60), *pid, serve.log_file) : pid.status();
  if (!ready_text.ok()) {
    std::fprintf(stderr, "bench_serving: manta_serve: %s\n", std::string(ready_text.status().message()).c_str());
    return 1;
  }
  const int port = nlohmann::json::parse(*ready_text)["port"].get<int>();
  const bool healthy = manta::PollUntil(
      [port] {
        httplib::Result r = httplib::Client("127.0.0.1", port).Get("/healthcheck");
        return r && r->status == 200;
      },
      absl::Now() + absl::Seconds(60));
  if (!healthy) {
    std::fprintf(stderr, "bench_serving: manta_serve never became healthy (see %s)\n", serve.log_file.c_str());
    return 1;
  }

  std::vector<double> singles;
  for (int i = 0; i < 3; ++i) singles.push_back(1 / Stream(port, prompt, max_tokens).tpot);
  const double single = Percentile(singles, 0.5);
  const double concurrent = Concurrent(port, std::vector<std::string>(concurrency, prompt), max_tokens);

  std::mt19937_64 rng(1);
  std::exponential_distribution<double> gap(rate);
  std::vector<Timing> poisson(prompts_n);
  std::vector<std::thread> clients;
  const Clock::time_point start = Clock::now();
  double at = 0;
  for (int i = 0; i < prompts_n; ++i) {
    at += gap(rng);
    const std::string p = absl::StrCat(prompt, " ", i);
    clients.emplace_back([&, i, at, p] {
      const auto offset = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
      std::this_thread::sleep_until(start + offset);
      poisson[i] = Stream(port, p, max_tokens);
    });
  }
  for (std::thread& c : clients) c.join();
  const double wall = Seconds(start, Clock::now());
  manta::TerminateProcess(*pid, absl::Now() + absl::Seconds(10)).IgnoreError();
  std::vector<double> ttft, tpot, latency;
  int tokens = 0, failed = 0;
  for (const Timing& t : poisson) {
    if (!t.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(t.ttft);
    tpot.push_back(t.tpot);
    latency.push_back(t.latency);
    tokens += t.tokens;
  }

  // The peer.
  std::string ids = "[";
  for (size_t i = 0; i < prompt_ids.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt_ids[i]);
  ids += "]";
  manta::SpawnOptions node;
  node.executable = "/usr/bin/node";
  node.args = {std::string(MANTA_SOURCE_DIR) + "/bench/serving/llama_peer_bench.mjs",
               gguf,
               ids,
               std::to_string(max_tokens),
               std::to_string(concurrency),
               std::to_string(threads)};
  const char* tools = std::getenv("MANTA_NODE_TOOLS");
  node.env = {
      {"NODE_LLAMA_CPP", (tools ? std::string(tools) : std::string(std::getenv("HOME")) + "/.cache/manta/node_tools") +
                             "/node_modules/node-llama-cpp"}};
  absl::StatusOr<manta::CommandResult> peer = manta::RunAndCapture(node, absl::Minutes(10));
  if (!peer.ok() || peer->exit_code != 0) {
    std::fprintf(stderr, "bench_serving: llama.cpp peer failed: %s\n", peer.ok() ? peer->err.c_str() : "not started");
    return 1;
  }
  const nlohmann::json p = nlohmann::json::parse(peer->out.substr(0, peer->out.find('\n')));
  const double peer_single = p["single_tokens_per_s"].get<double>();
  const double peer_concurrent = p["concurrent_tokens_per_s"].get<double>();
  std::filesystem::remove_all(dir);

  std::printf("manta_serve with %s weights against llama.cpp on the %s export, %d thread(s)\n", weights_name.c_str(),
              manta::serve::GgufTypeName(PeerType(format)), threads);
  manta::bench::Report report;
  report.Add("single_stream_decode_tokens_per_s", single, "tokens/s", peer_single);
  report.Add("concurrent_output_tokens_per_s", concurrent, "tokens/s", peer_concurrent);
  report.Add("concurrent_over_own_single", concurrent / single, "x");
  report.Add("weights_per_step_mb", weight_bytes / 1e6, "MB");
  report.Add("single_stream_weights_read_gb_per_s", weight_bytes * single / 1e9, "GB/s", stream_bytes_per_s / 1e9);
  report.Add("machine_stream_read_gb_per_s", stream_bytes_per_s / 1e9, "GB/s");
  report.Add("poisson_requests_per_s", (prompts_n - failed) / wall, "req/s");
  report.Add("poisson_output_tokens_per_s", tokens / wall, "tokens/s");
  report.Add("poisson_failed_requests", failed, "requests");
  report.Add("poisson_output_tokens_per_request", prompts_n > failed ? tokens / double(prompts_n - failed) : 0,
             "tokens");
  for (const auto& [name, values] : {std::pair{"ttft", &ttft}, {"tpot", &tpot}, {"latency", &latency}}) {
    report.Add(absl::StrCat(name, "_mean_ms"), 1000 * Mean(*values), "ms");
    report.Add(absl::StrCat(name, "_p50_ms"), 1000 * Percentile(*values, 0.5), "ms");
    report.Add(absl::StrCat(name, "_p99_ms"), 1000 * Percentile(*values, 0.99), "ms");
  }
  report.Print();
  if (!json.empty()) {
    if (absl::Status s = report.WriteJson(json); !s.ok()) return 1;
  }
  return 0;
}
