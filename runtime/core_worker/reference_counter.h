// ReferenceCounter: reference counting across processes, for one core worker.
//
// Every process counts its references per object id in its MemoryStore. The
// owner of a value keeps it while its own count is above zero: its
// ObjectRefs, the submitted work that takes it (HoldArgs), and its borrowers.
// A borrower is another process that holds refs to the value, which it got
// inside a value (a task's argument, say): on its first such ref it
// registers with the owner (AddBorrower, a blocking call, made while the
// work that carried the ref still holds it), and when its last ref goes it
// unregisters (RemoveBorrower). The owner asks its borrowers every few
// seconds whether they still live (CheckWorker) and drops the borrows of
// those that are gone.
//
// Invariants:
//  * every id in a hold (`holds_`) and every registration of a borrower
//    (`borrowers_`) is one reference in the store, dropped exactly once: when
//    the hold is released, the borrower unregisters or is found gone;
//  * `borrowed_` lists an object only while this process holds a reference to
//    it, with the registrations made for it (each ends with the last ref).
//
// Threads: any. Two locks, never held together and never across a call to
// the peers or the store's erase listener.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "manta/internal/core_worker.h"
#include "proto/common.pb.h"
#include "runtime/core_worker/memory_store.h"

namespace manta::core {

// What the counter asks of other processes and of time. Over gRPC and the
// io loop in a core worker; faked in tests.
class BorrowPeers {
 public:
  virtual ~BorrowPeers() = default;
  // Blocking: registers `borrower` for `id` with the owner at `owner`
  // ("ip:port"). True when the owner still has the value.
  virtual bool AddBorrower(const std::string& owner, const ObjectId& id, const rpc::Address& borrower) = 0;
  // Ends `count` registrations of `borrower_worker_id` (fire and forget).
  virtual void RemoveBorrower(const std::string& owner, const ObjectId& id, const std::string& borrower_worker_id,
                              int count) = 0;
  // Asks the process at `at` whether it is worker `worker_id`; `done` gets
  // the call's status and the answer, on any thread.
  virtual void CheckWorker(const rpc::Address& at, const std::string& worker_id,
                           std::function<void(const absl::Status&, bool same)> done) = 0;
  // Runs `fn` once, `delay` from now, on a thread that may block briefly.
  virtual void RunAfter(absl::Duration delay, std::function<void()> fn) = 0;
};

class ReferenceCounter {
 public:
  // How often an owner checks on its borrowers, and after how many checks
  // in a row without an answer one is gone (one failed connection is not a
  // death).
  static constexpr absl::Duration kBorrowerCheckEvery = absl::Seconds(5);
  static constexpr int kChecksBeforeGone = 3;
  // How long a worker keeps the refs its caller owns that it returned inside
  // a value, so the caller has the reply before this process lets go.
  static constexpr absl::Duration kHandOverGrace = absl::Seconds(2);

  // Takes `store`'s erase listener (to release what an erased value held).
  ReferenceCounter(MemoryStore* store, BorrowPeers* peers);
  ReferenceCounter(const ReferenceCounter&) = delete;
  ReferenceCounter& operator=(const ReferenceCounter&) = delete;

  // This process's address; set once, before the counter is shared.
  void set_self(rpc::Address self) { self_ = std::move(self); }
  // No new registration with owners and no more borrower checks.
  void Stop() { stopped_.store(true, std::memory_order_relaxed); }

  // ---- this process's refs ----
  void AddLocalReference(const ObjectId& id);
  // The last ref to a borrowed object unregisters it with its owner.
  void RemoveLocalReference(const ObjectId& id);
  // A ref that came inside a value: the first one to an object owned
  // elsewhere registers with the owner (blocking) before it returns.
  void AddBorrowedReference(const ObjectRefInfo& info);

