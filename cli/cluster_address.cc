#include "cli/cluster_address.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/token.h"

namespace manta::cli {

absl::StatusOr<std::string> ResolveAddress(const std::string& flag, const std::string& temp_dir) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv(kAddressEnv); env != nullptr && *env != '\0') return std::string(env);
  auto session = LatestSession(temp_dir);
  if (!session.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no running cluster found under ", temp_dir, " (pass --address or set ", kAddressEnv, ")"));
  }
  auto text = ReadFile(session->gcs_address());
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("session ", session->dir, " has no gcs_address (pass --address)"));
  }
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::StatusOr<SessionPaths> SessionForAddress(const std::string& address, const std::string& temp_dir) {
  ASSIGN_OR_RETURN(SessionPaths session, LatestSession(temp_dir));
  auto text = ReadFile(session.gcs_address());
  if (!text.ok() || absl::StripAsciiWhitespace(*text) != address) {
    return absl::NotFoundError(absl::StrCat("the latest session under ", temp_dir, " is not for ", address));
  }
  return session;
}

absl::StatusOr<std::string> ResolveToken(const std::string& address, const std::string& token_file,
                                         const std::string& temp_dir) {
  if (const char* env = std::getenv(kTokenEnv); env != nullptr && *env != '\0') {
    std::string token(absl::StripAsciiWhitespace(env));
    auto s = ValidateToken(token);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(kTokenEnv, ": ", s.message()));
    return token;
  }
  if (!token_file.empty()) {
    auto token = ReadTokenFile(token_file);
    if (!token.ok()) return Annotate(token.status(), "--token-file");
    return token;
  }
  auto session = SessionForAddress(address, temp_dir);
  if (!session.ok() || !PathExists(session->token())) return std::string();
  return ReadTokenFile(session->token());
}

}  // namespace manta::cli
