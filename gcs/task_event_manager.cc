#include "gcs/task_event_manager.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/id.h"
#include "common/resources.h"

namespace manta::gcs {
namespace {

absl::Status CheckId(const std::string& bytes, size_t size, bool required, const char* what) {
  if (bytes.empty() && !required) return absl::OkStatus();
  if (bytes.size() != size) return absl::InvalidArgumentError(absl::StrCat(what, " must be ", size, " bytes"));
  return absl::OkStatus();
}

bool Terminal(rpc::TaskEvent::State s) { return s == rpc::TaskEvent::FINISHED || s == rpc::TaskEvent::FAILED; }

}  // namespace

absl::Status ValidateTaskEvent(const rpc::TaskEvent& e) {
  if (auto s = CheckId(e.task_id(), TaskId::kSize, true, "task_id"); !s.ok()) return s;
  if (auto s = CheckId(e.job_id(), JobId::kSize, false, "job_id"); !s.ok()) return s;
  if (auto s = CheckId(e.node_id(), NodeId::kSize, false, "node_id"); !s.ok()) return s;
  if (auto s = CheckId(e.worker_id(), WorkerId::kSize, false, "worker_id"); !s.ok()) return s;
  if (auto s = CheckId(e.actor_id(), ActorId::kSize, false, "actor_id"); !s.ok()) return s;
  if (e.name().size() > 1024) return absl::InvalidArgumentError("name is too long");
  if (!rpc::TaskEvent::State_IsValid(e.state())) return absl::InvalidArgumentError("state is invalid");
  if (!rpc::TaskSpec::Type_IsValid(e.type())) return absl::InvalidArgumentError("type is invalid");
  if (e.attempt() < 0) return absl::InvalidArgumentError("attempt must not be negative");
  if (e.worker_pid() < 0) return absl::InvalidArgumentError("worker_pid must not be negative");
  if (e.error().message().size() > 64 * 1024) return absl::InvalidArgumentError("error message is too long");
  if (e.resources_size() > 1024) return absl::InvalidArgumentError("too many resources");
  std::map<std::string, double> resources(e.resources().begin(), e.resources().end());
  if (auto r = ResourceSet::FromMap(resources); !r.ok()) return r.status();
  return absl::OkStatus();
}

TaskEventManager::TaskEventManager(Publisher* publisher, size_t max_tasks)
    : publisher_(publisher), max_tasks_(max_tasks > 0 ? max_tasks : 1) {}

void TaskEventManager::HandleAddTaskEvents(const rpc::AddTaskEventsRequest& request, rpc::AddTaskEventsReply*,
                                           rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (request.events_size() > kMaxEventsPerRequest) {
    return done(absl::InvalidArgumentError(absl::StrCat("at most ", kMaxEventsPerRequest, " events per request")));
  }
  for (int i = 0; i < request.events_size(); ++i) {
    if (auto s = ValidateTaskEvent(request.events(i)); !s.ok()) {
      return done(absl::InvalidArgumentError(absl::StrCat("event ", i, ": ", s.message())));
    }
  }
  for (const auto& e : request.events()) Add(e);
  done(absl::OkStatus());
}

void TaskEventManager::Add(const rpc::TaskEvent& event) {
  MANTA_CHECK_THREAD(thread_);
  std::string key = event.task_id();
  uint32_t attempt = static_cast<uint32_t>(event.attempt());
  for (int shift = 24; shift >= 0; shift -= 8) key.push_back(static_cast<char>(attempt >> shift));
  auto it = tasks_.find(key);
  if (it == tasks_.end()) {
    if (!Terminal(event.state())) unfinished_.insert(key);
    tasks_.emplace(key, event);
    order_.push_back(std::move(key));
    while (tasks_.size() > max_tasks_) {
      tasks_.erase(order_.front());
      unfinished_.erase(order_.front());
      order_.pop_front();
      ++num_dropped_;
    }
    return;
  }
  rpc::TaskEvent& held = it->second;
  rpc::TaskEvent::State state = held.state();
  // An attempt's state only moves forward. Its events come from several
  // processes (the owner's pending and submitted, the executor's running),
  // each flushing on its own timer, so a flush of an earlier state can land
  // after a later one: it must not move the attempt back. An end is final
  // unless a later end corrects it.
  const bool advance = Terminal(event.state()) || (!Terminal(state) && event.state() >= state);
  if (!advance) {
    // A late event of an earlier state only fills what the record lacks
    // (where it ran, say): it does not overwrite what the later state said.
    rpc::TaskEvent merged = event;
    merged.clear_state();
    merged.clear_timestamp_ms();
    merged.MergeFrom(held);
    held = std::move(merged);
    return;
  }
  held.MergeFrom(event);
  held.set_state(event.state());
  if (Terminal(event.state())) unfinished_.erase(key);
}

int TaskEventManager::FailUnfinished(const std::function<bool(const rpc::TaskEvent&)>& matches,
                                     const rpc::ErrorInfo& error) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<std::string> ended;
  for (const std::string& key : unfinished_) {
    rpc::TaskEvent& held = tasks_.at(key);
    if (!matches(held)) continue;
    held.set_state(rpc::TaskEvent::FAILED);
    held.set_timestamp_ms(NowUnixMs());
    *held.mutable_error() = error;
    ended.push_back(key);
  }
  for (const std::string& key : ended) unfinished_.erase(key);
  return static_cast<int>(ended.size());
}

