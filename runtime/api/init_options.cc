#include "runtime/api/init_options.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/runtime_env_json.h"
#include "common/session.h"
#include "common/status.h"
#include "common/token.h"

namespace manta::internal {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(absl::StripAsciiWhitespace(value));
}

std::string TempDirOrDefault(const std::string& temp_dir) {
  return temp_dir.empty() ? std::string(kDefaultTempDir) : temp_dir;
}

// The latest session under temp_dir when it is the cluster at `address`.
absl::StatusOr<SessionPaths> SessionOf(const std::string& address, const std::string& temp_dir) {
  ASSIGN_OR_RETURN(SessionPaths session, LatestSession(temp_dir));
  auto text = ReadFile(session.gcs_address());
  if (!text.ok() || absl::StripAsciiWhitespace(*text) != address) {
    return absl::NotFoundError(absl::StrCat("the latest session under ", temp_dir, " is not for ", address));
  }
  return session;
}

}  // namespace

absl::StatusOr<InitArgs> ParseInitArgs(int& argc, char** argv) {
  InitArgs parsed;
  struct Flag {
    const char* name;
    std::string* value;
  };
  const Flag flags[] = {{"--address", &parsed.options.address}, {"--temp-dir", &parsed.options.temp_dir}};
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    parsed.original_args.push_back(argv[i]);
    std::string_view arg = argv[i];
    bool consumed = false;
    for (const Flag& flag : flags) {
      std::string_view name = flag.name;
      if (arg == name) {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag.name, " needs a value"));
        *flag.value = argv[++i];
        parsed.original_args.push_back(*flag.value);
        consumed = true;
      } else if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
        *flag.value = std::string(arg.substr(name.size() + 1));
        consumed = true;
      }
      if (consumed) break;
    }
    if (!consumed) argv[kept++] = argv[i];
  }
  if (argc > 0) {
    argc = kept;
    argv[argc] = nullptr;
  }
  return parsed;
}

absl::StatusOr<std::string> ResolveGcsAddress(const std::string& flag, const std::string& temp_dir) {
  if (!flag.empty()) return flag;
  if (std::string env = Env(kAddressEnv); !env.empty()) return env;
  const std::string dir = TempDirOrDefault(temp_dir);
  auto session = LatestSession(dir);
  if (!session.ok()) {
    return absl::NotFoundError(absl::StrCat("no running cluster found: no --address, no $", kAddressEnv,
                                            ", and no session under ", dir, " (start one with `manta start --head`)"));
  }
  auto text = ReadFile(session->gcs_address());
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("session ", session->dir, " has no gcs_address (pass --address)"));
  }
  std::string address(absl::StripAsciiWhitespace(*text));
  if (address.empty()) return absl::NotFoundError(absl::StrCat(session->gcs_address(), " is empty"));
  return address;
}

absl::StatusOr<core::CoreWorkerOptions> ResolveDriverOptions(const InitOptions& options) {
  core::CoreWorkerOptions out;
  const std::string temp_dir = TempDirOrDefault(options.temp_dir);
  ASSIGN_OR_RETURN(out.gcs_address, ResolveGcsAddress(options.address, temp_dir));
  auto session = SessionOf(out.gcs_address, temp_dir);
  if (session.ok()) out.session_dir = session->dir;
  if (std::string token = Env(kTokenEnv); !token.empty()) {
    absl::Status valid = ValidateToken(token);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("$", kTokenEnv, ": ", valid.message()));
    out.token = token;
  } else if (session.ok() && PathExists(session->token())) {
    auto token = ReadTokenFile(session->token());
    if (!token.ok()) return Annotate(token.status(), session->token());
    out.token = *token;
  }
  if (std::string ip = Env(kNodeIpEnv); !ip.empty()) out.node_ip = ip;
  out.worker_executable = options.worker_executable.empty() ? "/proc/self/exe" : options.worker_executable;
  out.worker_args = options.worker_args;
  if (std::string submitted = Env(kRuntimeEnvVar); !submitted.empty()) {
    ASSIGN_OR_RETURN(RuntimeEnvSpec env, ParseRuntimeEnvJson(submitted));
    out.runtime_env_working_dir = std::move(env.working_dir);
    out.runtime_env_env_vars = std::move(env.env_vars);
  }
  if (!options.runtime_env_working_dir.empty()) out.runtime_env_working_dir = options.runtime_env_working_dir;
  for (const auto& [k, v] : options.runtime_env_env_vars) out.runtime_env_env_vars[k] = v;
  return out;
}

}  // namespace manta::internal
