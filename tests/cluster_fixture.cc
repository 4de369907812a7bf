#include "tests/cluster_fixture.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/placement_group_resources.h"
#include "common/rpc/grpc_util.h"
#include "common/session.h"
#include "common/status.h"
#include "common/token.h"
#include "common/tpu.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace manta::testing {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

const std::vector<std::string>& TpuVariables() {
  static const std::vector<std::string> vars = {
      tpu::kEnvAcceleratorType, tpu::kEnvTopology,           tpu::kEnvWorkerId,     tpu::kEnvName,
      tpu::kEnvWorkerHostnames, tpu::kEnvChipsPerHostBounds, tpu::kEnvVisibleChips, tpu::kEnvHostBounds};
  return vars;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  SignalProcessGroup(pid, SIGKILL).IgnoreError();
  SendSignal(pid, SIGKILL).IgnoreError();
  WaitForExit(pid, absl::Now() + absl::Seconds(10)).IgnoreError();
}

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

}  // namespace

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/manta_it_XXXXXX";
  if (mkdtemp(tmpl) != nullptr) temp_dir_ = tmpl;
}

Cluster::~Cluster() {
  Shutdown();
  if (temp_dir_.empty()) return;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* keep = std::getenv("MANTA_TEST_KEEP_FILES");
  if ((test != nullptr && test->result()->Failed()) || (keep != nullptr && *keep != '\0')) {
    std::cerr << "cluster files kept for inspection: " << temp_dir_ << std::endl;
    return;
  }
  std::string cmd = "rm -rf '" + temp_dir_ + "'";
  if (system(cmd.c_str()) != 0) std::cerr << "could not remove " << temp_dir_ << std::endl;
}

std::string Cluster::BinDir() {
  const char* env = std::getenv("MANTA_BIN_DIR");
  return env != nullptr && *env != '\0' ? env : "build/bin";
}

bool Cluster::WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  return PollUntil(done, absl::Now() + timeout);
}

