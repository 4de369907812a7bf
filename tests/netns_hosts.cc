#include "tests/netns_hosts.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/process.h"

namespace manta::testing {
namespace {

constexpr absl::Duration kCommandTimeout = absl::Seconds(10);

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

absl::StatusOr<std::string> Output(const std::string& tool, const std::vector<std::string>& args) {
  SpawnOptions o;
  o.executable = tool;
  o.args = args;
  auto r = RunAndCapture(o, kCommandTimeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat(tool, " ", absl::StrJoin(args, " "), ": ", r->err, r->out));
  }
  return r->out;
}

// "10.X.Y." not yet used by any address or route here, or empty.
std::string FreeSubnet(const std::string& ip, int instance) {
  auto addrs = Output(ip, {"-4", "-o", "addr"});
  auto routes = Output(ip, {"-4", "route"});
  const int pid = static_cast<int>(getpid());
  const int x = 100 + pid % 100;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int y = ((pid / 100) % 25 * 10 + instance + attempt) % 250;
    std::string subnet = absl::StrCat("10.", x, ".", y, ".");
    if ((addrs.ok() && absl::StrContains(*addrs, subnet)) || (routes.ok() && absl::StrContains(*routes, subnet))) {
      continue;
    }
    return subnet;
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsHosts>> NetnsHosts::Create() {
  static int instances = 0;
  const int instance = instances++;
  std::string ip = FindTool("ip");
  if (ip.empty()) return absl::UnavailableError("no `ip` command (iproute2)");
  std::string subnet = FreeSubnet(ip, instance);
  if (subnet.empty()) return absl::UnavailableError("no free 10.x.y.0/24 subnet");
  std::string prefix = absl::StrCat("mt", getpid() % 10000000, "x", instance % 10);
  std::unique_ptr<NetnsHosts> hosts(new NetnsHosts(ip, prefix, subnet));
  std::string probe = absl::StrCat("manta-", getpid(), "-probe");
  if (auto s = hosts->Ip({"netns", "add", probe}); !s.ok()) {
    return absl::UnavailableError("cannot create network namespaces (needs CAP_NET_ADMIN): " + std::string(s.message()));
  }
  hosts->Ip({"netns", "del", probe}).IgnoreError();
  if (auto s = hosts->Ip({"link", "add", hosts->bridge_, "type", "bridge"}); !s.ok()) {
    return absl::UnavailableError("cannot create a bridge: " + std::string(s.message()));
  }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"addr", "add", hosts->head_ip_ + "/24", "dev", hosts->bridge_}, {"link", "set", hosts->bridge_, "up"}}) {
    if (auto s = hosts->Ip(args); !s.ok()) return s;
  }
  return hosts;
}

NetnsHosts::NetnsHosts(std::string ip_tool, std::string prefix, std::string subnet)
    : ip_(std::move(ip_tool)),
      prefix_(std::move(prefix)),
      subnet_(std::move(subnet)),
      bridge_(prefix_ + "b"),
      head_ip_(subnet_ + "1"),
      tc_(FindTool("tc")) {}

NetnsHosts::~NetnsHosts() {
  for (const Host& h : hosts_) {
    Ip({"netns", "del", h.netns}).IgnoreError();  // takes the host's veth end, hence the pair, with it
    Ip({"link", "del", h.outer}).IgnoreError();
  }
  Ip({"link", "del", bridge_}).IgnoreError();
}

absl::Status NetnsHosts::Run(const std::string& tool, const std::vector<std::string>& args) const {
  return Output(tool, args).status();
}

absl::StatusOr<int> NetnsHosts::AddHost() {
  const int h = static_cast<int>(hosts_.size());
  Host host;
  host.netns = absl::StrCat("manta-", getpid(), "-", prefix_.substr(prefix_.rfind('x') + 1), "-h", h);
  host.outer = absl::StrCat(prefix_, "h", h);
  host.inner = host.outer + "p";
  if (auto s = Ip({"netns", "add", host.netns}); !s.ok()) return s;
  hosts_.push_back(host);  // from here on the destructor removes it
  const std::string address = host_ip(h) + "/24";
  const std::vector<std::vector<std::string>> steps = {
      {"link", "add", host.outer, "type", "veth", "peer", "name", host.inner},
      {"link", "set", host.inner, "netns", host.netns},
      {"link", "set", host.outer, "master", bridge_},
      {"link", "set", host.outer, "up"},
      {"-n", host.netns, "addr", "add", address, "dev", host.inner},
      {"-n", host.netns, "link", "set", host.inner, "up"},
      {"-n", host.netns, "link", "set", "lo", "up"},
  };
  for (const auto& args : steps) {
    if (auto s = Ip(args); !s.ok()) return s;
  }
  return h;
}

std::string NetnsHosts::host_ip(int h) const { return absl::StrCat(subnet_, h + 2); }

std::vector<std::string> NetnsHosts::Wrapper(int h) const { return {ip_, "netns", "exec", netns(h)}; }

absl::Status NetnsHosts::Cut(int h) { return Ip({"link", "set", hosts_.at(static_cast<size_t>(h)).outer, "down"}); }

absl::Status NetnsHosts::Heal(int h) { return Ip({"link", "set", hosts_.at(static_cast<size_t>(h)).outer, "up"}); }

absl::Status NetnsHosts::Impair(int h, const std::string& spec) {
  if (tc_.empty()) return absl::UnimplementedError("no `tc` command");
  Host& host = hosts_.at(static_cast<size_t>(h));
  std::vector<std::string> netem = absl::StrSplit(spec, ' ', absl::SkipEmpty());
  netem.insert(netem.begin(), "netem");
  std::vector<std::string> outer = {"qdisc", "replace", "dev", host.outer, "root"};
  outer.insert(outer.end(), netem.begin(), netem.end());
  if (auto s = Run(tc_, outer); !s.ok()) {
    if (absl::StrContains(s.message(), "unknown")) {
      return absl::UnimplementedError("the kernel has no netem qdisc: " + std::string(s.message()));
    }
    return s;
  }
  std::vector<std::string> inner = {"netns", "exec", host.netns, tc_, "qdisc", "replace", "dev", host.inner, "root"};
  inner.insert(inner.end(), netem.begin(), netem.end());
  return Ip(inner);
}

}  // namespace manta::testing
