// ActorSubmitter: actors from the caller's side. Registers the actors this
// process creates with the GCS, follows the state of every actor it calls
// (a long poll of the ACTOR channel), and pushes calls straight to the
// actor's worker in the order they were made, resent to a restarted actor
// while retries remain.
//
// Invariants:
//  * a call is pending from its submission until it ends (a reply, or a
//    typed failure), in the order it was made in; the calls pushed to the
//    current incarnation are a prefix of the pending ones;
//  * the actor sees wire numbers 0, 1, 2, ... per incarnation without a gap:
//    a call that failed after it was numbered is pushed again or sent as a
//    skip;
//  * a call's spec is either in its pending entry or in the one push that
//    carries it (`pushed`), never both.
//
// Threads: any. The actor table is behind mu_ rather than on the io loop:
// a call is pushed from the thread that makes it and its reply is settled on
// the gRPC thread that gets it, so a call in steady state wakes no other
// thread. The loop follows the actors' states and registers new actors.
// Pushes made under mu_ are started after it is released.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gcs/client/gcs_client.h"
#include "proto/gcs_service.pb.h"
#include "runtime/core_worker/submit_deps.h"

namespace manta::core {

class ActorSubmitter {
 public:
  static constexpr int kActorPollWaitMs = 30000;
  // A failed push is resent this much later: the GCS may meanwhile say the
  // worker died, and a push that fails at once must not spin.
  static constexpr absl::Duration kResendDelay = absl::Milliseconds(100);
  // Resends of a call to an unreachable worker the GCS still calls alive
  // that cost no retry: 10 s of them.
  static constexpr int kMaxFreeResends = 100;

  // `gcs`: the actor table and the ACTOR channel; its replies come on the
  // loop.
  ActorSubmitter(SubmitDeps deps, DependencyResolver* resolver, gcs::GcsClient* gcs)
      : deps_(deps), resolver_(resolver), gcs_(gcs) {}
  ActorSubmitter(const ActorSubmitter&) = delete;
  ActorSubmitter& operator=(const ActorSubmitter&) = delete;

  // This process's worker id; set before the first call.
  void set_self(const std::string& worker_id) { self_ = worker_id; }

