// ActorManager: the actor directory.
//
// Owns every actor's ActorInfo and creation TaskSpec, kept in the store's
// "actors" and "actor_specs" tables so a restarted GCS recovers them; the
// name directory (namespace + name -> actor, for actors not DEAD); and the
// index from worker id to the ALIVE actor it runs. Creation goes through the
// ActorScheduler. Every state change is persisted and published on the ACTOR
// channel with the actor id as key.
//
// States: PENDING_CREATION -> ALIVE -> (RESTARTING -> ALIVE)* -> DEAD. An
// actor whose worker or node dies restarts while max_restarts allows (-1:
// always), each restart counted in num_restarts and rerunning the
// constructor; otherwise it is DEAD with an ACTOR_DIED cause saying why. A
// DEAD actor stays DEAD and frees its name; at most `max_dead_actors` DEAD
// actors are kept, oldest dropped first. Non-detached actors die with their
// job.
//
// Each creation attempt (the first, then one per restart, numbered by
// num_restarts) is reported to the task event sink as the worker would
// report a task: PENDING_NODE_ASSIGNMENT when scheduled, then FINISHED where
// the constructor ran, or FAILED with why. The creation spec is pushed with
// that attempt number, so the worker's own RUNNING record merges with them.
//
// Thread: the GCS loop thread.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/id.h"
#include "common/recent_set.h"
#include "common/rpc/done.h"
#include "common/rpc/reply_cache.h"
#include "common/thread_checker.h"
#include "gcs/actor_scheduler.h"
#include "gcs/core_worker_client.h"
#include "gcs/job_manager.h"
#include "gcs/publisher.h"
#include "gcs/raylet_client.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class ActorManager {
 public:
  static constexpr char kActorTable[] = "actors";
  static constexpr char kSpecTable[] = "actor_specs";
  static constexpr size_t kDefaultMaxDeadActors = 10000;
  static constexpr size_t kMaxSpecBytes = 16 << 20;

  // `jobs` may be null (then any job is taken as alive).
  ActorManager(Store* store, Publisher* publisher, ActorScheduler* scheduler, RayletClientPool* raylets,
               CoreWorkerClientPool* workers, const JobManager* jobs, size_t max_dead_actors = kDefaultMaxDeadActors);

  // Loads both tables. Call after the node table is recovered: actors
  // PENDING_CREATION or RESTARTING are scheduled again, and ALIVE ones whose
  // node is gone restart or die.
  absl::Status Initialize();

  // InvalidArgument for a malformed creation task; AlreadyExists when another
  // live actor holds the name in the namespace (unless the creation asks
  // get_if_exists: the reply then holds that actor, whose id differs from
  // the request's, and nothing is registered); FailedPrecondition when the
  // job finished. Idempotent by actor id: a known id replies with the
  // actor as it is. Replies once the actor is durable.
  void HandleRegisterActor(const rpc::RegisterActorRequest& request, rpc::RegisterActorReply* reply, rpc::Done done);
  // NotFound for an unknown id.
  void HandleGetActorInfo(const rpc::GetActorInfoRequest& request, rpc::GetActorInfoReply* reply, rpc::Done done);
  // NotFound unless a live actor holds the name.
  void HandleGetNamedActor(const rpc::GetNamedActorRequest& request, rpc::GetNamedActorReply* reply, rpc::Done done);
  // Registration order; limit <= 0 means all.
  void HandleListActors(const rpc::ListActorsRequest& request, rpc::ListActorsReply* reply, rpc::Done done);
  // Kills (or, worker_died, reports the death of) an actor. NotFound for an
  // unknown id; killing a DEAD actor is OK. A retry (the same request_id)
  // changes nothing: a kill with restart restarts the actor once.
  void HandleKillActor(const rpc::KillActorRequest& request, rpc::KillActorReply* reply, rpc::Done done);
  // A raylet's worker exited: published on WORKER; unless its lease had
  // ended before (held_no_lease), its actor, if any, restarts or dies.
  void HandleReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request, rpc::ReportWorkerFailureReply* reply,
                                 rpc::Done done);

  // Wired to NodeManager's dead listener (after the scheduler's).
  void OnNodeDead(const rpc::NodeInfo& node);
  // Wired to JobManager's finished listener.
  void OnJobFinished(const rpc::JobInfo& job);
  // The group was removed: its actors die (no restart).
  void OnPlacementGroupRemoved(const std::string& placement_group_id);

  // Where creation attempts are reported (`manta list tasks`).
  using TaskEventSink = std::function<void(const rpc::TaskEvent&)>;
  void SetTaskEventSink(TaskEventSink sink) { task_events_ = std::move(sink); }
  // Told when an actor's process is gone (it restarts or dies), with the
  // error its calls still under way end with.
  using StoppedSink = std::function<void(const ActorId&, const rpc::ErrorInfo&)>;
  void SetStoppedSink(StoppedSink sink) { stopped_ = std::move(sink); }

  // Null for an unknown actor.
  const rpc::ActorInfo* Get(const ActorId& actor) const;
  size_t num_actors() const { return actors_.size(); }
  // Every actor, in no order, read in place (the metrics count them).
  void ForEachActor(const std::function<void(const rpc::ActorInfo&)>& visit) const;

 private:
  struct Actor {
    rpc::ActorInfo info;
    rpc::TaskSpec spec;
    uint64_t order = 0;     // registration order, for listing
    bool creating = false;  // an attempt was reported pending and has not ended
  };
  using NameKey = std::pair<std::string, std::string>;  // namespace, name

  void Schedule(const ActorId& id);
  void OnCreation(const ActorId& id, ActorCreationResult result);
  // The worker or node running the actor is gone: restart or die.
  void RestartOrDie(const ActorId& id, const std::string& why);
  void Die(const ActorId& id, const std::string& why);
  // Tells the worker of an ALIVE actor to stop and returns its lease.
  void StopWorker(const Actor& actor, bool no_restart);
  // Forgets which worker runs the actor.
  void Detach(Actor& actor);
  void PersistAndPublish(const Actor& actor, rpc::Done done);
  // Reports the current creation attempt in `state`; `r` says where it ran
  // (FINISHED) and `error` why it did not (FAILED).
  void ReportCreation(Actor& actor, rpc::TaskEvent::State state, const ActorCreationResult* r = nullptr,
                      const rpc::ErrorInfo* error = nullptr);
  void TrimDead();

  Store* const store_;
  Publisher* const publisher_;
  ActorScheduler* const scheduler_;
  RayletClientPool* const raylets_;
  CoreWorkerClientPool* const workers_;
  const JobManager* const jobs_;
  const size_t max_dead_actors_;

  absl::flat_hash_map<ActorId, Actor> actors_;
  absl::flat_hash_map<std::string, ActorId> by_worker_;  // worker id -> ALIVE actor
  absl::flat_hash_map<NameKey, ActorId> names_;          // actors not DEAD
  std::deque<ActorId> dead_order_;                       // DEAD actors, oldest first

  // Workers whose exit was published (a retried report publishes nothing),
  // the latest kReportedWorkers.
  static constexpr size_t kReportedWorkers = 4096;
  RecentSet reported_{kReportedWorkers};

  uint64_t next_order_ = 0;
  TaskEventSink task_events_;
  StoppedSink stopped_;
  rpc::ReplyCache<rpc::KillActorReply> kills_;  // by request_id
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Checks an actor creation task from outside; the error names the field.
absl::Status ValidateActorCreationSpec(const rpc::TaskSpec& spec);

}  // namespace manta::gcs
