// ObjectService: values between processes, for one core worker.
//
// Reading: Get and a task's reference arguments take a value from the
// local store, or fetch it from its owner into the store first (an owner
// that cannot be reached fails the read with OwnerDied; a value not ready
// within the wait stays pending). Wait watches the owners of the values it
// lacks without blocking, all at once, each watch settling its entry in the
// store (the value fetched, or marked ready at the owner) while it holds a
// reference.
// Serving: an owner answers GetObjectStatus from its store (at once when
// ready or unknown; else when ready or after the caller's wait, whichever
// comes first) and streams large values (ValueToSend); a worker keeps a
// large return for its owner (HoldForOwner) until the owner has it all
// (Sent).
//
// Invariants: a status call is answered exactly once; a held return is
// erased from the store once sent whole, and only then.
//
// Threads: any; reads block, so never on the io loop. One lock, taken
// before the store's and never held across a call to the owners.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "manta/internal/core_worker.h"
#include "proto/core_worker.pb.h"
#include "runtime/core_worker/memory_store.h"

namespace manta::rpc {
class CallCanceller;
}

namespace manta::core {

// What the service asks of other processes and of time. Over gRPC and the
// io loop in a core worker; faked in tests.
class OwnerClient {
 public:
  virtual ~OwnerClient() = default;
  // Blocking: the value of `id` from the process at `owner` ("ip:port"),
  // waiting up to `wait` for it to be ready there. Errors carry their type:
  // OwnerDied (unreachable), Timeout (not ready), ObjectLost (not there).
  virtual absl::StatusOr<Value> Fetch(const std::string& owner, const ObjectId& id, absl::Duration wait) = 0;
  // The same without blocking: `done` runs once, on a thread that must not
  // block, with the value (`fetch`), nullopt once it is ready there
  // (without `fetch`: only asks whether it is), or the errors of Fetch
  // (the value's own error too).
  using Watched = std::function<void(absl::StatusOr<std::optional<Value>>)>;
  virtual void Watch(const std::string& owner, const ObjectId& id, absl::Duration wait, bool fetch, Watched done) = 0;
  // Runs `fn` once, `delay` from now, on a thread that must not block.
  virtual void RunAfter(absl::Duration delay, std::function<void()> fn) = 0;
};

class ObjectService {
 public:
  // An owner holds one of Wait's status calls at most this long; the watch
  // then asks again while the Wait lasts.
  static constexpr absl::Duration kMaxWatchWait = absl::Seconds(10);

  ObjectService(MemoryStore* store, OwnerClient* owners) : store_(store), owners_(owners) {}
  ObjectService(const ObjectService&) = delete;
  ObjectService& operator=(const ObjectService&) = delete;

  // This process's address; set before the service is shared (again when
  // it learns its node).
  void set_self(const rpc::Address& self) {
    self_ = self;
    self_key_ = self.SerializeAsString();
  }

  // ---- reading ----
  // The values of `refs`, each by `timeout` (InfiniteDuration: no limit):
  // the value, its error, or DeadlineExceeded.
  std::vector<absl::StatusOr<Value>> Get(const std::vector<ObjectRefInfo>& refs, absl::Duration timeout);
  // Which of `refs` are ready, once `num_ready` are or by `timeout`. A value
  // owned elsewhere counts once it is here, fetched from its owner as soon
  // as it is ready there (`fetch_local`), or once its owner has it (not
  // fetched). A value whose owner is gone counts, failed (as Get would).
  std::vector<bool> Wait(const std::vector<ObjectRefInfo>& refs, int num_ready, absl::Duration timeout,
                         bool fetch_local = true);
  // A task argument's value: inline, local, or fetched from its owner (an
  // owner gone is OwnerDied).
  absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg);

  // ---- serving ----
  // Answers a status request for `id` into `reply` and calls `done` once:
  // NOT_FOUND at once for a value this process does not hold, READY (with
  // the value inline, or where to stream it, unless `status_only`) once it
  // is ready, PENDING if `wait` passes first.
  void AnswerStatus(const ObjectId& id, absl::Duration wait, rpc::GetObjectStatusReply* reply,
                    std::function<void()> done, bool status_only = false);
  // The value to stream for `id`: ready here, or the error to send.
  absl::StatusOr<Value> ValueToSend(const ObjectId& id);
  // `id` was streamed whole: a return held for its owner is dropped.
  void Sent(const ObjectId& id) ABSL_LOCKS_EXCLUDED(mu_);
  // Worker: keeps a large task return until its owner has pulled it.
  void HoldForOwner(const ObjectId& id, Value value) ABSL_LOCKS_EXCLUDED(mu_);

  // The object as a reply carries it: inline up to kInlineLimit, else where
  // it is (`self`); an error as its type and message.
  static void Fill(const ObjectId& id, const absl::StatusOr<Value>& v, const rpc::Address& self,
                   rpc::ReturnObject* out);

 private:
  // Owned by the process at `owner_address` (serialized), not this one.
  bool OwnedElsewhere(const std::string& owner_address) const {
    return !owner_address.empty() && owner_address != self_key_;
  }
  // Wait's watch of `id` at `owner` until it is ready there, `deadline`
  // passes or the Wait ends (`live` false); the outcome goes in the store.
  void WatchOwner(const std::string& owner, const ObjectId& id, absl::Time deadline, bool fetch,
                  std::shared_ptr<std::atomic<bool>> live);

  MemoryStore* const store_;
  OwnerClient* const owners_;
  rpc::Address self_;
  std::string self_key_;  // self_, serialized

  absl::Mutex mu_;
  absl::flat_hash_set<ObjectId> held_for_owner_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
