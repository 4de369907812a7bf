// manta_serve: serves a trained checkpoint over HTTP on one host, as
// JetStream's MaxText server does.
//
//   build/bin/manta_serve --token_file=<session>/token -- train/kernels/configs/base.yml \
//       load_parameters_path=/tmp/manta_train/fortunes/checkpoints/300 ici_tensor_parallelism=2 \
//       per_device_batch_size=4 max_prefill_predict_length=64 max_target_length=256
//
// The model shape comes from the checkpoint; the tensor-parallel ranks
// (ici_tensor_parallelism) run as threads of this process, one per chip.
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics/metrics_server.h"
#include "common/token.h"
#include "serve/engine/tensor_group.h"
#include "serve/server/http_routes.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/config.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to serve on.");
ABSL_FLAG(int, port, 8000, "HTTP port of /generate and /healthcheck; 0 picks a free one.");
ABSL_FLAG(std::string, auth, "token", "token: every request must carry the token; none: no check.");
ABSL_FLAG(std::string, token_file, "", "File holding the token (required unless --auth=none).");
ABSL_FLAG(std::string, ready_file, "", "Written (JSON: port, metrics_port, pid) once serving.");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "manta_serve: error: %s\n", message.c_str());
  return 1;
}

std::string Hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "manta-serve";
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Serves a Manta checkpoint: manta_serve [flags] -- base.yml key=value ...");
  const auto start = std::chrono::steady_clock::now();
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::signal(SIGPIPE, SIG_IGN);
  // SIGTERM and SIGINT wait for sigwait at the end: blocked here, before any
  // thread starts, so none of them takes the signal.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto log = manta::Logger("serve");
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (args.empty()) return Fail("give the base config and key=value overrides after --");
  absl::StatusOr<manta::train::Config> config = manta::train::LoadConfig(args);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (config->load_parameters_path.empty()) return Fail("config key 'load_parameters_path' must name a checkpoint");
  if (config->parallelism.ici_tensor != -1 && config->parallelism.ici_tensor < 1) {
    return Fail("config key 'ici_tensor_parallelism' must be positive");
  }
  const int tensor = static_cast<int>(std::max<int64_t>(1, config->parallelism.ici_tensor));
  if (tensor > 64) return Fail("config key 'ici_tensor_parallelism': at most 64 ranks on one host");
  absl::StatusOr<std::string> token =
      manta::LoadDaemonToken(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(std::string(token.status().message()));
  if (token->empty()) {
    log->warn("--auth=none: anyone who can reach {}:{} can use this server", absl::GetFlag(FLAGS_host),
              absl::GetFlag(FLAGS_port));
  }

  // Weights, one copy per tensor rank.
  std::vector<manta::serve::ServingWeights> weights;
  for (int r = 0; r < tensor; ++r) {
    auto w = manta::serve::ServingWeights::Load(config->load_parameters_path, tensor, r);
    if (!w.ok()) return Fail(std::string(w.status().message()));
    weights.push_back(*std::move(w));
  }
  if (!weights[0].tokenizer()) {
    return Fail(absl::StrCat(config->load_parameters_path, " holds no tokenizer.json: serve a run trained with "
                             "dataset_type=text"));
  }
  const manta::train::Tokenizer& tokenizer = *weights[0].tokenizer();
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  manta::serve::EngineOptions engine;
  engine.slots = static_cast<int>(std::max<double>(1, std::llround(config->per_device_batch_size * tensor)));
  engine.max_len = config->max_target_length;
  if (config->max_prefill_predict_length >= engine.max_len) {
    return Fail("config key 'max_prefill_predict_length' must be below max_target_length");
  }
  std::vector<const manta::serve::ServingWeights*> ranks;
  for (const auto& w : weights) ranks.push_back(&w);
  manta::serve::LocalTensorGroup group(ranks, engine);
  log->info("loaded {} (step {}) in {:.2f} s: {} tensor ranks, {} slots of {} tokens",
            config->load_parameters_path, weights[0].step(), load_seconds, tensor, engine.slots, engine.max_len);
  log->info("Initializing the driver with 1 prefill engines and 1 generate engines in interleaved mode");

  manta::metrics::MetricsRegistry registry({{"id", Hostname()}});
  registry.AddGauge("jetstream_model_load_time", "Total time taken to load the model", {})->Set({}, load_seconds);
  manta::serve::ServingLoop loop(&group, &tokenizer, &registry, {.hostname = Hostname()});
  loop.Start();

  manta::http::HttpLimits limits;
  manta::http::GatedHttpServer http(limits);
  http.set_payload_max_length(8 << 20);
  manta::serve::RouteOptions routes;
  routes.token = *token;
  routes.max_prompt_tokens = config->max_prefill_predict_length;
  routes.default_max_tokens = engine.max_len - config->max_prefill_predict_length;
  manta::serve::InstallRoutes(&http, &loop, &tokenizer, routes);
  if (absl::Status s = http.Bind(absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port)); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::unique_ptr<manta::metrics::MetricsServer> metrics;
  if (config->prometheus_port >= 0) {
    auto m = manta::metrics::MetricsServer::Start(
        {.host = absl::GetFlag(FLAGS_host), .port = static_cast<int>(config->prometheus_port), .token = *token},
        &registry);
    if (!m.ok()) return Fail(std::string(m.status().message()));
    metrics = *std::move(m);
  }
  registry.AddGauge("jetstream_server_startup_latency", "Total time taken to start the Jetstream server", {})
      ->Set({}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  http.Serve();
  log->info("serving on http://{}:{} (metrics: {})", absl::GetFlag(FLAGS_host), http.bound_port(),
            metrics ? absl::StrCat("port ", metrics->port()) : std::string("off"));
  if (std::string ready = absl::GetFlag(FLAGS_ready_file); !ready.empty()) {
    const std::string text = absl::StrCat("{\"port\": ", http.bound_port(), ", \"metrics_port\": ",
                                          metrics ? metrics->port() : -1, ", \"pid\": ", getpid(), "}\n");
    if (absl::Status s = manta::train::WriteSmallFileAtomic(ready, text); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  log->info("stopping ({})", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  http.StopServing();
  loop.Stop(absl::UnavailableError("the server is stopping"));
  if (metrics) metrics->Stop();
  return 0;
}
