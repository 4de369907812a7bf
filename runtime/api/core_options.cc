// Checks of CoreWorker options shared by the real and the fake core worker.
#include <string>

#include "manta/internal/core_worker.h"

namespace manta::core {

absl::Status ValidateEnvVars(const std::map<std::string, std::string>& env_vars) {
  for (const auto& [name, value] : env_vars) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("invalid environment variable name '" + name.substr(0, 64) + "'");
    }
    if (value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("the value of environment variable " + name.substr(0, 64) +
                                        " holds a NUL byte");
    }
  }
  return absl::OkStatus();
}

}  // namespace manta::core
