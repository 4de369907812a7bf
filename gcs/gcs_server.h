// GcsServer: the head service. Owns the store, the managers, their gRPC
// services (gcs_service_adapters.h) and the gRPC server, and wires them
// together.
//
//   GcsServer server(options, &loop);
//   RETURN_IF_ERROR(server.Start());   // binds the port, recovers tables
//   loop.Run();                        // until Shutdown() stops it
//
// Thread: Start() and Shutdown() on the loop thread (before and while the
// loop runs); gRPC handlers only check the token and post to the loop.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/event_loop.h"
#include "gcs/gcs_metrics.h"
#include "gcs/health_check_manager.h"
#include "gcs/storage_config.h"

namespace manta::gcs {

struct GcsServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 6379;
  std::string token;      // empty: auth off
  StorageConfig storage;  // sqlite needs its path
  HealthCheckOptions health_check;
  GcsMetricsOptions metrics;  // port -1: no metrics port
};

class GcsServer {
 public:
  GcsServer(GcsServerOptions options, EventLoop* loop);
  ~GcsServer();

  // Opens the store, recovers the tables, and starts serving.
  absl::Status Start();
  // Stops serving: replies to held polls, drains calls, then stops the loop.
  void Shutdown();

  int port() const;
  int metrics_port() const;  // -1: none
  std::string cluster_id_hex() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::gcs
