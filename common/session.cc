#include "common/session.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "common/status.h"

namespace manta {

absl::StatusOr<SessionPaths> CreateSession(const std::string& temp_dir) {
  RETURN_IF_ERROR(MakeDirs(temp_dir, 0755));
  std::string name = absl::StrCat(
      "session_", absl::FormatTime("%Y-%m-%d_%H-%M-%E6S", absl::Now(), absl::LocalTimeZone()), "_", getpid());
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  SessionPaths paths{temp_dir + "/" + name};
  if (mkdir(paths.dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot create session directory ", paths.dir, ": ", strerror(errno)));
  }
  for (const std::string& sub : {paths.logs(), paths.pids(), paths.ready()}) {
    RETURN_IF_ERROR(MakeDirs(sub, 0700));
  }
  // Point session_latest at the new session atomically.
  std::string link = temp_dir + "/session_latest";
  std::string tmp_link = link + ".tmp." + std::to_string(getpid());
  unlink(tmp_link.c_str());
  if (symlink(name.c_str(), tmp_link.c_str()) != 0 || rename(tmp_link.c_str(), link.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot update ", link, ": ", strerror(errno)));
  }
  return paths;
}

absl::StatusOr<SessionPaths> LatestSession(const std::string& temp_dir) {
  std::string link = temp_dir + "/session_latest";
  char buf[PATH_MAX];
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return absl::NotFoundError("no session under " + temp_dir + " (is a cluster running here?)");
  buf[n] = '\0';
  std::string target(buf);
  SessionPaths paths{target.empty() || target[0] != '/' ? temp_dir + "/" + target : target};
  if (!PathExists(paths.dir)) return absl::NotFoundError("session directory " + paths.dir + " is gone");
  return paths;
}

}  // namespace manta
