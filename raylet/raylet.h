// Raylet: the node daemon of one host.
//
// Owns this node's identity, its gRPC server (NodeManagerService), and its
// link to the GCS: registration (again after a GCS restart), coalesced
// resource reports with the waiting demand, the NODE_INFO and NODE_RESOURCES
// subscription that feeds the cluster view, and the watch that exits the
// daemon when the GCS stays unreachable too long. The managers hang off it:
// local resources (LocalResourceManager), leases (LeaseManager),
// placement-group bundles (BundleManager), worker processes (WorkerPool) and
// their output (LogForwarder).
//
// Draining (DrainRaylet from the GCS, its own NodeInfo published with
// draining set, or SIGTERM with a drain grace): the node takes no new leases
// or bundles, and the raylet exits cleanly (unregistering, so the node is
// DEAD with death_expected and reason "drained: <reason>") once no worker is
// leased and no bundle is held, or at the deadline, stopping its workers
// first as any shutdown does.
//
// Declared dead while alive (a partition, a long pause): the GCS has already
// restarted this node's actors and moved its bundles elsewhere, and it never
// takes the node id back. Unless draining (or rejoin_when_dead is off), the
// raylet stops all its workers, shuts down without unregistering, and
// rejoin_requested() tells main to start over as a new node (RejoinArgs,
// ReExec in raylet/rejoin.h). It still exits instead when the GCS serves
// another cluster, when the death was expected (drained, unregistered), or
// when the GCS stays unreachable longer than gcs_reconnect_timeout.
//
// Thread: everything runs on the loop thread; gRPC handlers post to it.
//
//   Raylet raylet(options, &loop);
//   RETURN_IF_ERROR(raylet.Start());
//   loop.Run();
//   return raylet.exit_code();
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "raylet/local_resources.h"

namespace manta::raylet {

struct RayletOptions {
  std::string gcs_address;
  std::string node_ip = "127.0.0.1";
  int port = 0;
  std::string node_name;
  std::string token;  // empty: auth off
  bool is_head = false;
  LocalResources resources;
  absl::Duration gcs_connect_timeout = absl::Seconds(5);
  absl::Duration gcs_reconnect_timeout = absl::Seconds(60);
  std::string ready_file;
  // Workers: their log files go to <session_dir>/logs, and they read the
  // token from token_file (passed as MANTA_TOKEN_FILE).
  std::string session_dir;
  std::string token_file;
  int max_workers = 4;
  absl::Duration idle_worker_timeout = absl::Seconds(60);
  absl::Duration worker_start_timeout = absl::Seconds(30);
  // > 0: SIGTERM drains the node (deadline now + this) instead of stopping.
  absl::Duration drain_grace = absl::ZeroDuration();
  // Binary; when set, the first registration names it and a GCS serving
  // another cluster refuses this node (set when rejoining).
  std::string cluster_id;
  // Declared dead while alive: rejoin as a new node (true) or exit 1.
  bool rejoin_when_dead = true;
  // What the GCS link and draining read time from (timers keep real time).
  Clock clock = absl::Now;
  // The Prometheus endpoint (port -1: none); its host is node_ip.
  int metrics_port = -1;
  std::string metrics_token;  // empty: scrapes need no token
  std::string session_name;
};

class Raylet {
 public:
  Raylet(RayletOptions options, EventLoop* loop);
  ~Raylet();

  // Starts serving and begins registering. Errors: the port cannot be bound.
  absl::Status Start();
  // Unregisters (best effort, bounded), stops serving and stops the loop.
  void Shutdown(int exit_code, const std::string& why);
  // SIGTERM: with a drain grace and the node not yet draining, asks the GCS
  // to drain this node (reason "preemption", deadline now + grace; drains
  // locally if the GCS cannot be reached) and exits once idle; otherwise, or
  // on a second SIGTERM, Shutdown(0, "SIGTERM"). Never blocks.
  void OnSigterm();

  int exit_code() const;
  // The loop stopped because this node was declared dead and should rejoin
  // as a new node; the workers are gone. The hex cluster id to rejoin.
  bool rejoin_requested() const;
  std::string cluster_id_hex() const;
  std::string node_id_hex() const;
  int port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::raylet
