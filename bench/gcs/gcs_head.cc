#include "bench/gcs/gcs_head.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/session.h"
#include "common/rpc/grpc_util.h"
#include "common/status.h"
#include "common/token.h"
#include "nlohmann/json.hpp"
#include "proto/gcs_service.grpc.pb.h"

extern char** environ;

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
  opts.args = {"--port=0",
               "--bind_address=127.0.0.1",
               "--session_dir=" + session.dir,
               "--token_file=" + head->token_file_,
               "--ready_file=" + ready,
               "--log_file=" + session.logs() + "/gcs_server.log"};
  opts.args.insert(opts.args.end(), extra_flags.begin(), extra_flags.end());
  opts.log_file = session.logs() + "/gcs_server.out";
  opts.kill_with_parent = true;  // gone with the benchmark, however it ends
  ASSIGN_OR_RETURN(head->pid_, SpawnDaemon(opts));
  RETURN_IF_ERROR(WritePidFile(session.pids() + "/gcs_server.pid", head->pid_));
  ASSIGN_OR_RETURN(std::string text,
                   WaitForFile(ready, absl::Now() + absl::Seconds(20), head->pid_, session.logs() + "/gcs_server.log"));
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
  // posix_spawn, not fork: copying this process's page tables (the simulated
  // nodes' memory) would be timed too, and is no part of what a user waits for.
  std::string program = bin_ + "/manta";
  std::string err_file = session_dir_ + "/logs/manta_timed.err";
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view var(*e);
    if (absl::StartsWith(var, "MANTA_ADDRESS=") || absl::StartsWith(var, "MANTA_TOKEN=")) continue;
    envp.push_back(*e);
  }
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<double> ms;
  absl::Status status;
  for (int i = 0; i < runs && status.ok(); ++i) {
    auto start = std::chrono::steady_clock::now();
    pid_t pid = -1;
    int wait_status = 0;
    if (int e = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data()); e != 0) {
      status = absl::InternalError(absl::StrCat("cannot run ", program, ": ", strerror(e)));
    } else if (waitpid(pid, &wait_status, 0) != pid || !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
      status = absl::InternalError(absl::StrCat("manta ", args.empty() ? "" : args[0], " failed (",
                                                DescribeWaitStatus(wait_status), "): ", TailFile(err_file, 5)));
    } else {
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  }
  posix_spawn_file_actions_destroy(&actions);
  if (!status.ok()) return status;
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
    rpc::GetAllNodeInfoRequest node_request;
    node_request.set_brief(true);
    rpc::GetClusterResourcesRequest resource_request;
    resource_request.set_totals_only(true);
    resource_request.set_fold(true);
    grpc::Status s = nodes->GetAllNodeInfo(&nodes_ctx, node_request, &node_reply);
    if (s.ok()) s = resources->GetClusterResources(&resources_ctx, resource_request, &resource_reply);
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
