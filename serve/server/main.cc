// manta_serve: serves a trained checkpoint over HTTP, as JetStream's
// MaxText server does: on this host, or on a reserved multi-host slice.
//
//   build/bin/manta_serve --token_file=<session>/token -- train/kernels/configs/base.yml
//       load_parameters_path=/tmp/manta_train/fortunes/checkpoints/300 ici_tensor_parallelism=2
//       per_device_batch_size=4 max_prefill_predict_length=64 max_target_length=256
//
//   manta job submit -- build/bin/manta_serve --topology=4x4 --port=8000 -- train/kernels/configs/base.yml
//       load_parameters_path=... ici_tensor_parallelism=4 ...   (add --disaggregated for two slices)
//
// The model shape comes from the checkpoint. On one host the tensor-parallel
// ranks (ici_tensor_parallelism) run as threads of this process, one per
// chip. With --topology this process is the driver of a serving group: it
// reserves a whole slice and runs one process per host (the leader serves),
// recreating the group whenever one of them dies (serve/slice/).
// --weights=bfloat16 or int8 serves the same checkpoint with its
// projections converted at load (half or a quarter of the bytes a decode
// step reads).
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
#include "common/memory_release.h"
#include "common/metrics/metrics_server.h"
#include "common/token.h"
#include "manta/api.h"
#include "serve/engine/packed_matrix.h"
#include "serve/engine/tensor_group.h"
#include "serve/server/front_end.h"
#include "serve/slice/slice_driver.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/config.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to serve on.");
ABSL_FLAG(int, port, 8000, "HTTP port of /generate and /healthcheck; 0 picks a free one.");
ABSL_FLAG(std::string, auth, "token", "token: every request must carry the token; none: no check.");
ABSL_FLAG(std::string, token_file, "", "File holding the token (required unless --auth=none).");
ABSL_FLAG(std::string, ready_file, "", "Written (JSON: port, metrics_port, pid) once serving.");
ABSL_FLAG(std::string, topology, "", "Serve on a reserved slice of this topology (\"4x4\"), one process per host.");
ABSL_FLAG(std::string, accelerator_type, "TPU-V6E", "The slice's accelerator type (with --topology).");
ABSL_FLAG(bool, disaggregated, false,
          "With --topology: prefill on one slice and generate on another (two slices are reserved).");
ABSL_FLAG(int, transfer_backlog, 4, "Disaggregated: prefills waiting to move to the generate slice, at most.");
ABSL_FLAG(int, start_timeout_s, 120, "How long a slice's processes may take to start and join (with --topology).");
ABSL_FLAG(std::string, weights, "float32",
          "How the engines keep the projections, converted from the F32 checkpoint at load: float32, bfloat16 "
          "(half the bytes a decode step reads) or int8 (a quarter; one scale per output column).");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "manta_serve: error: %s\n", message.c_str());
  return 1;
}

// --weights, or why it is not a format.
absl::StatusOr<manta::serve::WeightFormat> WeightsFlag() {
  const std::string name = absl::GetFlag(FLAGS_weights);
  manta::serve::WeightFormat format;
  if (!manta::serve::ParseWeightFormat(name.c_str(), &format)) {
    return absl::InvalidArgumentError("--weights must be float32, bfloat16 or int8, got '" + name + "'");
  }
  return format;
}

// Whether this run serves on a slice: then Init comes first, since a
// worker process of the group runs main only up to it.
bool OnSlice(int argc, char** argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (std::string(argv[i]).rfind("--topology", 0) == 0) return true;
  }
  return false;
}

