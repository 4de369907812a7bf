#include "common/token.h"

#include <limits.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/status.h"

namespace manta {

std::string GenerateToken() {
  char bytes[32];
  FillRandom(bytes, sizeof(bytes));
  return ToHex(std::string_view(bytes, sizeof(bytes)));
}

absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  return WriteFileAtomic(path, token + "\n", 0600);
}

absl::Status ValidateToken(std::string_view token) {
  if (token.size() < 16 || token.size() > 256) {
    return absl::InvalidArgumentError("token must be 16 to 256 characters");
  }
  for (char c : token) {
    bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
    if (!ok) return absl::InvalidArgumentError("token has a character outside [A-Za-z0-9._-]");
  }
  return absl::OkStatus();
}

absl::Status CheckTokenFileAccess(const std::string& path, unsigned mode, unsigned gid, bool read_only_mount,
                                  const std::vector<unsigned>& groups) {
  if ((mode & 077) == 0) return absl::OkStatus();
  // Group read alone, on a mount no one can change, for the caller's group.
  const bool callers_group = std::find(groups.begin(), groups.end(), gid) != groups.end();
  if ((mode & 037) == 0 && read_only_mount && callers_group) return absl::OkStatus();
  return absl::FailedPreconditionError("token file " + path + " is readable by others; expected mode 0600");
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError("no token file at " + path);
  struct statvfs fs;
  const bool read_only = statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0;
  std::vector<unsigned> groups = {static_cast<unsigned>(getegid())};
  gid_t supplementary[NGROUPS_MAX];
  const int n = getgroups(NGROUPS_MAX, supplementary);
  for (int i = 0; i < n; ++i) groups.push_back(static_cast<unsigned>(supplementary[i]));
  RETURN_IF_ERROR(CheckTokenFileAccess(path, st.st_mode, st.st_gid, read_only, groups));
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (auto s = ValidateToken(token); !s.ok()) {
    return absl::InvalidArgumentError("token file " + path + ": " + std::string(s.message()));
  }
  return token;
}

absl::StatusOr<std::string> LoadDaemonToken(const std::string& auth, const std::string& token_file) {
  if (auth == "none") return std::string();
  if (auth != "token") return absl::InvalidArgumentError("--auth must be token or none");
  if (token_file.empty()) return absl::InvalidArgumentError("--token_file is required with --auth=token");
  return ReadTokenFile(token_file);
}

bool TokenMatches(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    char p = i < presented.size() ? presented[i] : 0;
    diff |= static_cast<unsigned char>(p ^ expected[i]);
  }
  return diff == 0;
}

std::string_view TokenFromAuthorization(std::string_view header) {
  constexpr std::string_view kPrefix = "bearer ";
  if (header.size() < kPrefix.size()) return {};
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kPrefix[i]) return {};
  }
  header.remove_prefix(kPrefix.size());
  while (!header.empty() && std::isspace(static_cast<unsigned char>(header.front()))) header.remove_prefix(1);
  while (!header.empty() && std::isspace(static_cast<unsigned char>(header.back()))) header.remove_suffix(1);
  return header;
}

}  // namespace manta
