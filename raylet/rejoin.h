// Rejoining: a raylet that the GCS declared dead while it still ran (a
// network partition, a long pause) cannot come back under its old node id.
// It stops its workers, then replaces itself with a fresh run of its own
// executable, which registers as a new node at the same address.
//
//   std::vector<std::string> args = RejoinArgs(original_argv, cluster_id_hex, 60);
//   absl::Status s = ReExec(args);  // returns only on failure
//
// Thread: ReExec must be the last thing the process does; any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace manta::raylet {

// `argv` (argv[0] first) with the flags a rejoining raylet needs: the cluster
// it belonged to (--cluster_id, hex; a GCS now serving another cluster
// refuses the new node, which then exits) and, as its first-join timeout,
// `connect_timeout_s` (the reconnect timeout of a joined node). Earlier
// copies of either flag are dropped, so rejoining again does not grow the
// command line.
std::vector<std::string> RejoinArgs(const std::vector<std::string>& argv, const std::string& cluster_id_hex,
                                    int connect_timeout_s);

// Marks every descriptor above standard error close-on-exec and executes
// /proc/self/exe with `argv` and the current environment, keeping the pid.
// Returns only on failure: Internal with the errno text.
absl::Status ReExec(const std::vector<std::string>& argv);

}  // namespace manta::raylet
