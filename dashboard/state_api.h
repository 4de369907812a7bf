// StateApi: the cluster's state over HTTP in Ray's shapes, read from the GCS
// on each request (through the same reads as `manta status` and `manta
// list`, state/gcs_reads.h):
//
//   GET /api/gcs_healthz                 "success" (200), or 503 with why the GCS cannot be reached
//   GET /api/cluster_status              {"result": true, "msg", "data": {"clusterStatus": {
//                                           "loadMetricsReport": {"usage": {name: [used, total]}, ...},
//                                           "autoscalerReport": {"activeNodes", "pendingNodes", "failedNodes"}}}}
//   GET /api/cluster_status?format=1     the same with clusterStatus as `manta status` prints it
//   GET /api/v0/nodes                    {"result": true, "msg": "", "data": {"result": {
//   GET /api/v0/actors                      "total", "num_after_truncation", "num_filtered",
//   GET /api/v0/placement_groups            "result": [entries as `manta list ... --format json`],
//   GET /api/v0/tasks                       "partial_failure_warning", "warnings"}}}
//                                        with limit and filters (state_query.h)
//   GET /api/train/v2/runs/v1            {"train_runs": [runs, newest first, with their metrics]}
//
// Errors are text/plain (http_reply.h): 400 for a bad query, 503 when the
// GCS cannot be reached. Handlers run on the HTTP server's threads and block on the GCS;
// authentication and cross-site checks happen before (request_guard.h).
#pragma once

#include <memory>

namespace httplib {
class Server;
}

namespace manta::gcs {
class SyncGcsClient;
}

namespace manta::dashboard {

class StateApi {
 public:
  // `gcs` outlives this.
  explicit StateApi(gcs::SyncGcsClient* gcs) : gcs_(gcs) {}
  void Register(httplib::Server* server);

 private:
  gcs::SyncGcsClient* const gcs_;
};

}  // namespace manta::dashboard
