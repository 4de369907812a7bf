#include "train/run_recorder.h"

#include <cstdio>

#include "absl/time/clock.h"

namespace manta::train {
namespace {

constexpr size_t kMaxPendingPoints = 10000;
constexpr absl::Duration kMetricsPeriod = absl::Seconds(1);

}  // namespace

RunRecorder::RunRecorder(state::TrainRun initial) : run_(std::move(initial)) {
  run_.version = 1;
  urgent_ = true;
  thread_ = std::thread([this] { Loop(); });
}

RunRecorder::~RunRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  SendOnce();  // whatever the thread had not sent yet
}

void RunRecorder::Update(const std::function<void(state::TrainRun&)>& change) {
  absl::MutexLock lock(&mu_);
  change(run_);
  ++run_.version;
  urgent_ = true;
}

void RunRecorder::UpdateLater(const std::function<void(state::TrainRun&)>& change) {
  absl::MutexLock lock(&mu_);
  change(run_);
  ++run_.version;
}

void RunRecorder::AddMetrics(int64_t step, const std::map<std::string, double>& metrics) {
  absl::MutexLock lock(&mu_);
  state::TrainMetricPoint p;
  p.time_ms = absl::ToUnixMillis(absl::Now());
  p.step = step;
  p.metrics = metrics;
  pending_points_.push_back(std::move(p));
  if (pending_points_.size() > kMaxPendingPoints) pending_points_.erase(pending_points_.begin());
  ++run_.version;
}

state::TrainRun RunRecorder::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return run_;
}

void RunRecorder::Flush() {
  int64_t target;
  {
    absl::MutexLock lock(&mu_);
    target = run_.version;
    urgent_ = true;
  }
  absl::MutexLock lock(&mu_);
  auto sent = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sent_version_ >= target || stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&sent), absl::Seconds(10));
}

bool RunRecorder::SendOnce() {
  state::TrainRun run;
  std::vector<state::TrainMetricPoint> points;
  {
    absl::MutexLock lock(&mu_);
    if (run_.version <= sent_version_) return false;
    run = run_;
    points.swap(pending_points_);
    urgent_ = false;
    sending_version_ = run.version;
  }
  absl::Status s = state::TryReportTrainRun(run, points);
  absl::MutexLock lock(&mu_);
  sending_version_ = -1;
  if (s.ok()) {
    sent_version_ = std::max(sent_version_, run.version);
    return true;
  }
  std::fprintf(stderr, "could not record the run in the GCS (will retry): %s\n", s.ToString().c_str());
  // Keep the points for the next send, oldest first.
  points.insert(points.end(), pending_points_.begin(), pending_points_.end());
  pending_points_.swap(points);
  if (pending_points_.size() > kMaxPendingPoints) {
    pending_points_.erase(pending_points_.begin(), pending_points_.end() - kMaxPendingPoints);
  }
  sent_version_ = std::max(sent_version_, run.version);  // so Flush does not wait on a GCS that is away
  return true;
}

void RunRecorder::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return urgent_ || stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), kMetricsPeriod);
      if (stopping_) return;
    }
    SendOnce();
  }
}

}  // namespace manta::train
