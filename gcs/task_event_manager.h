// TaskEventManager: task state for `manta list tasks`, and the relay of
// worker output to drivers.
//
// Owns the latest known state of each task attempt (task id + attempt), in
// memory only, at most `max_tasks` of them: when full, the attempt first
// seen longest ago is evicted and counted in num_dropped. Events of one
// attempt merge: later fields overwrite earlier ones, and a finished or
// failed attempt does not go back to an earlier state (a late event only
// fills the fields its record lacks). The GCS's own events (Record) are
// those of actors' creation tasks.
//
// PublishLogs validates a LogBatch and publishes it on the LOGS channel with
// the job id as key, so a driver subscribes to its own job's output.
//
// Thread: the GCS loop thread.
#pragma once

#include <deque>
#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/publisher.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class TaskEventManager {
 public:
  static constexpr size_t kDefaultMaxTasks = 100000;
  static constexpr int kMaxEventsPerRequest = 10000;
  static constexpr size_t kMaxLogBatchBytes = 1 << 20;
  static constexpr int kMaxLogLines = 100000;

  explicit TaskEventManager(Publisher* publisher, size_t max_tasks = kDefaultMaxTasks);

  // InvalidArgument (and nothing stored) when any event is malformed.
  void HandleAddTaskEvents(const rpc::AddTaskEventsRequest& request, rpc::AddTaskEventsReply* reply, rpc::Done done);
  // Oldest first; limit <= 0 means all.
  void HandleListTasks(const rpc::ListTasksRequest& request, rpc::ListTasksReply* reply, rpc::Done done);
  // InvalidArgument for a bad job id or a batch over kMaxLogBatchBytes.
  void HandlePublishLogs(const rpc::PublishLogsRequest& request, rpc::PublishLogsReply* reply, rpc::Done done);

  // An event the GCS itself saw (an actor's creation), merged like the rest.
  void Record(const rpc::TaskEvent& event) { Add(event); }

  // Ends every attempt not yet ended whose record `matches` as FAILED with
  // `error`: what ran it is gone (its actor's process, its node, its job's
  // driver), so no event of its end will come. A real end reported later
  // still replaces this one. Returns how many ended. Only attempts not yet
  // ended are visited.
  int FailUnfinished(const std::function<bool(const rpc::TaskEvent&)>& matches, const rpc::ErrorInfo& error);

  size_t num_tasks() const { return tasks_.size(); }
  int64_t num_dropped() const { return num_dropped_; }
  // Every kept task, in no order, read in place (the metrics count them).
  void ForEachTask(const std::function<void(const rpc::TaskEvent&)>& visit) const;

 private:
  void Add(const rpc::TaskEvent& event);

  Publisher* const publisher_;
  const size_t max_tasks_;
  // Key: task id then the attempt as 4 bytes. order_ holds the same keys,
  // first seen first.
  absl::flat_hash_map<std::string, rpc::TaskEvent> tasks_;
  std::deque<std::string> order_;
  // The keys of attempts not yet FINISHED or FAILED.
  absl::flat_hash_set<std::string> unfinished_;
  int64_t num_dropped_ = 0;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Checks one event from a core worker; the error names the field.
absl::Status ValidateTaskEvent(const rpc::TaskEvent& event);

}  // namespace manta::gcs
