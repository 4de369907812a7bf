// TaskEventBuffer: the task state changes a core worker reports to the GCS
// (what `manta list tasks` shows). On the task path a change is a small
// record appended under a lock: fixed-size ids, no protobuf. Once a second
// the owner of the buffer takes the records and sends them as
// AddTaskEvents requests.
//
// Records of one attempt (task id + attempt) taken together merge into one
// event exactly as the GCS merges events (later fields win; a finished or
// failed attempt does not go back to an earlier state), so the GCS ends up
// with what it would have built from every record, from about half as many
// events.
//
//   TaskEventBuffer events;
//   if (events.Record(spec, rpc::TaskEvent::RUNNING, nullptr, &where, nullptr)) ArmFlushTimer();
//   google::protobuf::Arena arena;
//   for (rpc::AddTaskEventsRequest* request : events.Take(&arena)) Send(*request);
//
// An executor's RUNNING record can be withdrawn once the task is done: the
// owner reports that attempt's end itself, so a task that ran within one
// flush window costs the executor nothing to report, while one still
// running at a flush is reported RUNNING.
//
//   TaskEventBuffer::Ticket ticket;
//   events.Record(spec, rpc::TaskEvent::RUNNING, nullptr, &where, nullptr, &ticket);
//   ... run it ...
//   events.Withdraw(ticket);  // a no-op once a Take has sent it
//
// Thread-safety: Record and Withdraw from any thread; Take from one thread
// at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "google/protobuf/arena.h"
#include "proto/gcs_service.pb.h"

namespace manta::core {

class TaskEventBuffer {
 public:
  // The GCS refuses a request holding more events than this
  // (TaskEventManager::kMaxEventsPerRequest).
  static constexpr int kMaxEventsPerRequest = 10000;
  // Longer names and error messages are cut to these sizes, which the GCS
  // accepts (it refuses a whole request for one field over its limit).
  static constexpr size_t kMaxNameBytes = 1024;
  static constexpr size_t kMaxErrorMessageBytes = 64 * 1024;

  // A task's resource demand, said once per attempt (with
  // SUBMITTED_TO_WORKER). Shared, immutable: the tasks of one scheduling
  // queue all point at the same one.
  using Resources = std::vector<std::pair<std::string, double>>;

  // Where a task was pushed to or runs; the ids are binary, as in
  // rpc::Address. Malformed ids are left out of the event.
  struct Location {
    std::string_view worker_id;
    std::string_view node_id;
    int pid = 0;
  };

  // Names one record until the next Take.
  struct Ticket {
    uint64_t take = 0;  // Takes before the record
    size_t index = 0;   // in entries_
    bool valid = false;
  };

  // Records that `spec`'s current attempt reached `state` now. `error`:
  // why it failed, if it did. Returns true when the buffer was empty before,
  // so the caller arms a flush. A spec without a well-formed task id is not
  // recorded (the GCS would refuse the request carrying it). `ticket`, when
  // given, names the record for Withdraw.
  bool Record(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
              const Location* where, std::shared_ptr<const Resources> resources, Ticket* ticket = nullptr);

  // Drops the record `ticket` names unless a Take has taken it already.
  void Withdraw(const Ticket& ticket);

  // Everything recorded so far, merged per attempt, in the order attempts
  // were first recorded, as requests of at most kMaxEventsPerRequest events,
  // allocated on `arena` (which must outlive them).
  std::vector<rpc::AddTaskEventsRequest*> Take(google::protobuf::Arena* arena);

  // Resources of `spec` in the form Record takes; null when it has none.
  static std::shared_ptr<const Resources> ResourcesOf(const rpc::TaskSpec& spec);

 private:
  struct Entry {
    TaskId task_id;
    JobId job_id;
    ActorId actor_id;    // nil: not an actor task
    WorkerId worker_id;  // nil: unknown
    NodeId node_id;      // nil: unknown
    int32_t pid = 0;
    int32_t attempt = 0;
    rpc::TaskSpec::Type type = rpc::TaskSpec::NORMAL_TASK;
    rpc::TaskEvent::State state = rpc::TaskEvent::PENDING_ARGS_AVAIL;
    int64_t timestamp_ms = 0;
    std::string name;
    std::shared_ptr<const Resources> resources;
    std::unique_ptr<rpc::ErrorInfo> error;
    bool withdrawn = false;
  };
  // Folds `later` into `held` as the GCS folds a later event into what it
  // holds.
  static void Merge(Entry& held, Entry&& later);
  static void ToProto(const Entry& e, rpc::TaskEvent* out);

  absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t takes_ ABSL_GUARDED_BY(mu_) = 0;
  // Take's thread only: the previous batch's storage, reused so steady
  // recording does not reallocate.
  std::vector<Entry> spare_;
};

}  // namespace manta::core
