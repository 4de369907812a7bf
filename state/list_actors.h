// `manta list actors` and `manta list tasks`: the GCS's actor and task tables
// in the layout of `ray list actors` / `ray list tasks`.
//
//   std::cout << FormatActorList(actors, absl::Now(), absl::LocalTimeZone());
//
//   ======== List: 2026-04-21 10:20:20.945431 ========
//   Stats:
//   ------------------------------
//   Total: 1
//
//   Table:
//   ------------------------------
//       ACTOR_ID  CLASS_NAME  STATE  JOB_ID    NAME     NODE_ID  PID   RAY_NAMESPACE  RESTARTS
//    0  9f1c...   Counter     ALIVE  00000001  counter  6b1f...  4321                 0
//
// Plain types only, so formatting and its tests need neither gRPC nor
// protobuf; state/gcs_reads.h fetches them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace manta::state {

struct ActorView {
  std::string actor_id;  // hex, as every id below
  std::string class_name;
  std::string state;  // PENDING_CREATION, ALIVE, RESTARTING, DEAD, ...
  std::string job_id;
  std::string name;
  std::string ray_namespace;
  std::string node_id;  // empty unless placed
  std::string ip;
  int pid = 0;
  int num_restarts = 0;
  int max_restarts = 0;  // -1: unlimited
  bool detached = false;
  std::string death_cause;  // DEAD: why
  std::map<std::string, double> resources;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
};

struct TaskView {
  std::string task_id;
  int attempt = 0;
  std::string name;
  std::string state;  // PENDING_ARGS_AVAIL ... FINISHED, FAILED
  std::string job_id;
  std::string actor_id;
  std::string type;  // NORMAL_TASK, ACTOR_CREATION_TASK, ACTOR_TASK
  std::string node_id;
  std::string worker_id;
  int worker_pid = 0;
  std::string error_type;  // empty unless failed
  std::string error_message;
  std::map<std::string, double> resources;
};

// `limit` is what was asked for: when `total` reached it, a note says the
// list may be truncated, as Ray's does.
std::string FormatActorList(const std::vector<ActorView>& actors, int limit, absl::Time now, absl::TimeZone tz);
std::string FormatActorListJson(const std::vector<ActorView>& actors);
// The same as a JSON array (the dashboard's State API serves it).
nlohmann::json ActorListJson(const std::vector<ActorView>& actors);

// `num_dropped`: task attempts the GCS evicted to stay within its bound.
std::string FormatTaskList(const std::vector<TaskView>& tasks, int64_t num_dropped, int limit, absl::Time now,
                           absl::TimeZone tz);
std::string FormatTaskListJson(const std::vector<TaskView>& tasks);
// The same as a JSON array (the dashboard's State API serves it).
nlohmann::json TaskListJson(const std::vector<TaskView>& tasks);

}  // namespace manta::state
