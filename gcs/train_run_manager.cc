#include "gcs/train_run_manager.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/utf8.h"

namespace manta::gcs {
namespace {

using rpc::TrainRunAttemptInfo;
using rpc::TrainRunInfo;
using rpc::TrainWorkerInfo;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// `value` fits in `max` bytes and is valid UTF-8 (a string field must be).
absl::Status CheckText(const std::string& field, const std::string& value, size_t max) {
  if (value.size() > max) return Invalid(field, absl::StrCat("is longer than ", max, " bytes"));
  if (ValidUtf8(value) != value) return Invalid(field, "is not valid UTF-8");
  return absl::OkStatus();
}

// Empty, or exactly `size` bytes.
absl::Status CheckOptionalId(const std::string& field, const std::string& value, size_t size) {
  if (!value.empty() && value.size() != size) return Invalid(field, absl::StrCat("must be ", size, " bytes"));
  return absl::OkStatus();
}

bool IsLowerHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Names are short UTF-8 text; values are finite (and, for resources, not
// negative).
absl::Status CheckNumberMap(const std::string& field, const google::protobuf::Map<std::string, double>& m,
                            bool allow_negative) {
  for (const auto& [name, value] : m) {
    std::string key = absl::StrCat(field, "[", std::string(Utf8Prefix(ValidUtf8(name), 64)), "]");
    if (name.empty()) return Invalid(field, "has an empty name");
    if (auto s = CheckText(key, name, TrainRunManager::kMaxNameBytes); !s.ok()) return s;
    if (!std::isfinite(value)) return Invalid(key, "is not finite");
    if (!allow_negative && value < 0) return Invalid(key, "is negative");
  }
  return absl::OkStatus();
}

// A duration: finite and not negative.
absl::Status CheckSeconds(const std::string& field, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return Invalid(field, "must be a finite, non-negative number of seconds");
  return absl::OkStatus();
}

absl::Status ValidateWorker(const TrainWorkerInfo& w, const std::string& where) {
  if (!TrainWorkerInfo::Status_IsValid(w.status())) return Invalid(where + ".status", "is out of range");
  if (auto s = CheckOptionalId(where + ".node_id", w.node_id(), NodeId::kSize); !s.ok()) return s;
  if (auto s = CheckOptionalId(where + ".actor_id", w.actor_id(), ActorId::kSize); !s.ok()) return s;
  if (auto s = CheckText(where + ".node_ip", w.node_ip(), 255); !s.ok()) return s;
  if (auto s = CheckText(where + ".slice_name", w.slice_name(), TrainRunManager::kMaxNameBytes); !s.ok()) return s;
  if (w.pid() < 0) return Invalid(where + ".pid", "is negative");
  if (auto s = CheckSeconds(where + ".report_total_blocked_time_s", w.report_total_blocked_time_s()); !s.ok()) {
    return s;
  }
  return CheckNumberMap(where + ".resources", w.resources(), /*allow_negative=*/false);
}

absl::Status ValidateAttempt(const TrainRunAttemptInfo& a, const std::string& where) {
  if (!TrainRunAttemptInfo::State_IsValid(a.state())) return Invalid(where + ".state", "is out of range");
  if (auto s = CheckText(where + ".attempt_id", a.attempt_id(), TrainRunManager::kMaxNameBytes); !s.ok()) return s;
  if (auto s = CheckText(where + ".status_detail", a.status_detail(), TrainRunManager::kMaxStatusBytes); !s.ok()) {
    return s;
  }
  if (a.num_workers() < 0) return Invalid(where + ".num_workers", "is negative");
  if (a.workers_size() > TrainRunManager::kMaxWorkersPerAttempt) {
    return Invalid(where + ".workers", absl::StrCat("has more than ", TrainRunManager::kMaxWorkersPerAttempt));
  }
  for (int i = 0; i < a.workers_size(); ++i) {
    if (auto s = ValidateWorker(a.workers(i), absl::StrCat(where, ".workers[", i, "]")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateRun(const TrainRunInfo& run) {
  if (run.run_id().size() != 32 || !IsLowerHex(run.run_id())) {
    return Invalid("run.run_id", "must be 32 lowercase hex digits");
  }
  if (run.name().empty()) return Invalid("run.name", "is empty");
  if (auto s = CheckText("run.name", run.name(), TrainRunManager::kMaxNameBytes); !s.ok()) return s;
  if (run.job_id().size() != JobId::kSize) {
    return Invalid("run.job_id", absl::StrCat("must be ", JobId::kSize, " bytes"));
  }
  if (auto s = CheckOptionalId("run.controller_actor_id", run.controller_actor_id(), ActorId::kSize); !s.ok()) {
    return s;
  }
  if (!TrainRunInfo::State_IsValid(run.state())) return Invalid("run.state", "is out of range");
  if (auto s = CheckText("run.status_detail", run.status_detail(), TrainRunManager::kMaxStatusBytes); !s.ok()) {
    return s;
  }
  if (auto s = CheckText("run.latest_checkpoint", run.latest_checkpoint(), TrainRunManager::kMaxPathBytes); !s.ok()) {
    return s;
  }
  if (auto s = CheckText("run.storage_path", run.storage_path(), TrainRunManager::kMaxPathBytes); !s.ok()) return s;
  if (run.start_time_ms() < 0 || run.end_time_ms() < 0) return Invalid("run.start_time_ms/end_time_ms", "is negative");
  if (run.num_failures() < 0) return Invalid("run.num_failures", "is negative");
  if (run.max_failures() < -1) return Invalid("run.max_failures", "must be -1 (unlimited) or more");
  if (run.min_workers() < 0 || run.max_workers() < 0) return Invalid("run.min_workers/max_workers", "is negative");
  if (run.version() < 0) return Invalid("run.version", "is negative");
  if (auto s = CheckSeconds("run.worker_group_start_total_time_s", run.worker_group_start_total_time_s()); !s.ok()) {
    return s;
  }
  if (auto s = CheckSeconds("run.worker_group_shutdown_total_time_s", run.worker_group_shutdown_total_time_s());
      !s.ok()) {
    return s;
  }
  if (run.attempts_size() > TrainRunManager::kMaxAttempts) {
    return Invalid("run.attempts", absl::StrCat("has more than ", TrainRunManager::kMaxAttempts));
  }
  for (int i = 0; i < run.attempts_size(); ++i) {
    if (auto s = ValidateAttempt(run.attempts(i), absl::StrCat("run.attempts[", i, "]")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool ByStart(const TrainRunInfo* a, const TrainRunInfo* b) {
  if (a->start_time_ms() != b->start_time_ms()) return a->start_time_ms() < b->start_time_ms();
  return a->run_id() < b->run_id();
}

}  // namespace

absl::Status ValidateTrainRunReport(const rpc::ReportTrainRunRequest& request) {
  if (auto s = ValidateRun(request.run()); !s.ok()) return s;
  if (request.new_metrics_size() > TrainRunManager::kMaxNewMetricPoints) {
    return Invalid("new_metrics", absl::StrCat("has more than ", TrainRunManager::kMaxNewMetricPoints, " points"));
  }
  for (int i = 0; i < request.new_metrics_size(); ++i) {
    const rpc::TrainMetricPoint& p = request.new_metrics(i);
    std::string where = absl::StrCat("new_metrics[", i, "].metrics");
    if (p.metrics_size() > TrainRunManager::kMaxMetricsPerPoint) {
      return Invalid(where, absl::StrCat("has more than ", TrainRunManager::kMaxMetricsPerPoint, " metrics"));
    }
    if (auto s = CheckNumberMap(where, p.metrics(), /*allow_negative=*/true); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TrainRunManager::TrainRunManager(Store* store, const JobManager* jobs, Clock clock)
    : store_(store), jobs_(jobs), clock_(std::move(clock)) {}

bool TrainRunManager::IsTerminal(TrainRunInfo::State state) {
  return state == TrainRunInfo::FINISHED || state == TrainRunInfo::ERRORED || state == TrainRunInfo::ABORTED;
}

absl::Status TrainRunManager::Initialize() {
  MANTA_CHECK_THREAD(thread_);
  auto rows = store_->ReadAll(kTable);
  if (!rows.ok()) return rows.status();
  for (const auto& [key, value] : *rows) {
    TrainRunInfo info;
    if (!info.ParseFromString(value) || info.run_id() != key) {
      Logger("gcs")->warn("skipping a corrupt train run row in the store");
      continue;
    }
    runs_[key] = std::move(info);
  }
  Logger("gcs")->info("recovered {} train runs", runs_.size());
  return absl::OkStatus();
}

void TrainRunManager::HandleReportTrainRun(const rpc::ReportTrainRunRequest& request, rpc::ReportTrainRunReply*,
                                           rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateTrainRunReport(request); !s.ok()) return done(s);
  const TrainRunInfo& in = request.run();
  const JobId job = *JobId::FromBinary(in.job_id());
  const rpc::JobInfo* job_info = jobs_->Get(job);
  if (job_info == nullptr) return done(absl::FailedPreconditionError("no job " + job.Hex()));
  if (job_info->is_dead()) {
    return done(absl::FailedPreconditionError("job " + job.Hex() + " has finished; its runs are closed"));
  }
  auto it = runs_.find(in.run_id());
  if (it != runs_.end()) {
    const TrainRunInfo& stored = it->second;
    if (stored.job_id() != in.job_id()) {
      return done(absl::InvalidArgumentError(
          absl::StrCat("run ", in.run_id(), " belongs to job ", ToHex(stored.job_id()), ", not ", job.Hex())));
    }
    if (IsTerminal(stored.state()) || in.version() <= stored.version()) return done(absl::OkStatus());
  } else {
    EvictForNewRun();
    it = runs_.emplace(in.run_id(), TrainRunInfo()).first;
  }
  TrainRunInfo& run = it->second;
  google::protobuf::RepeatedPtrField<rpc::TrainMetricPoint> series;
  series.Swap(run.mutable_metrics());
  run = in;
  run.mutable_metrics()->Swap(&series);
  for (const rpc::TrainMetricPoint& p : request.new_metrics()) *run.add_metrics() = p;
  const int excess = run.metrics_size() - static_cast<int>(kMaxMetricPoints);
  if (excess > 0) run.mutable_metrics()->DeleteSubrange(0, excess);
  Persist(run, std::move(done));
}

void TrainRunManager::HandleListTrainRuns(const rpc::ListTrainRunsRequest& request, rpc::ListTrainRunsReply* reply,
                                          rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (!request.job_id().empty() && request.job_id().size() != JobId::kSize) {
    return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
  }
  if (request.limit() < 0) return done(absl::InvalidArgumentError("limit must not be negative"));
  std::vector<const TrainRunInfo*> order;
  for (const auto& [id, run] : runs_) {
    if (request.job_id().empty() || run.job_id() == request.job_id()) order.push_back(&run);
  }
  std::sort(order.begin(), order.end(), ByStart);
  size_t first = 0;
  if (request.limit() > 0 && order.size() > static_cast<size_t>(request.limit())) {
    first = order.size() - static_cast<size_t>(request.limit());
  }
  // Newest first, so the size budget drops the oldest.
  std::vector<TrainRunInfo> newest_first;
  size_t bytes = 0;
  for (size_t i = order.size(); i > first; --i) {
    TrainRunInfo run = *order[i - 1];
    if (!request.with_metrics()) run.clear_metrics();
    bytes += run.ByteSizeLong();
    if (bytes > kMaxListReplyBytes) break;
    newest_first.push_back(std::move(run));
  }
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) *reply->add_runs() = std::move(*it);
  done(absl::OkStatus());
}

void TrainRunManager::OnJobFinished(const JobId& job) {
  MANTA_CHECK_THREAD(thread_);
  const std::string binary = job.Binary();
  for (auto& [id, run] : runs_) {
    if (run.job_id() == binary && !IsTerminal(run.state())) AbortRun(run);
  }
}

void TrainRunManager::AbortRunsOfFinishedJobs() {
  MANTA_CHECK_THREAD(thread_);
  int aborted = 0;
  for (auto& [id, run] : runs_) {
    if (IsTerminal(run.state())) continue;
    auto job = JobId::FromBinary(run.job_id());
    const rpc::JobInfo* info = job.ok() ? jobs_->Get(*job) : nullptr;
    if (info != nullptr && !info->is_dead()) continue;
    AbortRun(run);
    ++aborted;
  }
  if (aborted > 0) Logger("gcs")->info("aborted {} train runs of jobs that ended while the GCS was down", aborted);
}

const TrainRunInfo* TrainRunManager::Get(const std::string& run_id) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second;
}

void TrainRunManager::AbortRun(TrainRunInfo& run) {
  const int64_t now_ms = absl::ToUnixMillis(clock_());
  run.set_state(TrainRunInfo::ABORTED);
  run.set_status_detail(run.status_detail().empty() ? std::string(kAbortedByJobEnd)
                                                    : absl::StrCat(kAbortedByJobEnd, ": ", run.status_detail()));
  run.set_end_time_ms(now_ms);
  for (TrainRunAttemptInfo& a : *run.mutable_attempts()) {
    if (a.state() != TrainRunAttemptInfo::PENDING && a.state() != TrainRunAttemptInfo::RUNNING) continue;
    a.set_state(TrainRunAttemptInfo::ABORTED);
    a.set_end_time_ms(now_ms);
    if (a.status_detail().empty()) a.set_status_detail(kAbortedByJobEnd);
    for (TrainWorkerInfo& w : *a.mutable_workers()) w.set_status(TrainWorkerInfo::DEAD);
  }
  run.set_version(run.version() + 1);
  Logger("gcs")->info("train run aborted run_id={} job_id={}", run.run_id(), ToHex(run.job_id()));
  Persist(run, nullptr);
}

void TrainRunManager::EvictForNewRun() {
  while (runs_.size() >= kMaxRuns) {
    const TrainRunInfo* oldest = nullptr;
    for (const auto& [id, run] : runs_) {
      if (IsTerminal(run.state()) && (oldest == nullptr || ByStart(&run, oldest))) oldest = &run;
    }
    if (oldest == nullptr) return;  // every run is live: keep them all
    std::string id = oldest->run_id();
    runs_.erase(id);
    store_->Delete(kTable, id, [id](const absl::Status& s) {
      if (!s.ok()) Logger("gcs")->error("cannot delete train run run_id={}: {}", id, s.ToString());
    });
  }
}

void TrainRunManager::Persist(const TrainRunInfo& run, rpc::Done done) {
  if (!done) {
    done = [id = run.run_id()](const absl::Status& s) {
      if (!s.ok()) Logger("gcs")->error("cannot persist train run run_id={}: {}", id, s.ToString());
    };
  }
  store_->Put(kTable, run.run_id(), run.SerializeAsString(), std::move(done));
}

}  // namespace manta::gcs