absl::Status Cluster::MakeSession() {
  if (temp_dir_.empty()) return absl::InternalError("mkdtemp failed");
  if (!session_dir_.empty()) return absl::OkStatus();
  auto session = CreateSession(temp_dir_);
  if (!session.ok()) return session.status();
  session_dir_ = session->dir;
  if (options_.auth) {
    token_ = GenerateToken();
    token_file_ = session->token();
    if (auto s = WriteTokenFile(token_file_, token_); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Cluster::Launch(DaemonProcess* d) {
  SessionPaths session{session_dir_};
  d->out_file = absl::StrCat(session.logs(), "/", d->name, ".out");
  d->ready_file = absl::StrCat(session.ready(), "/", d->name, ".json");
  unlink(d->ready_file.c_str());
  SpawnOptions o;
  o.executable = BinDir() + "/" + (absl::StartsWith(d->name, "raylet") ? "raylet" : "gcs_server");
  o.args = d->args;
  if (!d->wrapper.empty()) {
    o.args.insert(o.args.begin(), o.executable);
    o.args.insert(o.args.begin(), d->wrapper.begin() + 1, d->wrapper.end());
    o.executable = d->wrapper.front();
  }
  o.args.push_back("--ready_file=" + d->ready_file);
  o.log_file = d->out_file;
  o.env = d->env;
  o.unset_env = TpuVariables();
  o.kill_with_parent = true;
  auto pid = SpawnDaemon(o);
  if (!pid.ok()) return pid.status();
  d->pid = *pid;
  return absl::OkStatus();
}

absl::Status Cluster::WaitReady(DaemonProcess* d) {
  auto json = WaitForFile(d->ready_file, absl::Now() + options_.ready_timeout, d->pid, d->out_file);
  if (!json.ok()) return absl::Status(json.status().code(), absl::StrCat(d->name, ": ", json.status().message()));
  d->ready_json = *json;
  nlohmann::json j = nlohmann::json::parse(*json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError(d->name + ": bad ready file: " + *json);
  if (j.contains("port") && j["port"].is_number_integer()) d->port = j["port"].get<int>();
  if (j.contains("node_id") && j["node_id"].is_string()) d->node_id = j["node_id"].get<std::string>();
  return absl::OkStatus();
}

DaemonProcess Cluster::MakeRaylet(const RayletOptions& o, int index, bool head) {
  DaemonProcess d;
  d.name = absl::StrCat("raylet_", index);
  const std::string& ip = o.node_ip.empty() ? options_.node_ip : o.node_ip;
  d.args = {"--gcs_address=" + gcs_address_, "--node_ip_address=" + ip, "--session_dir=" + session_dir_,
            "--num_cpus=" + FormatNumber(o.num_cpus), "--memory=" + FormatNumber(o.memory)};
  d.args.push_back(options_.auth ? "--token_file=" + token_file_ : "--auth=none");
  if (head) d.args.push_back("--head");
  if (!o.resources.empty()) d.args.push_back("--resources=" + o.resources);
  if (!o.labels.empty()) d.args.push_back("--labels=" + o.labels);
  for (const auto& a : o.extra_args) d.args.push_back(a);
  d.env = o.env;
  d.wrapper = o.wrapper;
  return d;
}

absl::Status Cluster::StartHead() {
  if (auto s = MakeSession(); !s.ok()) return s;
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  gcs_port_ = *port;
  gcs_address_ = absl::StrCat(options_.node_ip, ":", gcs_port_);
  if (auto s = WriteFileAtomic(SessionPaths{session_dir_}.gcs_address(), gcs_address_ + "\n"); !s.ok()) return s;
  gcs_.name = "gcs_server";
  gcs_.args = {absl::StrCat("--port=", gcs_port_), "--session_dir=" + session_dir_,
               "--bind_address=" + options_.node_ip};
  gcs_.args.push_back(options_.auth ? "--token_file=" + token_file_ : "--auth=none");
  for (const auto& a : options_.gcs_extra_args) gcs_.args.push_back(a);
  gcs_.env = options_.gcs_env;
  if (auto s = Launch(&gcs_); !s.ok()) return s;
  if (auto s = WaitReady(&gcs_); !s.ok()) return s;
  raylets_.push_back(MakeRaylet(options_.head, 0, /*head=*/true));
  if (auto s = Launch(&raylets_.back()); !s.ok()) return s;
  return WaitReady(&raylets_.back());
}

absl::StatusOr<std::vector<int>> Cluster::AddRaylets(const std::vector<RayletOptions>& raylets) {
  if (gcs_address_.empty()) return absl::FailedPreconditionError("StartHead first");
  std::vector<int> indices;
  for (const RayletOptions& o : raylets) {
    int index = num_raylets();
    raylets_.push_back(MakeRaylet(o, index, /*head=*/false));
    if (auto s = Launch(&raylets_.back()); !s.ok()) return s;
    indices.push_back(index);
  }
  for (int i : indices) {
    if (auto s = WaitReady(&raylets_[static_cast<size_t>(i)]); !s.ok()) return s;
  }
  return indices;
}

absl::StatusOr<int> Cluster::AddRaylet(const RayletOptions& raylet) {
  auto indices = AddRaylets({raylet});
  if (!indices.ok()) return indices.status();
  return indices->front();
}

absl::StatusOr<std::vector<int>> Cluster::AddTpuSlice(const std::string& name, const std::string& pod_type,
                                                      const std::string& topology, RayletOptions base) {
  auto type = tpu::ParsePodType(pod_type);
  if (!type.ok()) return type.status();
  auto topo = tpu::ParseTopology(topology);
  if (!topo.ok()) return topo.status();
  auto hosts = tpu::HostsPerSlice(*type, *topo);
  if (!hosts.ok()) return hosts.status();
  std::vector<RayletOptions> raylets;
  for (int w = 0; w < *hosts; ++w) {
    RayletOptions o = base;
    o.env.emplace_back(tpu::kEnvAcceleratorType, pod_type);
    o.env.emplace_back(tpu::kEnvTopology, topology);
    o.env.emplace_back(tpu::kEnvWorkerId, std::to_string(w));
    o.env.emplace_back(tpu::kEnvName, name);
    raylets.push_back(std::move(o));
  }
  return AddRaylets(raylets);
}

absl::Status Cluster::WaitRayletReadyAgain(int i) {
  if (i < 0 || i >= num_raylets()) return absl::OutOfRangeError(absl::StrCat("no raylet ", i));
  DaemonProcess& d = raylets_[static_cast<size_t>(i)];
  const std::string old = d.node_id;
  auto rewritten = [&] {
    auto json = ReadFile(d.ready_file);
    return json.ok() && absl::StrContains(*json, "\"node_id\"") && !absl::StrContains(*json, old);
  };
  if (!PollUntil(rewritten, absl::Now() + options_.ready_timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(d.name, ": no ready file with a node id other than ", old));
  }
  return WaitReady(&d);
}

absl::Status Cluster::KillRaylet(int i, int sig) {
  if (i < 0 || i >= num_raylets()) return absl::OutOfRangeError(absl::StrCat("no raylet ", i));
  pid_t pid = raylets_[static_cast<size_t>(i)].pid;
  if (auto s = SendSignal(pid, sig); !s.ok()) return s;
  if (sig == SIGKILL) return WaitForExit(pid, absl::Now() + absl::Seconds(10));
  return absl::OkStatus();
}

absl::Status Cluster::KillGcs() {
  if (auto s = SendSignal(gcs_.pid, SIGKILL); !s.ok()) return s;
  return WaitForExit(gcs_.pid, absl::Now() + absl::Seconds(10));
}

absl::Status Cluster::StopGcs() {
  if (auto s = SendSignal(gcs_.pid, SIGTERM); !s.ok()) return s;
  return WaitForExit(gcs_.pid, absl::Now() + absl::Seconds(15));
}

absl::Status Cluster::RestartGcs() {
  if (IsAlive(gcs_.pid)) return absl::FailedPreconditionError("the GCS still runs");
  if (auto s = Launch(&gcs_); !s.ok()) return s;
  return WaitReady(&gcs_);
}

absl::Status Cluster::StartBusyLoops(int n) {
  for (int i = 0; i < n; ++i) {
    SpawnOptions o;
    o.executable = "/bin/sh";
    o.args = {"-c", "while :; do :; done"};
    o.kill_with_parent = true;
    auto pid = SpawnDaemon(o);
    if (!pid.ok()) return pid.status();
    busy_loops_.push_back(*pid);
  }
  return absl::OkStatus();
}

void Cluster::StopBusyLoops() {
  for (pid_t pid : busy_loops_) KillAndReap(pid);
  busy_loops_.clear();
}

void Cluster::KillDaemonsUnderTempDir() {
  if (temp_dir_.empty()) return;
  // Sessions directly under the temp dir (the fixture's) and one level down
  // (temp dirs given to `manta start --temp-dir`).
  std::vector<std::string> roots = {temp_dir_};
  for (const std::string& entry : ListDir(temp_dir_)) roots.push_back(temp_dir_ + "/" + entry);
  for (const std::string& root : roots) {
    for (const std::string& entry : ListDir(root)) {
      if (!absl::StartsWith(entry, "session_") || entry == "session_latest") continue;
      std::string pids = root + "/" + entry + "/pids";
      for (const std::string& file : ListDir(pids)) {
        auto pid = ReadPidFile(pids + "/" + file);
        if (!pid.ok()) continue;
        if (RunsExecutable(*pid, "raylet") || RunsExecutable(*pid, "gcs_server") || RunsExecutable(*pid, "dashboard")) {
          KillAndReap(*pid);
        }
      }
    }
  }
}

void Cluster::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  StopBusyLoops();
  for (const DaemonProcess& r : raylets_) KillAndReap(r.pid);
  KillAndReap(gcs_.pid);
  KillDaemonsUnderTempDir();
}

absl::StatusOr<rpc::GetAllNodeInfoReply> Cluster::GetAllNodeInfo() {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs_address_));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token_, kRpcTimeout);
  rpc::GetAllNodeInfoReply reply;
  auto s = stub->GetAllNodeInfo(&ctx, rpc::GetAllNodeInfoRequest(), &reply);
  if (!s.ok()) return rpc::ToAbslStatus(s);
  return reply;
}

