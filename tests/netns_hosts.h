// Simulated hosts on a private network, for network partition tests.
//
// A bridge in the root network namespace holds the head address
// (10.X.Y.1/24, X and Y from this process's pid, skipping subnets already in
// use); each host is a network namespace "manta-<pid>-<k>-hN" joined to the
// bridge by a veth pair, with address 10.X.Y.(N+1). Processes started
// through Wrapper(h) run inside host h and reach the root namespace (the
// GCS, the head raylet, drivers) at head_ip().
//
//   auto hosts = NetnsHosts::Create();
//   if (!hosts.ok()) GTEST_SKIP() << hosts.status();   // no CAP_NET_ADMIN
//   int h = *(*hosts)->AddHost();
//   raylet.node_ip = (*hosts)->host_ip(h);
//   raylet.wrapper = (*hosts)->Wrapper(h);
//   ASSERT_OK((*hosts)->Cut(h));    // the link goes down both ways
//   ASSERT_OK((*hosts)->Heal(h));
//
// The destructor deletes every namespace, veth and the bridge (stop the
// processes inside first: declare the NetnsHosts before the Cluster).
// Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/tun_link.h"

namespace manta::testing {

class NetnsHosts {
 public:
  // Creates the bridge and its address. Unavailable, with the reason, when
  // this process cannot create namespaces or links (no CAP_NET_ADMIN, no
  // `ip` command).
  static absl::StatusOr<std::unique_ptr<NetnsHosts>> Create();
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // A new host; returns its index (0, 1, ...).
  absl::StatusOr<int> AddHost();

  const std::string& head_ip() const { return head_ip_; }
  std::string host_ip(int h) const;
  const std::string& netns(int h) const { return hosts_.at(static_cast<size_t>(h)).netns; }
  // {"/path/to/ip", "netns", "exec", netns(h)}: runs a command inside host h.
  std::vector<std::string> Wrapper(int h) const;

  // Takes the root side of host h's link (and of its user-space link, if
  // any) down, so nothing passes either way, or brings it up again.
  absl::Status Cut(int h);
  absl::Status Heal(int h);
  // Delay and loss on host h's link to the head, both ways, e.g.
  // "delay 200ms loss 5%": `tc qdisc ... netem <spec>` on both ends of its
  // veth, or, where the kernel has no netem qdisc, a user-space link
  // (tests/tun_link.h) that the head's and the host's addresses are routed
  // over (then only "delay <duration>" and "loss <percent>%" are
  // understood, and only traffic between the host and the head is slowed).
  absl::Status Impair(int h, const std::string& spec);
  // "netem" or "tun" once host h is impaired, else empty.
  std::string impairment(int h) const;
  // Packets the user-space link of host h carried and lost; zeros for netem.
  TunLink::Counts link_counts(int h) const;

 private:
  struct Host {
    std::string netns;
    std::string outer;  // root-side veth, a port of the bridge
    std::string inner;  // the host's end
    std::string impairment;
    std::unique_ptr<TunLink> link;  // the user-space link, when impaired with one
  };
  NetnsHosts(std::string ip_tool, std::string prefix, std::string subnet);
  // Runs `ip` (or `tc` when `tool` is it) with `args`; Internal with stderr.
  absl::Status Run(const std::string& tool, const std::vector<std::string>& args) const;
  absl::Status Ip(const std::vector<std::string>& args) const { return Run(ip_, args); }
  absl::Status Netem(Host& host, const std::string& spec);
  absl::Status EmulateLink(int h, const std::string& spec);

  const std::string ip_;      // path of the ip command
  const std::string prefix_;  // of every link name ("mt<pid>x<k>")
  const std::string subnet_;  // "10.X.Y."
  const std::string bridge_;
  const std::string head_ip_;
  std::string tc_;  // path of tc, or empty
  std::vector<Host> hosts_;
};

}  // namespace manta::testing
