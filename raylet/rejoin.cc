#include "raylet/rejoin.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace manta::raylet {
namespace {

constexpr char kClusterIdFlag[] = "--cluster_id=";
constexpr char kConnectTimeoutFlag[] = "--gcs_connect_timeout_s=";

// Without close_range: every open descriptor above 2 from /proc/self/fd.
void MarkCloseOnExec() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(e->d_name, &fd) || fd <= 2 || fd == own) continue;
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  closedir(dir);
}

}  // namespace

std::vector<std::string> RejoinArgs(const std::vector<std::string>& argv, const std::string& cluster_id_hex,
                                    int connect_timeout_s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (i > 0 && (absl::StartsWith(a, kClusterIdFlag) || absl::StartsWith(a, kConnectTimeoutFlag))) continue;
    out.push_back(a);
  }
  if (!cluster_id_hex.empty()) out.push_back(kClusterIdFlag + cluster_id_hex);
  out.push_back(absl::StrCat(kConnectTimeoutFlag, connect_timeout_s));
  return out;
}

absl::Status ReExec(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("no argv[0]");
  MarkCloseOnExec();
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  return absl::InternalError(absl::StrCat("cannot execute /proc/self/exe: ", std::strerror(errno)));
}

}  // namespace manta::raylet
