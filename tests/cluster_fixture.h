// A real Manta cluster for integration tests: gcs_server and raylet processes
// from $MANTA_BIN_DIR on free ports in a fresh temporary session directory.
//
//   manta::testing::Cluster cluster;
//   ASSERT_OK(cluster.StartHead());
//   ASSERT_OK(cluster.AddTpuSlice("tpu-group-0", "v6e-16", "4x4").status());
//   ASSERT_OK(cluster.KillRaylet(1, SIGKILL));
//   EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.CountNodes(rpc::NodeInfo::DEAD) == 1; },
//                                absl::Seconds(2)));
//   CommandResult r = cluster.RunManta({"status"});
//
// The Cluster owns every process it starts (daemons, busy loops) and every
// daemon that a `manta` command run through RunManta leaves under its temp
// dir. The destructor kills all of them with their process groups, on every
// exit path of a test; the daemons also get SIGKILL if the test process dies
// (PR_SET_PDEATHSIG). The temp dir is removed unless the test failed or
// MANTA_TEST_KEEP_FILES is set, in which case its path is printed so the
// logs can be read.
//
// Raylet 0 is the head's raylet. Not thread-safe: use from the test thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process.h"
#include "gcs_service.pb.h"
#include "gtest/gtest.h"

namespace grpc {
class Channel;
}

namespace manta::testing {

#define MANTA_ASSERT_OK(expr)                                       \
  do {                                                              \
    ::absl::Status manta_assert_status_ = (expr);                   \
    ASSERT_TRUE(manta_assert_status_.ok()) << manta_assert_status_; \
  } while (0)

struct RayletOptions {
  // Fixed by default so that resource totals in assertions do not depend on
  // the machine.
  double num_cpus = 1;
  double memory = 1073741824;                            // 1 GiB
  std::string resources;                                 // JSON object, or empty
  std::string labels;                                    // "k=v,...", or empty
  std::vector<std::pair<std::string, std::string>> env;  // e.g. TPU_* variables
  std::vector<std::string> extra_args;
  // The address it serves on and advertises; empty: the cluster's node_ip.
  std::string node_ip;
  // A command the raylet is started through, which must exec it (keeping
  // the pid), e.g. {"/usr/sbin/ip", "netns", "exec", "NAME"}; empty: none.
  std::vector<std::string> wrapper;
};

struct ClusterOptions {
  bool auth = true;
  // The GCS binds to it and the head raylet serves on it; drivers started
  // by RunProgram and StartProgram get it as MANTA_NODE_IP.
  std::string node_ip = "127.0.0.1";
  RayletOptions head;
  std::vector<std::string> gcs_extra_args;
  std::vector<std::pair<std::string, std::string>> gcs_env;  // e.g. RAY_REDIS_PASSWORD
  absl::Duration ready_timeout = absl::Seconds(30);
};

// One daemon the cluster started.
struct DaemonProcess {
  std::string name;  // "gcs_server", "raylet_3"
  pid_t pid = 0;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> wrapper;  // RayletOptions::wrapper
  std::string out_file;              // its stdout and stderr
  std::string ready_file;
  std::string ready_json;  // contents once ready
  std::string node_id;     // raylets: hex node id from the ready file
  int port = 0;            // from the ready file
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Starts gcs_server on a free port and the head raylet; waits until both
  // are ready.
  absl::Status StartHead();

  // Starts raylets in parallel and waits until all are registered. Returns
  // their indices.
  absl::StatusOr<std::vector<int>> AddRaylets(const std::vector<RayletOptions>& raylets);
  absl::StatusOr<int> AddRaylet(const RayletOptions& raylet = {});

  // One raylet per host of a TPU slice named `name` of `pod_type`
  // ("v6e-16") shaped `topology` ("4x4"), with the GKE TPU variables and
  // worker ids 0..hosts-1.
  absl::StatusOr<std::vector<int>> AddTpuSlice(const std::string& name, const std::string& pod_type,
                                               const std::string& topology, RayletOptions base = {});

  // Waits until raylet `i` has written its ready file with a node id other
  // than the one it had (it rejoined as a new node after being declared
  // dead) and reloads its node id and port.
  absl::Status WaitRayletReadyAgain(int i);

  // Signals raylet `i` (0 is the head's) and, for SIGKILL, waits until it is
  // gone.
  absl::Status KillRaylet(int i, int sig = SIGKILL);
  // SIGKILL to the GCS, waits until it is gone.
  absl::Status KillGcs();
  // SIGTERM to the GCS, waits for a clean exit.
  absl::Status StopGcs();
  // Starts the GCS again on the same session directory and port.
  absl::Status RestartGcs();

