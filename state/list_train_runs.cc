#include "state/list_train_runs.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "state/list_format.h"

namespace manta::state {
namespace {

// A table cell line: the text up to its first line break.
std::string FirstLine(const std::string& s) { return s.substr(0, s.find_first_of("\r\n")); }

int WorkerCount(const TrainAttemptView& a) {
  return a.num_workers > 0 ? a.num_workers : static_cast<int>(a.workers.size());
}

std::string Failures(const TrainRunView& r) {
  return absl::StrCat(r.num_failures, "/", r.max_failures < 0 ? "inf" : std::to_string(r.max_failures));
}

std::vector<std::string> AttemptLines(const TrainRunView& r) {
  std::vector<std::string> lines;
  for (const TrainAttemptView& a : r.attempts) {
    lines.push_back(absl::StrCat(a.attempt_id, " ", a.status, " workers=", WorkerCount(a)));
  }
  return lines;
}

std::vector<std::string> WorkerLines(const TrainRunView& r) {
  std::vector<std::string> lines;
  if (r.attempts.empty()) return lines;
  for (const TrainWorkerView& w : r.attempts.back().workers) {
    std::string line = absl::StrCat(w.world_rank, ": ", w.node_ip.empty() ? "-" : w.node_ip, " pid=", w.pid);
    if (w.slice_id >= 0 || !w.slice_name.empty()) absl::StrAppend(&line, " slice=", w.slice_id, "/", w.slice_name);
    absl::StrAppend(&line, " ", w.status);
    lines.push_back(std::move(line));
  }
  return lines;
}

// Null for an absent optional field, as Ray's API has it.
nlohmann::json OrNull(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }
nlohmann::json OrNull(int64_t ms) { return ms == 0 ? nlohmann::json() : nlohmann::json(ms); }

nlohmann::json WorkerJson(const TrainWorkerView& w) {
  nlohmann::json j;
  j["world_rank"] = w.world_rank;
  j["local_rank"] = w.local_rank;
  j["node_rank"] = w.node_rank;
  j["node_id"] = w.node_id;
  j["node_ip"] = w.node_ip;
  j["pid"] = w.pid;
  j["actor_id"] = w.actor_id;
  j["status"] = w.status;
  j["slice_id"] = w.slice_id;
  j["slice_name"] = w.slice_name;
  return j;
}

nlohmann::json AttemptJson(const TrainAttemptView& a) {
  nlohmann::json workers = nlohmann::json::array();
  for (const TrainWorkerView& w : a.workers) workers.push_back(WorkerJson(w));
  nlohmann::json j;
  j["attempt_id"] = a.attempt_id;
  j["status"] = a.status;
  j["status_detail"] = OrNull(a.status_detail);
  j["start_time_ms"] = a.start_time_ms;
  j["end_time_ms"] = OrNull(a.end_time_ms);
  j["workers"] = std::move(workers);
  return j;
}

}  // namespace

std::string FormatTrainRunList(const std::vector<TrainRunView>& runs, int limit, bool detail, absl::Time now,
                               absl::TimeZone tz) {
  std::vector<std::string> headers = {"RUN_ID",  "NAME",     "STATE",         "JOB_ID",           "ATTEMPTS",
                                      "WORKERS", "FAILURES", "STATUS_DETAIL", "LATEST_CHECKPOINT"};
  std::vector<std::vector<std::vector<std::string>>> rows;
  for (const TrainRunView& r : runs) {
    std::vector<std::string> attempts, workers;
    if (detail) {
      attempts = AttemptLines(r);
      workers = WorkerLines(r);
    } else {
      attempts = {std::to_string(r.attempts.size())};
      workers = {r.attempts.empty() ? "" : std::to_string(WorkerCount(r.attempts.back()))};
    }
    rows.push_back({{r.id},
                    {r.name},
                    {r.status},
                    {r.job_id},
                    attempts,
                    workers,
                    {Failures(r)},
                    {FirstLine(r.status_detail)},
                    {r.latest_checkpoint}});
  }
  return FormatListHeader(runs.size(), limit, now, tz) + FormatTable(headers, rows);
}

nlohmann::json TrainRunListJson(const std::vector<TrainRunView>& runs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TrainRunView& r : runs) {
    nlohmann::json attempts = nlohmann::json::array();
    for (const TrainAttemptView& a : r.attempts) attempts.push_back(AttemptJson(a));
    nlohmann::json j;
    j["id"] = r.id;
    j["name"] = r.name;
    j["job_id"] = r.job_id;
    j["controller_actor_id"] = r.controller_actor_id;
    j["status"] = r.status;
    j["status_detail"] = OrNull(r.status_detail);
    j["start_time_ms"] = r.start_time_ms;
    j["end_time_ms"] = OrNull(r.end_time_ms);
    j["attempts"] = std::move(attempts);
    j["num_failures"] = r.num_failures;
    j["max_failures"] = r.max_failures;
    j["latest_checkpoint"] = OrNull(r.latest_checkpoint);
    if (r.with_metrics) {
      nlohmann::json metrics = nlohmann::json::array();
      for (const TrainMetricView& m : r.metrics) {
        nlohmann::json point = m.values;
        point["time_ms"] = m.time_ms;
        point["step"] = m.step;
        metrics.push_back(std::move(point));
      }
      j["metrics"] = std::move(metrics);
    }
    out.push_back(std::move(j));
  }
  // Text from the GCS is valid UTF-8; replace, never throw, if it is not.
  return out;
}

std::string FormatTrainRunListJson(const std::vector<TrainRunView>& runs) {
  return TrainRunListJson(runs).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace manta::state
