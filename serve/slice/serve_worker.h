// ServeWorker: the actor that runs one process of a serving group on a
// reserved slice, one per host, as LeaderWorkerSet starts a leader and its
// workers. The driver creates one per host, asks each for Setup, then calls
// Run on all with each one's index and the leader's address: every process
// loads its tensor ranks' shards of the checkpoint and joins the group; the
// leader (index 0) also serves HTTP. Run returns only when the group breaks
// (a process died): the driver then recreates the whole group.
//
// Disaggregated, the group spans two slices: slice 0's processes prefill,
// slice 1's generate, and slice 1's leader serves HTTP; it hands each
// prompt to slice 0's leader with Submit, and the K/V come back over the
// mesh's data axis (GroupEngine). Internal to serve/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "manta/actor.h"
#include "manta/serialization.h"

namespace manta::serve {

class ServeWorker;

// A worker's answer to Setup.
struct ServeWorkerInfo {
  int pid = 0;
  std::string node_id;  // hex
  std::string node_ip;
  int free_port = 0;  // free on its host now (the leader's is the group's coordinator)
  MSGPACK_DEFINE(pid, node_id, node_ip, free_port);
};

// What one process of the group runs.
struct ServeRunRequest {
  int process_id = 0;
  int num_processes = 1;
  std::string coordinator;        // the leader's host:port
  std::vector<std::string> args;  // base.yml and key=value overrides
  int http_port = 8000;           // the leader's
  bool check_token = true;        // false: --auth=none
  std::string token;              // empty: the cluster's (this worker's MANTA_TOKEN)
  int64_t restarts = 0;           // times the group was recreated before
  int64_t join_timeout_ms = 120000;
  // Disaggregated: two slices (num_processes covers both); the prefill
  // leader (process 0), whom the generate leader hands prompts to.
  bool disaggregated = false;
  int transfer_backlog = 4;
  ActorHandle<ServeWorker> prefill_leader;
  std::string weights = "float32";  // the engines' weight format (packed_matrix.h's names)
  MSGPACK_DEFINE(process_id, num_processes, coordinator, args, http_port, check_token, token, restarts, join_timeout_ms,
                 disaggregated, transfer_backlog, prefill_leader, weights);
};

// How a process's Run ended (a process that dies ends it with an error
// instead).
struct ServeRunResult {
  bool refused = false;  // the config or the checkpoint cannot be served: recreating will not help
  std::string why;
  MSGPACK_DEFINE(refused, why);
};

class ServeWorker {
 public:
  static ServeWorker* Create();
  ServeWorkerInfo Setup();
  // Serves until the group breaks or stops; why.
  ServeRunResult Run(ServeRunRequest request);
  // Prefill leader: queues a prompt of the generate leader's request `id`,
  // and how to draw its first token.
  absl::Status Submit(int64_t id, std::vector<int32_t> prompt, float temperature, int top_k, uint64_t seed);
};

}  // namespace manta::serve
