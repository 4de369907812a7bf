#include "state/list_actors.h"

#include "absl/strings/str_cat.h"
#include "common/resources.h"
#include "nlohmann/json.hpp"
#include "state/list_format.h"
#include "state/status_format.h"

namespace manta::state {
namespace {

std::vector<std::string> ResourceLines(const std::map<std::string, double>& resources) {
  std::vector<std::string> lines;
  for (const auto& [name, v] : resources) lines.push_back(name + ": " + FormatQuantity(v));
  return lines;
}

}  // namespace

std::string FormatActorList(const std::vector<ActorView>& actors, int limit, absl::Time now, absl::TimeZone tz) {
  std::vector<std::string> headers = {"ACTOR_ID", "CLASS_NAME", "STATE",         "JOB_ID",  "NAME",
                                      "NODE_ID",  "PID",        "RAY_NAMESPACE", "RESTARTS"};
  std::vector<std::vector<std::vector<std::string>>> rows;
  for (const ActorView& a : actors) {
    rows.push_back({{a.actor_id},
                    {a.class_name},
                    {a.state},
                    {a.job_id},
                    {a.name},
                    {a.node_id},
                    {a.pid > 0 ? std::to_string(a.pid) : ""},
                    {a.ray_namespace},
                    {std::to_string(a.num_restarts)}});
  }
  return FormatListHeader(actors.size(), limit, now, tz) + FormatTable(headers, rows);
}

nlohmann::json ActorListJson(const std::vector<ActorView>& actors) {
  nlohmann::json out = nlohmann::json::array();
  for (const ActorView& a : actors) {
    nlohmann::json j;
    j["actor_id"] = a.actor_id;
    j["class_name"] = a.class_name;
    j["state"] = a.state;
    j["job_id"] = a.job_id;
    j["name"] = a.name;
    j["ray_namespace"] = a.ray_namespace;
    j["node_id"] = a.node_id;
    j["ip"] = a.ip;
    j["pid"] = a.pid;
    j["num_restarts"] = a.num_restarts;
    j["max_restarts"] = a.max_restarts;
    j["is_detached"] = a.detached;
    j["death_cause"] = a.death_cause;
    j["required_resources"] = a.resources;
    j["start_time_ms"] = a.start_time_ms;
    j["end_time_ms"] = a.end_time_ms;
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatActorListJson(const std::vector<ActorView>& actors) {
  return ActorListJson(actors).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string FormatTaskList(const std::vector<TaskView>& tasks, int64_t num_dropped, int limit, absl::Time now,
                           absl::TimeZone tz) {
  std::vector<std::string> headers = {"TASK_ID",           "ATTEMPT_NUMBER", "NAME",    "STATE",      "JOB_ID",
                                      "ACTOR_ID",          "TYPE",           "NODE_ID", "WORKER_PID", "ERROR_TYPE",
                                      "REQUIRED_RESOURCES"};
  std::vector<std::vector<std::vector<std::string>>> rows;
  for (const TaskView& t : tasks) {
    rows.push_back({{t.task_id},
                    {std::to_string(t.attempt)},
                    {t.name},
                    {t.state},
                    {t.job_id},
                    {t.actor_id},
                    {t.type},
                    {t.node_id},
                    {t.worker_pid > 0 ? std::to_string(t.worker_pid) : ""},
                    {t.error_type},
                    ResourceLines(t.resources)});
  }
  std::string out = FormatListHeader(tasks.size(), limit, now, tz);
  if (num_dropped > 0) {
    out = absl::StrCat(out.substr(0, out.find("Table:")), "Dropped: ", num_dropped,
                       " older task attempts were evicted by the GCS\n\n", out.substr(out.find("Table:")));
  }
  return out + FormatTable(headers, rows);
}

nlohmann::json TaskListJson(const std::vector<TaskView>& tasks) {
  nlohmann::json out = nlohmann::json::array();
  for (const TaskView& t : tasks) {
    nlohmann::json j;
    j["task_id"] = t.task_id;
    j["attempt_number"] = t.attempt;
    j["name"] = t.name;
    j["state"] = t.state;
    j["job_id"] = t.job_id;
    j["actor_id"] = t.actor_id;
    j["type"] = t.type;
    j["node_id"] = t.node_id;
    j["worker_id"] = t.worker_id;
    j["worker_pid"] = t.worker_pid;
    j["error_type"] = t.error_type;
    j["error_message"] = t.error_message;
    j["required_resources"] = t.resources;
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatTaskListJson(const std::vector<TaskView>& tasks) {
  return TaskListJson(tasks).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace manta::state