absl::StatusOr<rpc::GetClusterResourcesReply> Cluster::GetClusterResources() {
  auto stub = rpc::NodeResourceGcsService::NewStub(rpc::MakeChannel(gcs_address_));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token_, kRpcTimeout);
  rpc::GetClusterResourcesReply reply;
  auto s = stub->GetClusterResources(&ctx, rpc::GetClusterResourcesRequest(), &reply);
  if (!s.ok()) return rpc::ToAbslStatus(s);
  return reply;
}

absl::StatusOr<std::string> Cluster::GetClusterId() {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs_address_));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token_, kRpcTimeout);
  rpc::GetClusterIdReply reply;
  auto s = stub->GetClusterId(&ctx, rpc::GetClusterIdRequest(), &reply);
  if (!s.ok()) return rpc::ToAbslStatus(s);
  return reply.cluster_id();
}

absl::Status Cluster::KvPut(const std::string& ns, const std::string& key, const std::string& value) {
  auto stub = rpc::InternalKvGcsService::NewStub(rpc::MakeChannel(gcs_address_));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token_, kRpcTimeout);
  rpc::KvPutRequest req;
  req.set_ns(ns);
  req.set_key(key);
  req.set_value(value);
  req.set_overwrite(true);
  rpc::KvPutReply reply;
  return rpc::ToAbslStatus(stub->Put(&ctx, req, &reply));
}

absl::StatusOr<std::optional<std::string>> Cluster::KvGet(const std::string& ns, const std::string& key) {
  auto stub = rpc::InternalKvGcsService::NewStub(rpc::MakeChannel(gcs_address_));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token_, kRpcTimeout);
  rpc::KvGetRequest req;
  req.set_ns(ns);
  req.set_key(key);
  rpc::KvGetReply reply;
  auto s = stub->Get(&ctx, req, &reply);
  if (!s.ok()) return rpc::ToAbslStatus(s);
  if (!reply.found()) return std::optional<std::string>();
  return std::optional<std::string>(reply.value());
}

