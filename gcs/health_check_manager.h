// HealthCheckManager: decides when a node is dead.
//
// Three signals feed it. Routine checks go to every node each `period`, with
// `timeout` as their deadline: they find nodes that hang or vanish without
// closing their connections. Suspicion comes from outside (a raylet's held
// connection to the GCS dropped, or a call to the raylet could not reach
// it): a suspected node is checked every `suspect_period` until one check
// succeeds. Either way a node is declared dead after `failure_threshold`
// consecutive failures; one success resets the count. A killed raylet drops
// its connection and refuses new ones, so it is declared dead within about
// threshold × suspect_period. A raylet holds its node-events stream (or a
// poll) nearly all the time; one killed while it held none drops none, so a
// node that held one and holds none `repoll_timeout` later is suspected
// too.
//
// A check that times out is weaker evidence than one refused: the node may
// only be slow (its host overloaded, or the GCS itself starved). A node whose
// failures include a timeout is declared dead only once it has also not
// answered for `unresponsive_timeout`: otherwise a loaded host loses its
// workers, whose restarts load it more, and a cluster under stress declares
// live nodes dead one after another. Hung and partitioned nodes are found
// after that timeout; killed ones stay fast.
//
// Thread: the GCS loop thread. Tick() is called every `tick` by the owner;
// time comes from an injected clock, so tests drive it without sleeping.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "common/thread_checker.h"

namespace manta::gcs {

// Sends health checks. The GCS uses gRPC; tests use a fake.
class HealthCheckClient {
 public:
  virtual ~HealthCheckClient() = default;
  // Calls `done` on the loop thread with the outcome.
  virtual void Check(const NodeId& node, const std::string& address, absl::Duration timeout,
                     std::function<void(const absl::Status&)> done) = 0;
  // The node is gone; drop any connection to it.
  virtual void Forget(const NodeId& node) = 0;
};

struct HealthCheckOptions {
  absl::Duration period = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(1);
  int failure_threshold = 3;
  // How long a node whose checks time out may go unanswered before it is
  // dead (measured from its last answer or poll).
  absl::Duration unresponsive_timeout = absl::Seconds(15);
  absl::Duration suspect_period = absl::Milliseconds(100);
  // How long after a poll's answer a node may hold none before it is
  // suspected.
  absl::Duration repoll_timeout = absl::Seconds(2);
  // How often the owner calls Tick(); the finest period the manager keeps.
  absl::Duration tick = absl::Milliseconds(100);
};

class HealthCheckManager {
 public:
  using DeathCallback = std::function<void(const NodeId&, const std::string& reason)>;
  using Clock = std::function<absl::Time()>;

  HealthCheckManager(HealthCheckClient* client, HealthCheckOptions options, DeathCallback on_dead,
                     Clock clock = absl::Now);

  // Starts checking `node` at `address` ("ip:port"); re-adding resets it.
  void AddNode(const NodeId& node, const std::string& address);
  // Stops checking; an outcome still in flight is ignored.
  void RemoveNode(const NodeId& node);
  // Something suggests `node` is gone: check it now and often until it answers.
  void Suspect(const NodeId& node);

  // The node's raylet started a poll (or a stream), or one of its polls was
  // answered (its stream ended).
  void PollStarted(const NodeId& node);
  void PollAnswered(const NodeId& node);
  // The raylet's loop did something for the GCS (sent a report, answered a
  // call): as good a sign of life as an answered check.
  void Alive(const NodeId& node);

  // Sends the checks that are due.
  void Tick();

  const HealthCheckOptions& options() const { return options_; }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct NodeState {
    std::string address;
    int failures = 0;
    bool timed_out = false;  // a timeout among the current run of failures
    absl::Time last_answer;  // of the last successful check or poll, or of joining
    bool in_flight = false;
    bool suspect = false;
    absl::Time last_sent = absl::InfinitePast();
    int polls_held = 0;
    absl::Time unpolled_since = absl::InfiniteFuture();  // set while it holds none after an answer
    // Distinguishes this registration from an earlier one of the same node,
    // so a late outcome for a removed-and-re-added node is ignored.
    uint64_t generation = 0;
  };

  void Send(const NodeId& node, NodeState& state);
  void OnResult(const NodeId& node, uint64_t generation, const absl::Status& status);

  HealthCheckClient* const client_;
  const HealthCheckOptions options_;
  const DeathCallback on_dead_;
  const Clock clock_;
  absl::flat_hash_map<NodeId, NodeState> nodes_;
  uint64_t next_generation_ = 1;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

}  // namespace manta::gcs
