// The driver of a serving group on a reserved slice (what `manta job
// submit -- manta_serve --topology=4x4 ...` runs): reserves one whole slice,
// starts a ServeWorker on every host (worker 0 leads and serves HTTP), and
// keeps the group up as LeaderWorkerSet does: when any of its processes
// dies, the whole group is torn down and recreated on a whole slice, and
// the restart is counted (manta_serve_group_restarts_total on the leader).
// Disaggregated, the group holds two whole slices: slice 0 prefills, slice
// 1 generates and its leader serves.
// Returns on SIGTERM or SIGINT (the job stopped), after releasing it all.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace manta::serve {

struct SliceServeOptions {
  std::string topology;  // "4x4"
  std::string accelerator_type = "TPU-V6E";
  std::vector<std::string> args;  // base.yml and key=value overrides
  int port = 8000;
  bool check_token = true;
  std::string token;                                    // empty: the cluster's
  absl::Duration reserve_timeout = absl::Seconds(600);  // per try; tries go on until stopped
  absl::Duration start_timeout = absl::Seconds(120);
  // Prefill on one slice, generate on another (two slices reserved).
  bool disaggregated = false;
  int transfer_backlog = 4;
  // How every process's engines keep the projections: "float32",
  // "bfloat16" or "int8" (serve/engine/packed_matrix.h).
  std::string weights = "float32";
};

// The process's exit status. Installs handlers for SIGTERM and SIGINT that
// end it.
int ServeOnSlice(const SliceServeOptions& options);

}  // namespace manta::serve
