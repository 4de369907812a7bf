// Validation of the node flags of `manta start` (resources, labels, address)
// before anything is spawned, and their translation into raylet flags.
//
//   NodeFlags flags{.num_cpus = "8", .resources = "{\"custom\": 2}"};
//   ASSIGN_OR_RETURN(std::vector<std::string> args, RayletResourceArgs(flags));
//
// Every error is InvalidArgument with a message that names the flag and fits
// on one line.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::cli {

// The largest --drain-grace-s (a day), as the raylet accepts.
inline constexpr int kMaxDrainGraceS = 86400;

// Flags as typed by the user; empty means "not given".
struct NodeFlags {
  std::string num_cpus;
  std::string memory;
  std::string resources;  // JSON object
  std::string labels;     // "k=v,k2=v2"
  std::string node_name;
  std::string drain_grace_s;  // whole seconds, 0 to 86400
};

// Raylet flags (--num_cpus=..., --memory=..., --resources=..., --labels=...,
// --node_name=..., --drain_grace_s=...) for valid `flags`.
absl::StatusOr<std::vector<std::string>> RayletResourceArgs(const NodeFlags& flags);

// Parses "k=v,k2=v2". Keys: letters, digits, '.', '_', '-', '/' and at most
// 253 characters, not under the reserved "manta.io/" prefix; values: letters,
// digits, '.', '_', '-', at most 63 characters, possibly empty.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text);

// Why `json_text`, which is not valid JSON, holds a bad quantity: "NaN is not
// a quantity", "infinite quantities are not allowed" or "quantity 1e999 is
// infinite" (JSON has neither NaN nor infinity); empty when it holds none.
std::string ExplainBadQuantity(const std::string& json_text);

// Parses a whole, finite, non-negative number below the quantity limit.
absl::StatusOr<double> ParseCount(const std::string& flag, const std::string& text);

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// "10.0.0.1:6379" or "head-host:6379"; the port must be in 1..65535.
absl::StatusOr<HostPort> ParseHostPort(const std::string& text);

// Checks that the TPU_* variables describe a TPU host consistently (an
// unknown type or a topology that contradicts it is an error). OK when this
// is not a TPU host.
absl::Status CheckTpuEnvironment();

}  // namespace manta::cli