  // ---- refs held on behalf of something ----
  // A reference each under `key`, a binary id (ids of different kinds differ
  // in length): submitted work holds its arguments' refs until it is done
  // for good (a task id; an actor id for a constructor, until the actor is
  // dead), and a stored object the refs inside it until the store erases it
  // (its object id). Then the caller may drop its own refs at once.
  // HoldArgs takes a reference to every reference argument of `spec` and to
  // `contained` (refs inside argument values).
  void HoldArgs(const std::string& key, const rpc::TaskSpec& spec, const std::vector<ObjectId>& contained);
  // Keeps `ids` (each already counted once for this) under `key`; false,
  // keeping nothing, when `key` holds refs already.
  bool HoldRefs(const std::string& key, std::vector<ObjectId> ids);
  // Drops what `key` holds (nothing if it holds nothing).
  void ReleaseHeld(const std::string& key);

  // ---- owner side ----
  // `borrower` holds a ref to `id` (one registration); false when the value
  // is gone. Starts the borrower checks.
  bool RecordBorrower(const ObjectId& id, const rpc::Address& borrower);
  // Ends up to `count` (at least one) registrations `borrower_worker_id`
  // recorded for `id`; others' are never matched.
  void RemoveBorrower(const ObjectId& id, const std::string& borrower_worker_id, int count);

  // ---- refs inside task return values ----
  // Worker: the refs inside a task's return value (`refs`, each holding a
  // reference it takes over), listed in `ret`; the task's caller is
  // registered as a borrower of each it does not own, before the reply goes.
  void HandOverNested(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs, rpc::ReturnObject* ret);
  // Caller: keeps the refs inside returned object `outer` while the store
  // holds `outer`.
  void HoldNested(const ObjectId& outer, const rpc::ReturnObject& ret);

  // For tests and diagnostics.
  size_t num_borrowed() const { return num_borrowed_.load(std::memory_order_relaxed); }
  size_t num_holds() const { return num_holds_.load(std::memory_order_relaxed); }
  size_t num_borrowers() ABSL_LOCKS_EXCLUDED(borrow_mu_);

 private:
  // An object owned elsewhere that this process holds refs to.
  struct Borrowed {
    std::string owner;  // "ip:port"
    int registrations = 0;
  };
  // A process that borrows objects owned here: its address and the
  // registrations it holds per object (each one reference in the store).
  struct Borrower {
    rpc::Address address;
    absl::flat_hash_map<ObjectId, int> objects;
    int failed_checks = 0;  // CheckWorker calls it did not answer, in a row
  };

  bool IsMine(const rpc::Address& owner) const { return owner.worker_id() == self_.worker_id(); }
  void AddRegistration(const ObjectId& id, const std::string& owner) ABSL_LOCKS_EXCLUDED(borrow_mu_);
  // The last ref to a borrowed object went: unregister.
  void EndBorrow(const ObjectId& id) ABSL_LOCKS_EXCLUDED(borrow_mu_);
  // Owner: drops the borrows of processes that are gone; again later while
  // anyone borrows.
  void CheckBorrowers() ABSL_LOCKS_EXCLUDED(borrow_mu_);
  void OnCheck(const std::string& worker_id, const absl::Status& s, bool same) ABSL_LOCKS_EXCLUDED(borrow_mu_);
  void DropBorrower(const std::string& worker_id) ABSL_LOCKS_EXCLUDED(borrow_mu_);

  MemoryStore* const store_;
  BorrowPeers* const peers_;
  rpc::Address self_;
  std::atomic<bool> stopped_{false};

  absl::Mutex holds_mu_;
  absl::flat_hash_map<std::string, std::vector<ObjectId>> holds_ ABSL_GUARDED_BY(holds_mu_);
  std::atomic<size_t> num_holds_{0};  // holds_.size(), read without the lock

  absl::Mutex borrow_mu_;
  absl::flat_hash_map<ObjectId, Borrowed> borrowed_ ABSL_GUARDED_BY(borrow_mu_);
  std::atomic<size_t> num_borrowed_{0};  // borrowed_.size()
  absl::flat_hash_map<std::string, Borrower> borrowers_ ABSL_GUARDED_BY(borrow_mu_);
  bool borrower_check_armed_ ABSL_GUARDED_BY(borrow_mu_) = false;
};

}  // namespace manta::core
