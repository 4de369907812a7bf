#include "cli/start_banner.h"

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace manta::cli {

std::string FormatHeadBanner(const HeadBanner& b) {
  const bool auth = !b.token_file.empty();
  std::string out = absl::StrCat("Local node IP: ", b.node_ip,
                                 "\n\n--------------------\nManta runtime started.\n--------------------\n\n"
                                 "Next steps\n  To add another node to this Manta cluster, run\n");
  if (auth) {
    absl::StrAppend(&out, "    MANTA_TOKEN=<token> manta start --address='", b.gcs_address, "'\n",
                    "  where <token> is the content of ", b.token_file, " (keep it secret).\n\n");
  } else {
    absl::StrAppend(&out, "    manta start --address='", b.gcs_address, "'\n\n");
  }
  if (!b.dashboard_url.empty()) {
    absl::StrAppend(&out, "  To submit a job to this Manta cluster, use\n    manta job submit",
                    b.temp_dir_suffix.empty() ? "" : " --address=" + b.dashboard_url,
                    " --working-dir . -- <command>\n  The Jobs REST API is at ", b.dashboard_url,
                    auth ? " (send 'Authorization: Bearer <token>').\n\n" : " (no authentication).\n\n");
  }
  if (!b.metrics_address.empty()) {
    absl::StrAppend(&out, "  Prometheus metrics are at http://", b.metrics_address, "/metrics",
                    b.metrics_auth ? " (send 'Authorization: Bearer <token>')" : "", ";\n  every node's are listed in ",
                    b.service_discovery_file, " (file_sd_configs).\n\n");
  }
  absl::StrAppend(&out, "  To connect to this Manta cluster from a program on another host, set\n    MANTA_ADDRESS='",
                  b.gcs_address, auth ? "' (and MANTA_TOKEN)\n\n" : "'\n\n",
                  "  To view the status of the cluster, use\n    manta status", b.temp_dir_suffix, "\n\n",
                  "  To terminate the Manta runtime, run\n    manta stop", b.temp_dir_suffix, "\n");
  return out;
}

bool IsLoopbackAddress(const std::string& address) {
  std::string host = address.substr(0, address.find(':'));
  in_addr a;
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

std::string AuthDisabledWarning(const std::vector<ListenAddress>& addresses) {
  std::vector<std::string> exposed;
  for (const ListenAddress& a : addresses) {
    if (!IsLoopbackAddress(a.address)) exposed.push_back(absl::StrCat(a.address, " (", a.what, ")"));
  }
  if (exposed.empty()) {
    return "WARNING: authentication is disabled (--auth=none): any user of this host can call the cluster's "
           "daemons without a token and run commands as you. Use --auth=token (the default) unless every user "
           "of this host is trusted.\n";
  }
  std::string stars(78, '*');
  return absl::StrCat(stars, "\n",
                      "WARNING: AUTHENTICATION IS DISABLED (--auth=none) AND THE CLUSTER LISTENS ON NON-LOOPBACK "
                      "ADDRESSES: ",
                      absl::StrJoin(exposed, ", "), ".\n",
                      "Anyone who can reach these ports can run arbitrary commands on this cluster's hosts as you, "
                      "without a token. Use --auth=token (the default) unless this network is isolated and every "
                      "host on it is trusted.\n",
                      stars, "\n");
}

}  // namespace manta::cli
