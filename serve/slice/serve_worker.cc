#include "serve/slice/serve_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/memory_release.h"
#include "common/token.h"
#include "manta/api.h"
#include "manta/state.h"
#include "serve/engine/group_engine.h"
#include "serve/engine/packed_matrix.h"
#include "serve/server/front_end.h"
#include "serve/slice/current_group.h"
#include "train/kernels/communicator.h"
#include "train/kernels/rendezvous.h"
#include "train/try_call.h"

namespace manta::serve {
namespace {

ServeRunResult Refused(const absl::Status& s) { return {true, std::string(s.message())}; }
ServeRunResult Broke(const absl::Status& s) { return {false, s.ToString()}; }

// The cluster's token, as the raylet gave it to this worker.
absl::StatusOr<std::string> ClusterToken() {
  if (const char* t = std::getenv("MANTA_TOKEN"); t != nullptr && *t != '\0') return std::string(t);
  if (const char* f = std::getenv("MANTA_TOKEN_FILE"); f != nullptr && *f != '\0') return ReadTokenFile(f);
  return absl::InvalidArgumentError("the cluster runs without a token: serve with --auth=none to say so");
}

// How long a prompt waits for this process's group to form.
constexpr absl::Duration kGroupFormingWait = absl::Seconds(60);

// The group this process serves in now: Submit calls reach it.
CurrentGroup& TheCurrent() {
  static CurrentGroup* c = new CurrentGroup();
  return *c;
}

// This process's place: its mesh (the tensor axis inside each slice, the
// data axis across the two slices of a disaggregated group).
absl::StatusOr<train::Mesh> PlaceOf(const ServeRunRequest& req, int tensor, const std::string& node_ip,
                                    train::DistributedEnv* env) {
  const int slices = req.disaggregated ? 2 : 1;
  const int per_slice = req.num_processes / slices;
  if (req.num_processes < slices || req.num_processes % slices != 0 || tensor % per_slice != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ici_tensor_parallelism ", tensor, " must be a multiple of the ",
                                                   per_slice, " hosts of the slice"));
  }
  env->coordinator_address = req.coordinator;
  env->host_address = node_ip;
  env->process_id = req.process_id;
  env->num_processes = req.num_processes;
  env->num_slices = slices;
  env->slice_id = req.process_id / per_slice;
  env->chips_per_host = tensor / per_slice;
  train::ParallelismConfig par;
  par.dcn_data = slices;
  par.ici_fsdp = 1;
  par.ici_tensor = tensor;
  return train::Mesh::Create(par, *env);
}

// The leader's face: HTTP, the serving loop, the metrics.
// `tokenizer` must outlive the front.
absl::StatusOr<std::unique_ptr<FrontEnd>> StartFront(const ServeRunRequest& req, const train::Config& config,
                                                     GroupEngine* group,
                                                     const std::optional<train::Tokenizer>& tokenizer,
                                                     const std::string& node_ip, double load_seconds) {
  auto log = Logger("serve");
  if (!tokenizer) {
    return absl::InvalidArgumentError(absl::StrCat(config.load_parameters_path,
                                                   " holds no tokenizer.json: serve a run trained with "
                                                   "dataset_type=text"));
  }
  log->info("Initializing the driver with 1 prefill engines and 1 generate engines in {} mode",
            req.disaggregated ? "disaggregated" : "interleaved");
  FrontEndOptions options;
  options.host = node_ip;
  options.port = req.http_port;
  if (req.check_token) {
    absl::StatusOr<std::string> token = req.token.empty() ? ClusterToken() : req.token;
    if (!token.ok()) return token.status();
    options.token = *token;
  }
  options.hostname = node_ip;
  options.load_seconds = load_seconds;
  options.restarts = req.restarts;
  if (req.disaggregated) {
    options.transfer_backlog = [group] { return group->transfer_backlog(); };
    // Every tensor rank moves an equal share (its KV heads): the group's
    // total is this process's times the processes of the slice.
    const int64_t shares = req.num_processes / 2;
    options.kv_bytes_moved = [group, shares] { return group->kv_bytes_moved() * shares; };
    log->info("Spinning up generate thread 0.");
    log->info("Spinning up detokenize thread 0.");
  }
  return FrontEnd::Start(group->leader(), &*tokenizer, config, options);
}

}  // namespace

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

absl::Status ServeWorker::Submit(int64_t id, std::vector<int32_t> prompt, float temperature, int top_k, uint64_t seed) {
  return TheCurrent().With(kGroupFormingWait, [&](GroupEngine* group) {
    return group->EnqueuePrefill(id, prompt, SamplingParams{temperature, top_k, seed});
  });
}