void TaskEventManager::ForEachTask(const std::function<void(const rpc::TaskEvent&)>& visit) const {
  MANTA_CHECK_THREAD(thread_);
  for (const auto& [key, e] : tasks_) visit(e);
}

void TaskEventManager::HandleListTasks(const rpc::ListTasksRequest& request, rpc::ListTasksReply* reply,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (!request.job_id().empty() && request.job_id().size() != JobId::kSize) {
    return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
  }
  size_t limit = request.limit() > 0 ? static_cast<size_t>(request.limit()) : order_.size();
  int64_t total = 0;
  for (const std::string& key : order_) {
    const bool full = static_cast<size_t>(reply->tasks_size()) >= limit;
    if (full && request.job_id().empty()) {
      total = static_cast<int64_t>(order_.size());  // every task counts
      break;
    }
    const rpc::TaskEvent& e = tasks_.at(key);
    if (!request.job_id().empty() && e.job_id() != request.job_id()) continue;
    ++total;
    if (!full) *reply->add_tasks() = e;
  }
  reply->set_total(total);
  reply->set_num_dropped(num_dropped_);
  done(absl::OkStatus());
}

void TaskEventManager::HandlePublishLogs(const rpc::PublishLogsRequest& request, rpc::PublishLogsReply*,
                                         rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  const rpc::LogBatch& b = request.batch();
  if (b.job_id().size() != JobId::kSize) {
    return done(absl::InvalidArgumentError(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
  }
  if (b.ip().size() > 255) return done(absl::InvalidArgumentError("ip is too long"));
  if (b.actor_name().size() > 1024) return done(absl::InvalidArgumentError("actor_name is too long"));
  if (b.pid() < 0) return done(absl::InvalidArgumentError("pid must not be negative"));
  if (b.lines_size() > kMaxLogLines) {
    return done(absl::InvalidArgumentError(absl::StrCat("at most ", kMaxLogLines, " lines per batch")));
  }
  size_t bytes = 0;
  for (const auto& line : b.lines()) bytes += line.size();
  if (bytes > kMaxLogBatchBytes) {
    return done(absl::InvalidArgumentError(absl::StrCat("a log batch holds at most ", kMaxLogBatchBytes, " bytes")));
  }
  if (b.lines_size() == 0) return done(absl::OkStatus());
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::LOGS);
  msg.set_key(b.job_id());
  *msg.mutable_log_batch() = b;
  publisher_->Publish(std::move(msg));
  done(absl::OkStatus());
}

}  // namespace manta::gcs