  // Kills every process this cluster knows of, and the daemons of `manta`
  // commands under the temp dir. Idempotent.
  void Shutdown();

  // Starts `n` processes that spin on a CPU until Shutdown.
  absl::Status StartBusyLoops(int n);
  void StopBusyLoops();

  // GCS queries with the cluster token and a 5 s deadline.
  absl::StatusOr<rpc::GetAllNodeInfoReply> GetAllNodeInfo();
  absl::StatusOr<rpc::GetClusterResourcesReply> GetClusterResources();
  absl::StatusOr<std::string> GetClusterId();  // binary
  absl::Status KvPut(const std::string& ns, const std::string& key, const std::string& value);
  absl::StatusOr<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key);
  // Whether every alive node has all its resources available and no
  // placement-group resource left; otherwise `why` (if given) names one.
  bool ResourcesFull(std::string* why = nullptr);
  // Nodes in `state`; -1 if the GCS cannot be asked.
  int CountNodes(rpc::NodeInfo::State state);
  // The state of node `node_id` (hex); nullopt if unknown or unreachable.
  std::optional<rpc::NodeInfo> FindNode(const std::string& node_id_hex);

  // Runs build/bin/manta with `args`. MANTA_ADDRESS and MANTA_TOKEN are
  // removed from the inherited environment; `env` is added.
  CommandResult RunManta(const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env = {},
                         absl::Duration timeout = absl::Seconds(60));
  // Runs `manta up ARGS` (--tpu, --slices, ...) as a user would, in
  // temp_dir()/`name` on free GCS and dashboard ports; the cluster's temp
  // dir and ports, or the command's output as the error. Stop it with
  // RunManta({"down", "--temp-dir=" + up.temp_dir}).
  struct Up {
    std::string temp_dir;
    int port = 0;
    int dashboard_port = 0;
    std::string session() const { return temp_dir + "/session_latest"; }
  };
  absl::StatusOr<Up> MantaUp(const std::string& name, const std::vector<std::string>& args);
  // Runs build/bin/`program` (a driver or an example) against this cluster
  // (MantaEnv). A program that cannot be started or times out gives
  // exit_code -1 and the reason in err.
  CommandResult RunProgram(const std::string& program, std::vector<std::string> args,
                           absl::Duration timeout = absl::Seconds(90)) const;
  // Starts build/bin/`program` against this cluster in the background, its
  // output in `log_file`; it dies with the test.
  absl::StatusOr<pid_t> StartProgram(const std::string& program, std::vector<std::string> args,
                                     const std::string& log_file) const;
  // MANTA_ADDRESS and MANTA_TOKEN of this cluster.
  std::vector<std::pair<std::string, std::string>> MantaEnv() const;

  // Polls `done` until true or `timeout`; never a bare sleep.
  static bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);

  // Daemons spawned from $MANTA_BIN_DIR (build/bin by default).
  static std::string BinDir();

  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& session_dir() const { return session_dir_; }
  const std::string& token() const { return token_; }
  const std::string& gcs_address() const { return gcs_address_; }
  int gcs_port() const { return gcs_port_; }
  const DaemonProcess& gcs() const { return gcs_; }
  const DaemonProcess& raylet(int i) const { return raylets_.at(static_cast<size_t>(i)); }
  int num_raylets() const { return static_cast<int>(raylets_.size()); }

 private:
  absl::Status MakeSession();
  DaemonProcess MakeRaylet(const RayletOptions& o, int index, bool head);
  absl::Status Launch(DaemonProcess* d);
  absl::Status WaitReady(DaemonProcess* d);
  void KillDaemonsUnderTempDir();

  // Constant after construction.
  const ClusterOptions options_;
  std::string temp_dir_;
  std::string session_dir_;
  std::string token_;
  std::string token_file_;

  std::string gcs_address_;
  int gcs_port_ = 0;
  DaemonProcess gcs_;
  std::vector<DaemonProcess> raylets_;
  std::vector<pid_t> busy_loops_;
  bool shut_down_ = false;
};

// A channel to `target` that sends and receives messages of any size, so a
// server's own limit is the one that applies.
std::shared_ptr<grpc::Channel> UnlimitedChannel(const std::string& target);

// Live (non-zombie) processes whose command line contains `text`, e.g. a
// temp dir passed to daemons as --session_dir.
std::vector<pid_t> ProcessesMentioning(const std::string& text);

}  // namespace manta::testing