int ServeSlice(const std::vector<std::string>& args) {
  manta::serve::SliceServeOptions o;
  o.topology = absl::GetFlag(FLAGS_topology);
  o.accelerator_type = absl::GetFlag(FLAGS_accelerator_type);
  o.args = args;
  o.port = absl::GetFlag(FLAGS_port);
  o.start_timeout = absl::Seconds(absl::GetFlag(FLAGS_start_timeout_s));
  o.disaggregated = absl::GetFlag(FLAGS_disaggregated);
  o.transfer_backlog = absl::GetFlag(FLAGS_transfer_backlog);
  if (o.transfer_backlog < 1 || o.transfer_backlog > 1024) return Fail("--transfer_backlog must be 1-1024");
  absl::StatusOr<manta::serve::WeightFormat> weights = WeightsFlag();
  if (!weights.ok()) return Fail(std::string(weights.status().message()));
  o.weights = manta::serve::WeightFormatName(*weights);
  const std::string auth = absl::GetFlag(FLAGS_auth);
  if (auth != "token" && auth != "none") return Fail("--auth must be token or none");
  o.check_token = auth == "token";
  if (o.check_token && !absl::GetFlag(FLAGS_token_file).empty()) {
    absl::StatusOr<std::string> token = manta::LoadDaemonToken(auth, absl::GetFlag(FLAGS_token_file));
    if (!token.ok()) return Fail(std::string(token.status().message()));
    o.token = *token;
  }
  if (o.port <= 0 || o.port > 65535) return Fail("--port must name a port (1-65535) on a slice");
  // Refused here, before anything is reserved; the workers check the rest.
  absl::StatusOr<manta::train::Config> config = manta::train::LoadConfig(args);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (config->load_parameters_path.empty()) return Fail("config key 'load_parameters_path' must name a checkpoint");
  if (config->max_prefill_predict_length >= config->max_target_length) {
    return Fail("config key 'max_prefill_predict_length' must be below max_target_length");
  }
  const int status = manta::serve::ServeOnSlice(o);
  manta::Shutdown();
  return status;
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
  if (OnSlice(argc, argv)) {
    std::signal(SIGPIPE, SIG_IGN);
    if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) return Fail(std::string(s.message()));
  }
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (args.empty()) return Fail("give the base config and key=value overrides after --");
  if (!absl::GetFlag(FLAGS_topology).empty()) return ServeSlice(args);
  if (absl::GetFlag(FLAGS_disaggregated)) return Fail("--disaggregated serves on slices: give --topology too");
  absl::StatusOr<manta::serve::WeightFormat> weight_format = WeightsFlag();
  if (!weight_format.ok()) return Fail(std::string(weight_format.status().message()));
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
    return Fail(absl::StrCat(config->load_parameters_path,
                             " holds no tokenizer.json: serve a run trained with "
                             "dataset_type=text"));
  }
  const manta::train::Tokenizer tokenizer = *weights[0].tokenizer();
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  manta::serve::EngineOptions engine;
  engine.weights = *weight_format;
  engine.slots = static_cast<int>(std::max<double>(1, std::llround(config->per_device_batch_size * tensor)));
  engine.max_len = config->max_target_length;
  if (config->max_prefill_predict_length >= engine.max_len) {
    return Fail("config key 'max_prefill_predict_length' must be below max_target_length");
  }
  std::vector<const manta::serve::ServingWeights*> ranks;
  for (const auto& w : weights) ranks.push_back(&w);
  manta::serve::LocalTensorGroup group(ranks, engine);
  const int64_t step = weights[0].step();
  weights.clear();             // the engines hold their own packed copies
  manta::ReleaseFreeMemory();  // and what loading them took
  log->info("loaded {} (step {}) in {:.2f} s: {} tensor ranks, {} slots of {} tokens, {} weights",
            config->load_parameters_path, step, load_seconds, tensor, engine.slots, engine.max_len,
            manta::serve::WeightFormatName(engine.weights));
  log->info("Initializing the driver with 1 prefill engines and 1 generate engines in interleaved mode");

  manta::serve::FrontEndOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.token = *token;
  options.hostname = Hostname();
  options.load_seconds = load_seconds;
  auto front = manta::serve::FrontEnd::Start(&group, &tokenizer, *config, options);
  if (!front.ok()) return Fail(std::string(front.status().message()));
  log->info("serving on http://{}:{} (metrics: {})", options.host, (*front)->port(),
            (*front)->metrics_port() >= 0 ? absl::StrCat("port ", (*front)->metrics_port()) : std::string("off"));
  if (std::string ready = absl::GetFlag(FLAGS_ready_file); !ready.empty()) {
    const std::string text =
        absl::StrCat("{\"port\": ", (*front)->port(), ", \"metrics_port\": ", (*front)->metrics_port(),
                     ", \"pid\": ", getpid(), "}\n");
    if (absl::Status s = manta::train::WriteSmallFileAtomic(ready, text); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  log->info("stopping ({})", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*front)->Stop(absl::UnavailableError("the server is stopping"));
  return 0;
}
