// MemoryStore: the values this process holds, by object id — those it owns
// (task returns, Put) and copies it fetched from other owners.
//
// An entry is pending until Put or Fail makes it ready; readers block on it
// with a deadline (waiters are woken only once what they wait for is
// ready). A pending entry of a value another process owns may be known to
// be ready there (MarkReadyElsewhere), which a Wait may count. Reference counts from the API decide when an owned value
// may be freed: an entry with no local reference and no pending use is
// erased. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "common/id_hash.h"

namespace manta::core {

using Value = std::shared_ptr<const std::string>;

class MemoryStore {
 public:
  // Creates a pending entry (idempotent).
  void Expect(const ObjectId& id);
  // Makes an entry ready with a value or an error; wakes waiters; runs the
  // entry's ready callbacks. A second Put/Fail of a ready entry is ignored.
  void Put(const ObjectId& id, Value value);
  void Fail(const ObjectId& id, const absl::Status& error);
  // The same, for an entry the store has (some reference holds it); false,
  // and nothing stored, when it has none.
  bool PutIfPresent(const ObjectId& id, absl::StatusOr<Value> value);
  // A pending entry's value is ready at its owner, not here; nothing for an
  // entry the store does not have or has ready.
  void MarkReadyElsewhere(const ObjectId& id);
  bool ReadyElsewhere(const ObjectId& id);

  // Blocks until every id is ready or `deadline`; per id: the value, the
  // error, or DeadlineExceeded. NotFound for ids this store never had.
  std::vector<absl::StatusOr<Value>> Get(const std::vector<ObjectId>& ids, absl::Time deadline);
  // Non-blocking: nullopt while pending or unknown.
  std::optional<absl::StatusOr<Value>> TryGet(const ObjectId& id);
  bool Contains(const ObjectId& id);
  // Blocks until `num_ready` of `ids` are ready or `deadline`; returns which
  // are. `count_elsewhere`: those ready at their owners count as ready.
  std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num_ready, absl::Time deadline,
                         bool count_elsewhere = false);
  // Non-blocking: which of `ids` are ready now, under one lock.
  std::vector<bool> Ready(const std::vector<ObjectId>& ids, bool count_elsewhere = false);
  // Runs `cb` (outside the lock) once `id` is ready; at once if it is.
  void OnReady(const ObjectId& id, std::function<void(const absl::StatusOr<Value>&)> cb);

  // Reference counting. An entry whose count drops to zero is erased (a
  // pending one once it is ready). Both return the new count; Remove
  // returns -1 for an id this store does not have.
  int64_t AddReference(const ObjectId& id);
  int64_t RemoveReference(const ObjectId& id);
  // A reference to an entry this store has (pending or ready); false, and
  // nothing changes, when it has none.
  bool TryAddReference(const ObjectId& id);
  void Erase(const ObjectId& id);

  // Called (outside the lock, on the erasing thread) when an entry marked
  // with NotifyOnErase goes. Set once, before the store is shared.
  void SetEraseListener(std::function<void(const ObjectId&)> listener) { erase_listener_ = std::move(listener); }
  // Marks `id`; false (nothing marked) when the store no longer has it.
  bool NotifyOnErase(const ObjectId& id);

  size_t size();
  int64_t bytes();

 private:
  struct Entry {
    bool ready = false;
    bool expected = false;        // a value is coming (Expect)
    bool notify_erase = false;    // tell erase_listener_ when it goes
    bool elsewhere = false;       // pending here, ready at its owner
    absl::StatusOr<Value> value;  // meaningful once ready
    int64_t refs = 0;
    // Every reference was dropped while the value was pending: erase it as
    // soon as it is ready.
    bool released = false;
    std::vector<std::function<void(const absl::StatusOr<Value>&)>> callbacks;
  };
  // False, storing nothing, when `if_present` and the store lacks `id`.
  bool MakeReady(const ObjectId& id, absl::StatusOr<Value> value, bool if_present = false);
  // Erases `it`; true when the listener must be told (after unlocking).
  using Entries = absl::flat_hash_map<ObjectId, Entry, IdHash, IdEq>;
  bool EraseLocked(Entries::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const ObjectId& id) {
    if (erase_listener_) erase_listener_(id);
  }

  bool IsReadyLocked(const ObjectId& id, bool count_elsewhere) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::function<void(const ObjectId&)> erase_listener_;

  absl::Mutex mu_;
  Entries entries_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts entries becoming ready (here or at their owners): a waiter
  // rescans only when it moved.
  uint64_t readiness_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::core
