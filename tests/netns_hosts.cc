#include "tests/netns_hosts.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

// The two ends of a host whose veth is `outer`: "<outer>a" stays here,
// "<outer>b" goes into the host.
std::string TunName(const std::string& outer, char end) { return outer + end; }

// "delay 200ms loss 5%" as a TunLink's options; InvalidArgument for anything
// else netem would take (jitter, correlation, reordering, ...).
absl::StatusOr<TunLink::Options> ParseLinkSpec(const std::string& spec) {
  std::vector<std::string> words = absl::StrSplit(spec, ' ', absl::SkipEmpty());
  TunLink::Options options;
  for (size_t i = 0; i < words.size(); i += 2) {
    if (i + 1 >= words.size()) return absl::InvalidArgumentError("'" + words[i] + "' needs a value");
    const std::string& value = words[i + 1];
    if (words[i] == "delay" && absl::ParseDuration(value, &options.delay) && options.delay >= absl::ZeroDuration()) {
      continue;
    }
    double percent = 0;
    if (words[i] == "loss" && absl::EndsWith(value, "%") &&
        absl::SimpleAtod(value.substr(0, value.size() - 1), &percent) && percent >= 0 && percent <= 100) {
      options.loss = percent / 100;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("the user-space link does not understand '", words[i], " ", value,
                                                   "' (only: delay <duration>, loss <percent>%)"));
  }
  return options;
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
    return absl::UnavailableError("cannot create network namespaces (needs CAP_NET_ADMIN): " +
                                  std::string(s.message()));
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
  Host added;
  added.netns = absl::StrCat("manta-", getpid(), "-", prefix_.substr(prefix_.rfind('x') + 1), "-h", h);
  added.outer = absl::StrCat(prefix_, "h", h);
  added.inner = added.outer + "p";
  if (auto s = Ip({"netns", "add", added.netns}); !s.ok()) return s;
  hosts_.push_back(std::move(added));  // from here on the destructor removes it
  const Host& host = hosts_.back();
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

absl::Status NetnsHosts::Cut(int h) {
  const Host& host = hosts_.at(static_cast<size_t>(h));
  if (host.link != nullptr) {
    if (auto s = Ip({"link", "set", TunName(host.outer, 'a'), "down"}); !s.ok()) return s;
  }
  return Ip({"link", "set", host.outer, "down"});
}

absl::Status NetnsHosts::Heal(int h) {
  const Host& host = hosts_.at(static_cast<size_t>(h));
  if (auto s = Ip({"link", "set", host.outer, "up"}); !s.ok()) return s;
  if (host.link == nullptr) return absl::OkStatus();
  // Taking a device down drops its routes: set the device up and route the
  // host over it again.
  if (auto s = Ip({"link", "set", TunName(host.outer, 'a'), "up"}); !s.ok()) return s;
  return Ip({"route", "replace", host_ip(h) + "/32", "dev", TunName(host.outer, 'a'), "src", head_ip_});
}

std::string NetnsHosts::impairment(int h) const { return hosts_.at(static_cast<size_t>(h)).impairment; }

TunLink::Counts NetnsHosts::link_counts(int h) const {
  const Host& host = hosts_.at(static_cast<size_t>(h));
  return host.link == nullptr ? TunLink::Counts{} : host.link->counts();
}

absl::Status NetnsHosts::Impair(int h, const std::string& spec) {
  Host& host = hosts_.at(static_cast<size_t>(h));
  absl::Status netem = tc_.empty() ? absl::UnimplementedError("no `tc` command") : Netem(host, spec);
  if (netem.ok()) {
    host.impairment = "netem";
    return netem;
  }
  if (!absl::IsUnimplemented(netem)) return netem;
  if (auto s = EmulateLink(h, spec); !s.ok()) {
    return absl::UnimplementedError(absl::StrCat(netem.message(), "; no user-space link either: ", s.message()));
  }
  host.impairment = "tun";
  return absl::OkStatus();
}

absl::Status NetnsHosts::Netem(Host& host, const std::string& spec) {
  std::vector<std::string> netem = absl::StrSplit(spec, ' ', absl::SkipEmpty());
  netem.insert(netem.begin(), "netem");
  std::vector<std::string> outer = {"qdisc", "replace", "dev", host.outer, "root"};
  outer.insert(outer.end(), netem.begin(), netem.end());
  if (auto s = Run(tc_, outer); !s.ok()) {
    if (absl::StrContains(s.message(), "unknown") || absl::StrContains(s.message(), "No such file")) {
      return absl::UnimplementedError("the kernel has no netem qdisc: " + std::string(s.message()));
    }
    return s;
  }
  std::vector<std::string> inner = {"netns", "exec", host.netns, tc_, "qdisc", "replace", "dev", host.inner, "root"};
  inner.insert(inner.end(), netem.begin(), netem.end());
  return Ip(inner);
}

absl::Status NetnsHosts::EmulateLink(int h, const std::string& spec) {
  Host& host = hosts_.at(static_cast<size_t>(h));
  if (host.link != nullptr) return absl::FailedPreconditionError("the host already has a user-space link");
  auto options = ParseLinkSpec(spec);
  if (!options.ok()) return options.status();
  auto link = TunLink::Create(TunName(host.outer, 'a'), TunName(host.outer, 'b'), *options);
  if (!link.ok()) return link.status();
  host.link = std::move(*link);
  // The head and the host reach each other over the pair: a /32 route each
  // way is more specific than the bridge's /24, so nothing else changes.
  const std::vector<std::vector<std::string>> steps = {
      {"link", "set", TunName(host.outer, 'b'), "netns", host.netns},
      {"link", "set", TunName(host.outer, 'a'), "up"},
      {"-n", host.netns, "link", "set", TunName(host.outer, 'b'), "up"},
      {"route", "replace", host_ip(h) + "/32", "dev", TunName(host.outer, 'a'), "src", head_ip_},
      {"-n", host.netns, "route", "replace", head_ip_ + "/32", "dev", TunName(host.outer, 'b'), "src", host_ip(h)},
  };
  for (const auto& args : steps) {
    if (auto s = Ip(args); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace manta::testing
