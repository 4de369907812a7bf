// ElasticDriver: the controller's loop for an elastic run (ScalingConfig
// num_workers {min, max} of whole slices).
//
// It holds whole slices one by one (HeldSlice), from `min` up to `max`, and
// runs one group (an "epoch") of workers over the slices it holds. It acts
// on events: the GCS's node events (a host dead, draining, or alive again),
// the workers' own ends, their arrivals after a group and a group's pause.
//  * A host of a held slice dies: the group is interrupted (its collectives
//    fail at once), the slice is given back, and the survivors re-form a
//    smaller group. Where every slice holds the whole state (data
//    parallelism across slices) they keep it in memory and redo only the
//    interrupted step; otherwise every worker restores the latest committed
//    checkpoint, resharded.
//  * A host drains (a preemption notice): the group finishes its step in
//    flight, pauses, and re-forms without that slice: no step is lost.
//  * A slice is whole and free again: it is reserved and its workers
//    started while the group trains; at the next step boundary the group
//    pauses and re-forms with it, the new workers taking the state from a
//    peer slice over the collectives.
//  * Below `min` slices the run waits (RESCHEDULING) for slices to return,
//    up to the scheduling timeout; survivors that hold the state wait in
//    memory.
//  * A worker's own error (its loop threw, or its process died on a host
//    that lives) counts against max_failures and restarts the run from the
//    latest committed checkpoint. Resizes and drains do not count.
// Every decision is logged with its reason and the time since its event.
//
// Two things poll besides. Run wakes every second (kTick) for its
// deadlines (a dead worker's grace for news of its host, the survivors'
// arrival timeout, the scheduling timeout) and, while it waits for slices,
// to see whether its demand was placed and to retry every few seconds. The
// run watcher, while workers run, waits on their Run calls in rounds of at
// most 200 ms (kWatchRound), so that workers started meanwhile are watched
// too; with no worker running it sleeps until one starts.
//
// Workers are in-place resizable when their loop keeps its state across
// groups (internal::CommitStep and AwaitNextGroup, as RunMaxText does);
// any other loop is restarted from the latest committed checkpoint at the
// new size, as Ray does.
//
// It sees its controller only as a RunControl (run_control.h).
//
// Threads: Run on the controller's Run thread; Await and OnPaused on other
// actor threads; node events and worker ends (from the run watcher's
// thread) arrive on threads of their own and are queued for Run. State
// shared with them is behind mu_.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "manta/state.h"
#include "train/held_slice.h"
#include "train/protocol.h"
#include "train/run_control.h"

namespace manta::train {

class TrainController;

// Seconds from `t` to now.
inline double Since(absl::Time t) { return absl::ToDoubleSeconds(absl::Now() - t); }

class ElasticDriver {
 public:
  // `control` (the controller that owns the driver) outlives it; `self` is
  // the controller's handle, for the workers.
  ElasticDriver(RunControl* control, ActorHandle<TrainController> self);
  ~ElasticDriver();

