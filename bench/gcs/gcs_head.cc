#include "bench/gcs/gcs_head.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/session.h"
#include "common/status.h"
#include "common/rpc/grpc_util.h"
#include "common/token.h"
#include "proto/gcs_service.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace manta::bench {
namespace {

// Temporary directories of the GcsHeads alive, for CleanUpOnSignal.
absl::Mutex dirs_mu;
std::set<std::string>& LiveDirs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(dirs_mu) {
  static auto* dirs = new std::set<std::string>;
  return *dirs;
}

}  // namespace

void CleanUpOnSignal() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "interrupted; removing the benchmark's directories\n");
    absl::MutexLock lock(&dirs_mu);
    for (const std::string& dir : LiveDirs()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
    std::_Exit(128 + sig);
  }).detach();
}

absl::StatusOr<std::unique_ptr<GcsHead>> GcsHead::Start(const std::string& bin,
                                                        const std::vector<std::string>& extra_flags) {
  std::unique_ptr<GcsHead> head(new GcsHead());
  head->bin_ = bin;
  char tmpl[] = "/tmp/manta-bench-gcs.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot create a temporary directory");
  head->temp_dir_ = tmpl;
  {
    absl::MutexLock lock(&dirs_mu);
    LiveDirs().insert(head->temp_dir_);
  }
  ASSIGN_OR_RETURN(SessionPaths session, CreateSession(head->temp_dir_));
  head->session_dir_ = session.dir;
  head->token_file_ = session.token();
  head->token_ = GenerateToken();
  RETURN_IF_ERROR(WriteTokenFile(head->token_file_, head->token_));

  std::string ready = session.ready() + "/gcs_server.json";
  SpawnOptions opts;
  opts.executable = bin + "/gcs_server";
  opts.args = {"--port=0", "--bind_address=127.0.0.1", "--session_dir=" + session.dir,
               "--token_file=" + head->token_file_, "--ready_file=" + ready,
               "--log_file=" + session.logs() + "/gcs_server.log"};
  opts.args.insert(opts.args.end(), extra_flags.begin(), extra_flags.end());
  opts.log_file = session.logs() + "/gcs_server.out";
  opts.kill_with_parent = true;  // gone with the benchmark, however it ends
  ASSIGN_OR_RETURN(head->pid_, SpawnDaemon(opts));
  RETURN_IF_ERROR(WritePidFile(session.pids() + "/gcs_server.pid", head->pid_));
  ASSIGN_OR_RETURN(std::string text, WaitForFile(ready, absl::Now() + absl::Seconds(20), head->pid_,
                                                 session.logs() + "/gcs_server.log"));
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json["port"].is_number_integer()) {
    return absl::InternalError("gcs_server wrote an unreadable ready file: " + text);
  }
  head->address_ = absl::StrCat("127.0.0.1:", json["port"].get<int>());
  // What `manta status` reads to find the cluster on this host.
  RETURN_IF_ERROR(WriteFileAtomic(session.gcs_address(), head->address_ + "\n", 0644));
  return head;
}

GcsHead::~GcsHead() { Stop(); }

void GcsHead::Stop() {
  if (pid_ > 0) {
    TerminateProcess(pid_, absl::Now() + absl::Seconds(5)).IgnoreError();
    pid_ = -1;
  }
  if (!temp_dir_.empty()) {
    {
      absl::MutexLock lock(&dirs_mu);
      LiveDirs().erase(temp_dir_);
    }
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
    if (ec) std::fprintf(stderr, "could not remove %s: %s\n", temp_dir_.c_str(), ec.message().c_str());
    temp_dir_.clear();
  }
}

absl::StatusOr<std::vector<double>> GcsHead::TimeManta(const std::vector<std::string>& args, int runs) const {
  SpawnOptions opts;
  opts.executable = bin_ + "/manta";
  opts.args = args;
  opts.unset_env = {"MANTA_ADDRESS", "MANTA_TOKEN"};
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(CommandResult r, RunAndCapture(opts, absl::Seconds(60)));
    double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r.exit_code != 0) {
      return absl::InternalError(absl::StrCat("manta ", args.empty() ? "" : args[0], " failed (exit ", r.exit_code, "): ", r.err));
    }
    ms.push_back(elapsed);
  }
  return ms;
}

absl::StatusOr<std::vector<double>> GcsHead::TimeStatusCalls(int runs) const {
  auto channel = rpc::MakeChannel(address_);
  auto nodes = rpc::NodeInfoGcsService::NewStub(channel);
  auto resources = rpc::NodeResourceGcsService::NewStub(channel);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    grpc::ClientContext nodes_ctx, resources_ctx;
    rpc::PrepareContext(&nodes_ctx, token_, absl::Seconds(30));
    rpc::PrepareContext(&resources_ctx, token_, absl::Seconds(30));
    rpc::GetAllNodeInfoReply node_reply;
    rpc::GetClusterResourcesReply resource_reply;
    grpc::Status s = nodes->GetAllNodeInfo(&nodes_ctx, rpc::GetAllNodeInfoRequest(), &node_reply);
    if (s.ok()) s = resources->GetClusterResources(&resources_ctx, rpc::GetClusterResourcesRequest(), &resource_reply);
    if (!s.ok()) return rpc::ToAbslStatus(s);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return ms;
}

std::string GcsHead::LogTail(int lines) const { return TailFile(session_dir_ + "/logs/gcs_server.log", lines); }

int OpenFds(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

long RaiseFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return static_cast<long>(limit.rlim_cur);
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

}  // namespace manta::bench
