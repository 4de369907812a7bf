#include "bench/gcs/raylet_fleet.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "common/rpc/grpc_util.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::bench {

absl::Status RayletFleet::Start(int count) {
  started_ = std::chrono::steady_clock::now();
  std::string session = head_.session_dir();
  for (int i = 0; i < count; ++i) {
    SpawnOptions opts;
    opts.executable = head_.bin() + "/raylet";
    std::string log = absl::StrCat(session, "/logs/raylet_", i, ".log");
    opts.args = {"--gcs_address=" + head_.address(),
                 "--node_ip_address=127.0.0.1",
                 "--session_dir=" + session,
                 "--token_file=" + head_.token_file(),
                 "--num_cpus=1",
                 "--memory=1000000000",
                 absl::StrCat("--node_name=bench-raylet-", i),
                 "--gcs_connect_timeout_s=60",
                 "--log_file=" + log};
    opts.log_file = absl::StrCat(session, "/logs/raylet_", i, ".out");
    opts.kill_with_parent = true;  // gone with the benchmark, however it ends
    auto pid = SpawnDaemon(opts);
    if (!pid.ok()) return pid.status();
    pids_.push_back(*pid);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> RayletFleet::WaitAlive(absl::Duration timeout) {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(head_.address()));
  absl::Time deadline = absl::Now() + timeout;
  int alive = 0;
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, head_.token(), absl::Seconds(5));
    rpc::GetAllNodeInfoRequest request;
    request.set_filter_alive(true);
    rpc::GetAllNodeInfoReply reply;
    if (stub->GetAllNodeInfo(&ctx, request, &reply).ok()) {
      alive = reply.nodes_size();
      if (alive >= static_cast<int>(pids_.size())) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      }
    }
    for (pid_t pid : pids_) {
      if (!IsAlive(pid)) return absl::UnavailableError(absl::StrCat("raylet pid ", pid, " exited; see its log"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(alive, " of ", pids_.size(), " raylets alive after ", absl::FormatDuration(timeout)));
}

void RayletFleet::Stop() {
  for (pid_t pid : pids_) SendSignal(pid, SIGTERM).IgnoreError();
  for (pid_t pid : pids_) TerminateProcess(pid, absl::Now() + absl::Seconds(5)).IgnoreError();
  pids_.clear();
}

}  // namespace manta::bench