  // The whole run; returns its outcome.
  RunOutcome Run();
  // A worker whose group ended: blocks until the next group is planned.
  AwaitReply Await(const AwaitRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A round of the current group completed with a pause.
  void OnPaused() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Event {
    enum Kind { kNode, kRunEnded, kArrived, kPaused };
    Kind kind = kNode;
    NodeEvent node;
    WorkerKey key;  // kRunEnded, kArrived
    absl::Status status;
    absl::Time at;
    ObjectId run;  // kRunEnded: which Run call ended
  };
  enum class SliceRole { kActive, kJoining, kLeaving };
  struct Held {
    std::unique_ptr<HeldSlice> slice;
    SliceRole role = SliceRole::kJoining;
  };

  static Event MakeEvent(Event::Kind kind, WorkerKey key, absl::Status status);
  void Post(Event e) ABSL_LOCKS_EXCLUDED(mu_);
  // The run watcher's thread: queues kRunEnded as the workers' Run calls
  // end; sleeps while no worker runs; returns once stopping_.
  void WatchRuns();
  void Handle(const Event& e);
  void HandleNode(const NodeEvent& e);
  void HandleRunEnded(const Event& e);
  // A worker died while its host still looked alive: a host dies before the
  // GCS says so, so wait for that news up to kHostGrace; then it was the
  // worker's own failure.
  void CheckSuspects();
  // Moves the run on: re-forms when every expected worker arrived, grows
  // when a slice is free, starts when enough slices are back.
  void Progress();

  // Reserves up to `want` free slices, one by one, and starts their workers
  // (as joiners); returns how many it reserved and started. A slice that
  // cannot be had ends the tries; one whose workers fail to start is given
  // back.
  int AcquireSlices(int want);
  // A host of held slice `name` died (`why`, at `at`): ends the group at
  // once and drops the slice.
  void LoseSlice(const std::string& name, const std::string& why, absl::Time at);
  // Ends the current group now (interrupting its workers) or at its next
  // step boundary (a pause).
  void EndGroup(const std::string& why, absl::Time at, bool now);
  // Forms the next group over the active and joining slices.
  void Reform();
  // While waiting: a group asking for the head of a whole slice, so `manta
  // status` shows what the run waits for; its placement says one is free.
  void CreateDemand();
  bool DemandPlaced();
  void DropDemand();
  // Commits the checkpoint every worker of the ended group reported on
  // arrival, if they all did (`everyone` arrived).
  void CommitArrivedCheckpoint(const std::map<WorkerKey, AwaitRequest>& arrived, bool everyone);
  // Starts group epoch_ + 1 over `order` (slice names): workers of active
  // slices go on with `survive`, those of joining slices with `join`. A
  // worker that arrived is answered through its Await; any other is started.
  void StartGroup(const std::vector<std::string>& order, const JoinInstruction& survive, const JoinInstruction& join);
  // Kills everything and starts over from the latest committed checkpoint.
  // A failure that exceeds max_failures ends the run instead, naming
  // `failed` (the workers whose errors it was) in its result.
  void RestartAll(const std::string& why, bool counts_as_failure, std::vector<WorkerFailure> failed = {});
  // Worker `key`'s loop failed with `status` (its own error, not its
  // host's death): counts against max_failures and restarts.
  void WorkerFailed(const WorkerKey& key, const absl::Status& status);
  // Gives back slice `name` (its workers are killed).
  void Drop(const std::string& name);
  void Finish(const absl::Status& status);

  // The group's contexts and environments over `order` (slice names, in
  // rank order): workers of joining slices get `joiners`, the others
  // `survivors`.
  std::vector<std::pair<WorkerKey, WorkerRunRequest>> PlanGroup(const std::vector<std::string>& order,
                                                                const JoinInstruction& survivors,
                                                                const JoinInstruction& joiners);
  std::string DescribeNode(const std::string& node_id) const;

  RunControl* const c_;
  const ActorHandle<TrainController> self_;
  const int hosts_;  // per slice
  const int min_slices_, max_slices_;

  // The Run thread's.
  std::unique_ptr<NodeWatch> watch_;
  std::thread run_watcher_;
  std::string attempt_id_;
  bool waiting_ = true;   // no group runs: waiting for slices (or starting)
  bool pausing_ = false;  // the current group ends at its next step boundary
  bool want_growth_ = false;
  absl::Time growth_event_;  // the latest node-alive event
  std::string growth_node_;
  std::string reform_why_;
  absl::Time reform_event_;
  absl::Time waiting_since_;
  bool done_ = false;
  RunOutcome outcome_;
  int group_size_ = 0;              // workers of the last group started
  std::map<WorkerKey, int> ranks_;  // world rank of each worker of the current group
  // While waiting for slices: a pending group asking for a slice head, so
  // `manta status` shows what the run waits for; removed before reserving.
  std::optional<PlacementGroup> demand_;
  absl::Time last_try_;           // of reserving slices while waiting
  std::set<WorkerKey> finished_;  // workers whose loop returned OK in this group
  struct Suspect {
    WorkerKey key;
    absl::Status status;
    absl::Time at;
  };
  std::vector<Suspect> suspects_;

  absl::Mutex mu_;
  std::map<std::string, Held> slices_ ABSL_GUARDED_BY(mu_);  // by slice name: rank order
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;           // the group is over; its workers arrive
  std::set<WorkerKey> members_ ABSL_GUARDED_BY(mu_);  // workers of the current group
  std::map<WorkerKey, AwaitRequest> arrived_ ABSL_GUARDED_BY(mu_);
  std::map<WorkerKey, AwaitReply> plans_ ABSL_GUARDED_BY(mu_);  // for arrived workers
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::train