  // Registers the actor of `creation` (an ACTOR_CREATION_TASK with its
  // actor id, options and caller), holding its arguments (and `contained`)
  // while it may (re)start. A named actor is registered before this returns
  // (the GCS decides whether the name is free); an anonymous one after its
  // owned arguments are ready, while calls to it queue. Any thread but the
  // io loop.
  // Returns the actor's id: the creation's, or (get_if_exists, the name
  // taken) the id of the actor holding the name, followed from now on.
  absl::StatusOr<ActorId> Create(rpc::TaskSpec creation, const std::vector<ObjectId>& contained)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `actor` with `spec` (an ACTOR_TASK): its return is expected, its
  // arguments held until it ends. An actor not known here (a handle from
  // elsewhere) is followed from now on.
  void Submit(const ActorId& actor, rpc::TaskSpec spec, const std::vector<ObjectId>& contained)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A push made here ended (its returns stored): settles it; the caller
  // starts `to_start` once it holds no lock.
  void OnPushDone(PushCall& call, std::vector<PushCall*>* to_start) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels call `task_id` (binary) of an actor followed here: the actor's
  // worker drops it if queued there (or when it arrives) and interrupts it
  // if running, having cancelled what it submitted when `recursive`.
  // NotFound when no pending call has that id; InvalidArgument with `force`
  // (as in Ray); FailedPrecondition while the actor has no worker yet.
  absl::Status Cancel(const std::string& task_id, bool force, bool recursive = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether call `task_id` (binary) to `actor` was made here and has not
  // ended.
  bool IsPending(const ActorId& actor, const std::string& task_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Stopping: no more polls and resends.
  void Stop() { stopping_.store(true); }

  // For tests and diagnostics: the actor's state as last heard (nullopt:
  // not followed) and its calls not yet ended.
  struct View {
    rpc::ActorInfo::State state;
    int pending = 0;
  };
  std::optional<View> Find(const ActorId& actor) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A call not yet completed. Its spec is here until pushed, then in the
  // latest PushCall carrying it (`pushed`), and back here if that push fails.
  struct PendingCall {
    rpc::TaskSpec spec;
    PushCall* pushed = nullptr;
    // Its arguments this process owns are not ready yet: it holds back the
    // calls made after it (`spec` is a copy to fail it by).
    bool resolving = false;
    // The sequence number the actor sees, given when first pushed: calls
    // that fail before being pushed leave no gap the actor would wait on.
    int64_t wire_sequence = -1;
    int retries_used = 0;
    // The incarnation (num_restarts) a failed push last used a retry in:
    // pushes that fail again before the GCS reports the restart are free.
    int64_t charged_incarnation = -1;
    int free_resends = 0;
    // The incarnation its latest push went to (-1: never pushed). A push to
    // another one is a new attempt: the GCS ends the old attempt when the
    // old incarnation's worker dies.
    int64_t pushed_incarnation = -1;
    const rpc::TaskSpec& Spec() const { return pushed != nullptr ? pushed->request.spec() : spec; }
  };
  struct Actor {
    ActorId id;
    rpc::ActorInfo info;
    int max_task_retries = 0;
    int64_t next_call = 0;           // order of the calls made
    int64_t next_wire_sequence = 0;  // of the calls pushed
    // Calls not yet completed, by the order they were made in.
    std::map<int64_t, PendingCall> pending;
    // Every pending call below the cursor was pushed to the current
    // incarnation; `resend` lists single calls to push again.
    int64_t send_cursor = 0;
    std::set<int64_t> resend;
    // A resend of a failed push is scheduled on the loop.
    bool resend_timer_armed = false;
    // Skips to push again (their push failed), by wire number: task id.
    std::map<int64_t, std::string> skips;
    std::string address;  // "ip:port" while ALIVE
  };
  static std::unique_ptr<Actor> NewActor(const ActorId& id, int max_task_retries);

  absl::StatusOr<ActorId> RegisterNamed(const rpc::TaskSpec& creation) ABSL_LOCKS_EXCLUDED(mu_);
  void RegisterOnLoop(rpc::TaskSpec creation);  // io loop
  // The actor failed before it could start: so does every call to it.
  void FailActor(const ActorId& id, const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // io loop: the call `order` to `actor` waits for its owned arguments,
  // holding back the calls after it; then it goes (or fails).
  void ResolveCall(const ActorId& actor, int64_t order, rpc::TaskSpec spec) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes the pushes `actor` is due (new calls, resends).
  void SendCalls(Actor& actor, std::vector<PushCall*>* to_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes `actor.resend` again a little later (from the loop).
  void ScheduleResend(Actor& actor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Settle(PushCall& call, std::vector<PushCall*>* to_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the actor a call it may hold others behind will never come.
  PushCall* SkipPush(const Actor& actor, const std::string& task_id, int64_t wire_sequence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static int64_t LowestUnacked(const Actor& actor);
  void OnActorInfo(const rpc::ActorInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  void OnNewIncarnation(Actor& a, const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PollActors();                                                // io loop
  void OnPoll(const absl::Status& s, const rpc::PollReply& reply);  // io loop
  void SubscribeActor(const ActorId& id);                           // io loop
  void FailCalls(Actor& actor, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SubmitDeps deps_;
  DependencyResolver* const resolver_;
  gcs::GcsClient* const gcs_;
  std::string self_;
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<ActorId, std::unique_ptr<Actor>> actors_ ABSL_GUARDED_BY(mu_);

  // io loop only.
  int64_t poll_sequence_ = 0;
  std::string poll_incarnation_;
  bool poll_running_ = false;
};

}  // namespace manta::core
