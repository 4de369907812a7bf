// What `manta start` prints once its daemons run: the head's next steps, and
// the warning for a cluster that runs without authentication (--auth=none).
//
//   out << FormatHeadBanner({.node_ip = "127.0.0.1", .gcs_address = "127.0.0.1:6379", ...});
//   if (token_file.empty()) err << AuthDisabledWarning({{"GCS", "127.0.0.1:6379"}});
//
// Pure functions, safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace manta::cli {

struct HeadBanner {
  std::string node_ip;
  std::string gcs_address;    // HOST:PORT
  std::string token_file;     // empty: the cluster runs without a token
  std::string dashboard_url;  // empty: no dashboard
  // " --temp-dir=X" for a temp dir other than the default, else empty.
  std::string temp_dir_suffix;
  std::string metrics_address;  // the GCS's Prometheus endpoint, HOST:PORT; empty: none
  bool metrics_auth = true;     // scrapes need the token
  std::string service_discovery_file;
};

// "Local node IP: ...", "Manta runtime started." and how to add a node,
// submit a job, connect a program, see the status and stop. Mentions the
// token only when there is one.
std::string FormatHeadBanner(const HeadBanner& banner);

// One address a daemon serves on, e.g. {"GCS", "10.0.0.5:6379"} or
// {"raylet", "10.0.0.5"}; IPv4 host, optional port.
struct ListenAddress {
  std::string what;
  std::string address;
};

// Whether the host of `address` ("10.0.0.5" or "10.0.0.5:6379") is in
// 127.0.0.0/8. 0.0.0.0 (every interface) is not.
bool IsLoopbackAddress(const std::string& address);

// The warning for a cluster whose calls need no token, ending in a newline.
// When any of `addresses` is not loopback it is louder and lists those
// addresses: anyone who can reach them can run commands on the cluster.
std::string AuthDisabledWarning(const std::vector<ListenAddress>& addresses);

}  // namespace manta::cli
