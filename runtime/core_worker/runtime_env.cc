#include "runtime/core_worker/runtime_env.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/package_name.h"
#include "common/status.h"
#include "dashboard/tar_writer.h"
#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

constexpr char kGcsScheme[] = "gcs://";
constexpr size_t kGcsSchemeSize = sizeof(kGcsScheme) - 1;

// The package of a local directory, uploaded unless the KV has it.
absl::StatusOr<std::string> Upload(const std::string& dir, const PackageKv& kv) {
  auto packed = dashboard::PackDirectory(dir, kMaxWorkingDirBytes);
  if (!packed.ok()) return Annotate(packed.status(), absl::StrCat("runtime_env working_dir '", dir, "'"));
  std::string name = PackageNameOf(*packed);
  if (packed->size() > kMaxKvPackageBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("runtime_env working_dir '", dir, "' packs to ", packed->size(),
                                                     " bytes; a package is at most ", kMaxKvPackageBytes, " bytes"));
  }
  ASSIGN_OR_RETURN(bool there, kv.exists(name));
  if (!there) RETURN_IF_ERROR(Annotate(kv.put(name, *packed), "uploading the working_dir package " + name));
  return name;
}

}  // namespace

absl::StatusOr<rpc::RuntimeEnv> MakeRuntimeEnv(const std::string& working_dir,
                                               const std::map<std::string, std::string>& env_vars,
                                               const PackageKv& kv) {
  rpc::RuntimeEnv env;
  if (auto s = ValidateEnvVars(env_vars); !s.ok()) return Annotate(s, "runtime_env env_vars");
  env.mutable_env_vars()->insert(env_vars.begin(), env_vars.end());
  if (working_dir.empty()) return env;
  if (absl::StartsWith(working_dir, kGcsScheme)) {
    std::string name = working_dir.substr(kGcsSchemeSize);
    if (auto s = ValidatePackageRef(name); !s.ok()) return Annotate(s, "runtime_env working_dir");
    ASSIGN_OR_RETURN(bool there, kv.exists(name));
    if (!there) {
      return absl::NotFoundError(absl::StrCat("runtime_env working_dir ", working_dir,
                                              " is not in the GCS; upload it first (or give a local directory)"));
    }
    env.set_working_dir_package(name);
    return env;
  }
  ASSIGN_OR_RETURN(std::string name, Upload(working_dir, kv));
  env.set_working_dir_package(name);
  return env;
}

}  // namespace manta::core
