#include "dashboard/job_info.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/placement_group_resources.h"
#include "common/resources.h"
#include "common/status.h"
#include "common/utf8.h"
#include "dashboard/validation.h"

namespace manta::dashboard {
namespace {

using nlohmann::json;

constexpr size_t kMaxEntrypointBytes = 256 << 10;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<std::map<std::string, std::string>> StringMap(const json& j, const std::string& field) {
  std::map<std::string, std::string> out;
  if (j.is_null()) return out;
  if (!j.is_object()) return Invalid(absl::StrCat("'", field, "' must be an object of strings"));
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) return Invalid(absl::StrCat("'", field, "' value for '", k, "' must be a string"));
    out[k] = v.get<std::string>();
  }
  return out;
}

absl::StatusOr<std::optional<double>> ParseQuantity(const json& j, const std::string& field) {
  if (j.is_null()) return std::optional<double>();
  if (!j.is_number()) return Invalid(absl::StrCat("'", field, "' must be a number"));
  double v = j.get<double>();
  RETURN_IF_ERROR(ValidateEntrypointQuantity(field, v));
  return std::optional<double>(v);
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

absl::Status ParseRuntimeEnv(const json& env, JobSubmitRequest* req) {
  if (env.is_null()) return absl::OkStatus();
  if (!env.is_object()) return Invalid("'runtime_env' must be an object");
  for (const auto& [key, value] : env.items()) {
    if (key == "working_dir") {
      if (value.is_null()) continue;
      if (!value.is_string()) return Invalid("'runtime_env.working_dir' must be a string");
      ASSIGN_OR_RETURN(req->working_dir_package, PackageNameFromUri(value.get<std::string>()));
    } else if (key == "env_vars") {
      ASSIGN_OR_RETURN(req->env_vars, StringMap(value, "runtime_env.env_vars"));
      for (const auto& [name, v] : req->env_vars) {
        if (!IsEnvName(name)) return Invalid(absl::StrCat("runtime_env.env_vars: '", name, "' is not a variable name"));
        if (v.find('\0') != std::string::npos)
          return Invalid(absl::StrCat("runtime_env.env_vars: '", name, "' holds a NUL byte"));
      }
    } else {
      return Invalid(
          absl::StrCat("runtime_env field '", key, "' is not supported (Manta supports working_dir and env_vars)"));
    }
  }
  req->runtime_env = env;
  return absl::OkStatus();
}

json OptionalNumber(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> ReadOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

const char* JobStatusName(JobStatus status) {
  switch (status) {
    case JobStatus::kPending:
      return "PENDING";
    case JobStatus::kRunning:
      return "RUNNING";
    case JobStatus::kStopped:
      return "STOPPED";
    case JobStatus::kSucceeded:
      return "SUCCEEDED";
    case JobStatus::kFailed:
      return "FAILED";
  }
  return "FAILED";
}

std::optional<JobStatus> ParseJobStatus(std::string_view name) {
  for (JobStatus s :
       {JobStatus::kPending, JobStatus::kRunning, JobStatus::kStopped, JobStatus::kSucceeded, JobStatus::kFailed}) {
    if (JobStatusName(s) == name) return s;
  }
  return std::nullopt;
}

absl::StatusOr<JobSubmitRequest> ParseSubmitRequest(std::string_view body) {
  if (!IsValidUtf8(body)) return Invalid("the request body is not valid UTF-8");
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid("the request body is not valid JSON");
  if (!j.is_object()) return Invalid("the request body must be a JSON object");
  JobSubmitRequest req;
  static const std::set<std::string> kKnown = {"entrypoint",          "submission_id",     "job_id",
                                               "runtime_env",         "metadata",          "entrypoint_num_cpus",
                                               "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources"};
  for (const auto& [key, value] : j.items()) {
    if (kKnown.count(key) == 0) return Invalid(absl::StrCat("unknown field '", key, "' in the request"));
  }
  auto entry = j.find("entrypoint");
  if (entry == j.end() || !entry->is_string()) return Invalid("'entrypoint' is required and must be a string");
  req.entrypoint = entry->get<std::string>();
  if (req.entrypoint.find_first_not_of(" \t\r\n") == std::string::npos) return Invalid("'entrypoint' is empty");
  if (req.entrypoint.find('\0') != std::string::npos) return Invalid("'entrypoint' holds a NUL byte");
  if (req.entrypoint.size() > kMaxEntrypointBytes) return Invalid("'entrypoint' is longer than 256 KiB");
  for (const char* key : {"submission_id", "job_id"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) return Invalid(absl::StrCat("'", key, "' must be a string"));
    if (req.submission_id.empty()) req.submission_id = it->get<std::string>();
  }
  if (!req.submission_id.empty()) RETURN_IF_ERROR(ValidateSubmissionId(req.submission_id));
  if (auto it = j.find("runtime_env"); it != j.end()) RETURN_IF_ERROR(ParseRuntimeEnv(*it, &req));
  if (auto it = j.find("metadata"); it != j.end()) {
    ASSIGN_OR_RETURN(req.metadata, StringMap(*it, "metadata"));
  }
  if (auto it = j.find("entrypoint_num_cpus"); it != j.end()) {
    ASSIGN_OR_RETURN(req.entrypoint_num_cpus, ParseQuantity(*it, "entrypoint_num_cpus"));
  }
  if (auto it = j.find("entrypoint_num_gpus"); it != j.end()) {
    ASSIGN_OR_RETURN(req.entrypoint_num_gpus, ParseQuantity(*it, "entrypoint_num_gpus"));
  }
  if (auto it = j.find("entrypoint_memory"); it != j.end()) {
    ASSIGN_OR_RETURN(req.entrypoint_memory, ParseQuantity(*it, "entrypoint_memory"));
  }
  if (auto it = j.find("entrypoint_resources"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("'entrypoint_resources' must be an object of numbers");
    for (const auto& [name, value] : it->items()) {
      if (name == "CPU" || name == "GPU" || name == "memory") {
        return Invalid(absl::StrCat("entrypoint_resources: use entrypoint_num_cpus, entrypoint_num_gpus or ",
                                    "entrypoint_memory for '", name, "'"));
      }
      RETURN_IF_ERROR(Annotate(ResourceSet::ValidateName(name), "entrypoint_resources"));
      if (pg::ParseGroupResource(name)) {
        return Invalid(absl::StrCat("entrypoint_resources: '", name, "' is a placement-group resource"));
      }
      ASSIGN_OR_RETURN(std::optional<double> q, ParseQuantity(value, absl::StrCat("entrypoint_resources.", name)));
      if (!q) return Invalid(absl::StrCat("'entrypoint_resources.", name, "' must be a number"));
      req.entrypoint_resources[name] = *q;
    }
  }
  return req;
}

std::map<std::string, double> EntrypointResourceMap(const JobSubmitRequest& req) {
  std::map<std::string, double> m = req.entrypoint_resources;
  if (req.entrypoint_num_cpus && *req.entrypoint_num_cpus > 0) m["CPU"] = *req.entrypoint_num_cpus;
  if (req.entrypoint_num_gpus && *req.entrypoint_num_gpus > 0) m["GPU"] = *req.entrypoint_num_gpus;
  if (req.entrypoint_memory && *req.entrypoint_memory > 0) m["memory"] = *req.entrypoint_memory;
  return m;
}

JobRecord NewJobRecord(const JobSubmitRequest& req, const std::string& submission_id, int64_t now_ms) {
  JobRecord job;
  job.submission_id = submission_id;
  job.entrypoint = req.entrypoint;
  job.status = JobStatus::kPending;
  job.message = "Job has not started yet.";
  job.start_time_ms = now_ms;
  job.metadata = req.metadata;
  job.runtime_env = req.runtime_env;
  job.working_dir_package = req.working_dir_package;
  job.env_vars = req.env_vars;
  job.entrypoint_num_cpus = req.entrypoint_num_cpus;
  job.entrypoint_num_gpus = req.entrypoint_num_gpus;
  job.entrypoint_memory = req.entrypoint_memory;
  job.entrypoint_resources = req.entrypoint_resources;
  return job;
}

json ToApiJson(const JobRecord& job) {
  json j;
  j["type"] = "SUBMISSION";
  j["job_id"] = nullptr;
  j["submission_id"] = job.submission_id;
  j["entrypoint"] = job.entrypoint;
  j["status"] = std::string(JobStatusName(job.status));
  j["message"] = job.message;
  j["error_type"] = job.error_type.empty() ? json(nullptr) : json(job.error_type);
  j["start_time"] = job.start_time_ms > 0 ? json(job.start_time_ms) : json(nullptr);
  j["end_time"] = job.end_time_ms > 0 ? json(job.end_time_ms) : json(nullptr);
  j["metadata"] = job.metadata;
  j["runtime_env"] = job.runtime_env;
  if (job.runner_pid > 0) {
    j["driver_info"] = {
        {"id", job.submission_id}, {"node_ip_address", job.driver_node_ip}, {"pid", std::to_string(job.runner_pid)}};
  } else {
    j["driver_info"] = nullptr;
  }
  j["driver_exit_code"] = job.driver_exit_code ? json(*job.driver_exit_code) : json(nullptr);
  j["entrypoint_num_cpus"] = OptionalNumber(job.entrypoint_num_cpus);
  j["entrypoint_num_gpus"] = OptionalNumber(job.entrypoint_num_gpus);
  j["entrypoint_memory"] = OptionalNumber(job.entrypoint_memory);
  j["entrypoint_resources"] = job.entrypoint_resources.empty() ? json(nullptr) : json(job.entrypoint_resources);
  return j;
}

std::string ToStoredJson(const JobRecord& job) {
  json j = ToApiJson(job);
  j["manta"] = {{"runner_pid", job.runner_pid},
                {"runner_start_ticks", job.runner_start_ticks},
                {"supervisor_pid", job.supervisor_pid},
                {"stop_requested", job.stop_requested},
                {"stopped_by_shutdown", job.stopped_by_shutdown},
                {"working_dir_package", job.working_dir_package},
                {"env_vars", job.env_vars},
                {"driver_node_ip", job.driver_node_ip}};
  return DumpJson(j);
}

absl::StatusOr<JobRecord> FromStoredJson(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Invalid("stored job record is not a JSON object");
  try {
    JobRecord job;
    job.submission_id = j.at("submission_id").get<std::string>();
    job.entrypoint = j.at("entrypoint").get<std::string>();
    auto status = ParseJobStatus(j.at("status").get<std::string>());
    if (!status) return Invalid("stored job record has an unknown status");
    job.status = *status;
    job.message = j.value("message", "");
    if (j["error_type"].is_string()) job.error_type = j["error_type"].get<std::string>();
    if (j["start_time"].is_number()) job.start_time_ms = j["start_time"].get<int64_t>();
    if (j["end_time"].is_number()) job.end_time_ms = j["end_time"].get<int64_t>();
    if (j["metadata"].is_object()) job.metadata = j["metadata"].get<std::map<std::string, std::string>>();
    if (j["runtime_env"].is_object()) job.runtime_env = j["runtime_env"];
    job.entrypoint_num_cpus = ReadOptional(j, "entrypoint_num_cpus");
    job.entrypoint_num_gpus = ReadOptional(j, "entrypoint_num_gpus");
    job.entrypoint_memory = ReadOptional(j, "entrypoint_memory");
    if (j["entrypoint_resources"].is_object()) {
      job.entrypoint_resources = j["entrypoint_resources"].get<std::map<std::string, double>>();
    }
    if (j["driver_exit_code"].is_number()) job.driver_exit_code = j["driver_exit_code"].get<int>();
    const json& m = j.at("manta");
    job.runner_pid = m.value("runner_pid", 0);
    job.runner_start_ticks = m.value("runner_start_ticks", uint64_t{0});
    job.supervisor_pid = m.value("supervisor_pid", 0);
    job.stop_requested = m.value("stop_requested", false);
    job.stopped_by_shutdown = m.value("stopped_by_shutdown", false);
    job.working_dir_package = m.value("working_dir_package", "");
    job.driver_node_ip = m.value("driver_node_ip", "");
    if (m.contains("env_vars")) job.env_vars = m["env_vars"].get<std::map<std::string, std::string>>();
    RETURN_IF_ERROR(ValidateSubmissionId(job.submission_id));
    return job;
  } catch (const json::exception& e) {
    return Invalid(absl::StrCat("stored job record is malformed: ", e.what()));
  }
}

std::string DumpJson(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

}  // namespace manta::dashboard