bool Cluster::ResourcesFull(std::string* why) {
  auto r = GetClusterResources();
  if (!r.ok()) {
    if (why != nullptr) *why = r.status().ToString();
    return false;
  }
  for (const auto& n : r->nodes()) {
    for (const auto& [name, total] : n.total()) {
      auto it = n.available().find(name);
      double available = it == n.available().end() ? 0 : it->second;
      if (pg::ParseGroupResource(name).has_value() || available != total) {
        if (why != nullptr) *why = name + " " + std::to_string(available) + "/" + std::to_string(total);
        return false;
      }
    }
  }
  return true;
}

int Cluster::CountNodes(rpc::NodeInfo::State state) {
  auto reply = GetAllNodeInfo();
  if (!reply.ok()) return -1;
  int n = 0;
  for (const auto& node : reply->nodes()) n += node.state() == state ? 1 : 0;
  return n;
}

std::optional<rpc::NodeInfo> Cluster::FindNode(const std::string& node_id_hex) {
  auto reply = GetAllNodeInfo();
  if (!reply.ok()) return std::nullopt;
  for (const auto& node : reply->nodes()) {
    if (ToHex(node.node_id()) == node_id_hex) return node;
  }
  return std::nullopt;
}

CommandResult Cluster::RunManta(const std::vector<std::string>& args,
                                const std::vector<std::pair<std::string, std::string>>& env, absl::Duration timeout) {
  SpawnOptions o;
  o.executable = BinDir() + "/manta";
  o.args = args;
  o.unset_env = {"MANTA_ADDRESS", "MANTA_TOKEN"};
  for (const auto& v : TpuVariables()) o.unset_env.push_back(v);
  o.env = env;
  auto r = RunAndCapture(o, timeout);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = std::string(r.status().message());
    return failed;
  }
  return *r;
}

absl::StatusOr<Cluster::Up> Cluster::MantaUp(const std::string& name, const std::vector<std::string>& args) {
  Up up;
  up.temp_dir = temp_dir() + "/" + name;
  ASSIGN_OR_RETURN(up.port, PickFreePort());
  ASSIGN_OR_RETURN(up.dashboard_port, PickFreePort());
  std::vector<std::string> all = {"up", "--temp-dir=" + up.temp_dir, absl::StrCat("--port=", up.port),
                                  absl::StrCat("--dashboard-port=", up.dashboard_port)};
  all.insert(all.end(), args.begin(), args.end());
  CommandResult r = RunManta(all, {}, absl::Seconds(180));
  if (r.exit_code != 0) return absl::InternalError("manta up failed: " + r.out + r.err);
  return up;
}

std::shared_ptr<grpc::Channel> UnlimitedChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<pid_t> Cluster::StartProgram(const std::string& program, std::vector<std::string> args,
                                            const std::string& log_file) const {
  SpawnOptions opts;
  opts.executable = BinDir() + "/" + program;
  opts.args = std::move(args);
  opts.env = MantaEnv();
  opts.log_file = log_file;
  opts.kill_with_parent = true;
  return SpawnDaemon(opts);
}

CommandResult Cluster::RunProgram(const std::string& program, std::vector<std::string> args,
                                  absl::Duration timeout) const {
  SpawnOptions opts;
  opts.executable = BinDir() + "/" + program;
  opts.args = std::move(args);
  opts.env = MantaEnv();
  auto r = RunAndCapture(opts, timeout);
  if (!r.ok()) {
    CommandResult failed;
    failed.exit_code = -1;
    failed.err = std::string(r.status().message());
    return failed;
  }
  return *r;
}

std::vector<std::pair<std::string, std::string>> Cluster::MantaEnv() const {
  std::vector<std::pair<std::string, std::string>> env = {{"MANTA_ADDRESS", gcs_address_}};
  if (!token_.empty()) env.emplace_back("MANTA_TOKEN", token_);
  if (options_.node_ip != "127.0.0.1") env.emplace_back("MANTA_NODE_IP", options_.node_ip);
  return env;
}

std::vector<pid_t> ProcessesMentioning(const std::string& text) {
  std::vector<pid_t> found;
  for (const std::string& entry : ListDir("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry, &pid) || pid == getpid()) continue;
    auto cmdline = ReadFile("/proc/" + entry + "/cmdline");
    if (!cmdline.ok() || cmdline->empty()) continue;  // gone, or a zombie
    for (char& c : *cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline->find(text) != std::string::npos && IsAlive(pid)) found.push_back(pid);
  }
  return found;
}

}  // namespace manta::testing
