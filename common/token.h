// The cluster token: 32 random bytes as hex, kept in a 0600 file in the
// session directory and sent as "authorization: Bearer <token>".
//
//   std::string token = GenerateToken();
//   RETURN_IF_ERROR(WriteTokenFile(dir + "/token", token));
//   if (!TokenMatches(presented, token)) return Unauthenticated(...);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta {

std::string GenerateToken();

// Writes `token` to `path` with mode 0600, atomically (temp file + rename).
absl::Status WriteTokenFile(const std::string& path, const std::string& token);

// Reads a token file. FailedPrecondition when the file is readable by group
// or others (someone loosened it); InvalidArgument when it is not a token.
// One exception: a file that only its group may also read, where the group
// is the caller's own and the file system is mounted read-only, is how
// Kubernetes mounts a Secret for a pod that runs as a non-root user (the
// pod's fsGroup): no one else can read it, and no one can loosen it.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// ReadTokenFile's check of a file's mode (st_mode), group (st_gid) and
// mount, for a caller in `groups`: FailedPrecondition naming `path` when the
// file is not private to the caller.
absl::Status CheckTokenFileAccess(const std::string& path, unsigned mode, unsigned gid, bool read_only_mount,
                                  const std::vector<unsigned>& groups);

// Checks the syntax of a token from a flag or the environment.
absl::Status ValidateToken(std::string_view token);

// The token a daemon enforces, from its --auth and --token_file flags:
// empty for "none", the file's token for "token". InvalidArgument for any
// other mode or a missing file name; ReadTokenFile's errors otherwise.
absl::StatusOr<std::string> LoadDaemonToken(const std::string& auth, const std::string& token_file);

// Constant-time comparison.
bool TokenMatches(std::string_view presented, std::string_view expected);

// Extracts the token from an "authorization" header value ("Bearer <t>").
std::string_view TokenFromAuthorization(std::string_view header);

}  // namespace manta