ServeRunResult ServeWorker::Run(ServeRunRequest req) {
  auto log = Logger("serve");
  const auto start = absl::Now();
  absl::StatusOr<train::Config> config = train::LoadConfig(req.args);
  if (!config.ok()) return Refused(config.status());
  EngineOptions engine;
  if (!ParseWeightFormat(req.weights.c_str(), &engine.weights)) {
    return Refused(absl::InvalidArgumentError(absl::StrCat("no weight format '", req.weights, "'")));
  }
  const int tensor = static_cast<int>(std::max<int64_t>(1, config->parallelism.ici_tensor));
  const RuntimeContext here = GetRuntimeContext();
  train::DistributedEnv env;
  absl::StatusOr<train::Mesh> mesh = PlaceOf(req, tensor, here.node_ip, &env);
  if (!mesh.ok()) return Refused(mesh.status());
  // This process's tensor ranks: its chips' shards, resharded from however
  // the trainer wrote the checkpoint.
  std::vector<ServingWeights> weights;
  for (int c = 0; c < env.chips_per_host; ++c) {
    auto w = ServingWeights::Load(config->load_parameters_path, tensor, (env.first_device() + c) % tensor);
    if (!w.ok()) return Refused(w.status());
    weights.push_back(*std::move(w));
  }
  std::vector<const ServingWeights*> mine;
  for (const auto& w : weights) mine.push_back(&w);
  auto comm = train::Communicator::Create(*mesh, env, absl::Milliseconds(req.join_timeout_ms));
  if (!comm.ok()) return Broke(comm.status());
  const bool prefill = req.disaggregated && env.slice_id == 0;
  GroupRole role;
  role.kind = !req.disaggregated ? GroupRole::kInterleaved : prefill ? GroupRole::kPrefill : GroupRole::kGenerate;
  role.transfer_backlog = req.transfer_backlog;
  // Prompts go to the prefill leader as actor calls; their answers are the
  // K/V's arrival, so a call is only looked at again when it failed.
  auto submits = std::make_shared<std::deque<ObjectRef<void>>>();
  ActorHandle<ServeWorker> prefill_leader = req.prefill_leader;
  role.send_prompt = [prefill_leader, submits](int64_t id, const std::vector<int32_t>& prompt,
                                               const SamplingParams& sampling) {
    while (!submits->empty()) {
      absl::Status s = TryGet(submits->front(), absl::ZeroDuration());
      if (s.code() == absl::StatusCode::kDeadlineExceeded) break;  // not answered yet
      if (!s.ok()) return absl::UnavailableError(absl::StrCat("handing a prompt to prefill: ", s.message()));
      submits->pop_front();
    }
    return train::TryCall([&] {
      submits->push_back(prefill_leader.Task(&ServeWorker::Submit)
                             .Remote(id, prompt, sampling.temperature, sampling.top_k, sampling.seed));
    });
  };
  engine.slots =
      prefill ? 1 : static_cast<int>(std::max<double>(1, std::llround(config->per_device_batch_size * tensor)));
  engine.max_len = config->max_target_length;
  GroupEngine group(comm->get(), env.first_device(), mine, engine, role);
  const std::optional<train::Tokenizer> tokenizer = weights[0].tokenizer();
  weights.clear();      // the engines hold their own packed copies
  ReleaseFreeMemory();  // and what loading them took
  TheCurrent().Set(&group);
  log->info("process {} of {} of the serving group: tensor ranks {}..{} of {}{}, {} weights, joined in {:.2f} s",
            req.process_id, req.num_processes, env.first_device() % tensor,
            (env.first_device() + env.chips_per_host - 1) % tensor, tensor,
            !req.disaggregated ? ""
            : prefill          ? " (prefill)"
                               : " (generate)",
            WeightFormatName(engine.weights), absl::ToDoubleSeconds(absl::Now() - start));
  std::unique_ptr<FrontEnd> front;
  absl::Status failed;
  if (group.leader() != nullptr && !prefill) {
    auto started =
        StartFront(req, *config, &group, tokenizer, here.node_ip, absl::ToDoubleSeconds(absl::Now() - start));
    if (started.ok()) {
      front = *std::move(started);
      log->info("serving on http://{}:{} (metrics: {}), {} slots of {} tokens", here.node_ip, front->port(),
                front->metrics_port() >= 0 ? absl::StrCat("port ", front->metrics_port()) : std::string("off"),
                engine.slots, engine.max_len);
    } else {
      failed = started.status();
    }
  } else if (group.leader() != nullptr) {
    log->info("Spinning up prefill thread 0.");
    log->info("Spinning up transfer thread 0.");
  }
  absl::Status why = failed.ok() ? group.Wait() : failed;
  if (why.ok()) why = absl::UnavailableError("the leader stopped the serving group");
  if (front) front->Stop(absl::UnavailableError(absl::StrCat("the serving group failed: ", why.message())));
  TheCurrent().Clear();
  log->warn("the serving group ended: {}", why.ToString());
  return failed.code() == absl::StatusCode::kInvalidArgument ? Refused(failed) : Broke(why);
}

}  // namespace manta::serve
