#include "serve/slice/serve_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/token.h"
#include "manta/api.h"
#include "manta/state.h"
#include "serve/engine/group_engine.h"
#include "serve/server/front_end.h"
#include "train/kernels/communicator.h"
#include "train/kernels/rendezvous.h"

namespace manta::serve {

ServeWorker* ServeWorker::Create() { return new ServeWorker(); }

ServeWorkerInfo ServeWorker::Setup() {
  RuntimeContext here = GetRuntimeContext();
  ServeWorkerInfo info;
  info.pid = here.pid;
  info.node_id = here.node_id;
  info.node_ip = here.node_ip;
  info.free_port = train::PickCoordinatorPort().value_or(0);
  return info;
}

namespace {

ServeRunResult Refused(const absl::Status& s) { return {true, std::string(s.message())}; }
ServeRunResult Broke(const absl::Status& s) { return {false, s.ToString()}; }

// The cluster's token, as the raylet gave it to this worker.
absl::StatusOr<std::string> ClusterToken() {
  if (const char* t = std::getenv("MANTA_TOKEN"); t != nullptr && *t != '\0') return std::string(t);
  if (const char* f = std::getenv("MANTA_TOKEN_FILE"); f != nullptr && *f != '\0') return ReadTokenFile(f);
  return absl::InvalidArgumentError("the cluster runs without a token: serve with --auth=none to say so");
}

}  // namespace

ServeRunResult ServeWorker::Run(ServeRunRequest req) {
  auto log = Logger("serve");
  const auto start = absl::Now();
  absl::StatusOr<train::Config> config = train::LoadConfig(req.args);
  if (!config.ok()) return Refused(config.status());
  const int tensor = static_cast<int>(std::max<int64_t>(1, config->parallelism.ici_tensor));
  if (req.num_processes < 1 || tensor % req.num_processes != 0) {
    return Refused(absl::InvalidArgumentError(absl::StrCat("ici_tensor_parallelism ", tensor,
                                                           " must be a multiple of the ", req.num_processes,
                                                           " hosts of the slice")));
  }
  const RuntimeContext here = GetRuntimeContext();
  train::DistributedEnv env;
  env.coordinator_address = req.coordinator;
  env.host_address = here.node_ip;
  env.process_id = req.process_id;
  env.num_processes = req.num_processes;
  env.chips_per_host = tensor / req.num_processes;
  train::ParallelismConfig par;
  par.dcn_data = 1;
  par.ici_fsdp = 1;
  par.ici_tensor = tensor;
  absl::StatusOr<train::Mesh> mesh = train::Mesh::Create(par, env);
  if (!mesh.ok()) return Refused(mesh.status());
  // This process's tensor ranks: its chips' shards, resharded from however
  // the trainer wrote the checkpoint.
  std::vector<ServingWeights> weights;
  for (int c = 0; c < env.chips_per_host; ++c) {
    auto w = ServingWeights::Load(config->load_parameters_path, tensor, env.first_device() + c);
    if (!w.ok()) return Refused(w.status());
    weights.push_back(*std::move(w));
  }
  std::vector<const ServingWeights*> mine;
  for (const auto& w : weights) mine.push_back(&w);
  auto comm = train::Communicator::Create(*mesh, env, absl::Milliseconds(req.join_timeout_ms));
  if (!comm.ok()) return Broke(comm.status());
  EngineOptions engine;
  engine.slots = static_cast<int>(std::max<double>(1, std::llround(config->per_device_batch_size * tensor)));
  engine.max_len = config->max_target_length;
  GroupEngine group(comm->get(), env.first_device(), mine, engine);
  log->info("process {} of {} of the serving group: tensor ranks {}..{} of {}, joined in {:.2f} s", req.process_id,
            req.num_processes, env.first_device(), env.first_device() + env.chips_per_host - 1, tensor,
            absl::ToDoubleSeconds(absl::Now() - start));

  std::unique_ptr<FrontEnd> front;
  if (group.leader() != nullptr) {
    if (!weights[0].tokenizer()) {
      return Refused(absl::InvalidArgumentError(absl::StrCat(
          config->load_parameters_path, " holds no tokenizer.json: serve a run trained with dataset_type=text")));
    }
    log->info("Initializing the driver with 1 prefill engines and 1 generate engines in interleaved mode");
    FrontEndOptions options;
    options.host = here.node_ip;
    options.port = req.http_port;
    if (req.check_token) {
      absl::StatusOr<std::string> token = req.token.empty() ? ClusterToken() : req.token;
      if (!token.ok()) return Refused(token.status());
      options.token = *token;
    }
    options.hostname = here.node_ip;
    options.load_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    options.restarts = req.restarts;
    auto started = FrontEnd::Start(group.leader(), &*weights[0].tokenizer(), *config, options);
    if (!started.ok()) return Broke(started.status());
    front = *std::move(started);
    log->info("serving on http://{}:{} (metrics: {}), {} slots of {} tokens", here.node_ip, front->port(),
              front->metrics_port() >= 0 ? absl::StrCat("port ", front->metrics_port()) : std::string("off"),
              engine.slots, engine.max_len);
  }
  absl::Status why = group.Wait();
  if (why.ok()) why = absl::UnavailableError("the leader stopped the serving group");
  if (front) front->Stop(absl::UnavailableError(absl::StrCat("the serving group failed: ", why.message())));
  log->warn("the serving group ended: {}", why.ToString());
  return Broke(why);
}

}  // namespace manta::serve
