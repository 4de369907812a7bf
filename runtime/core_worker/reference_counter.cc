#include "runtime/core_worker/reference_counter.h"

#include <algorithm>

#include "common/logging.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
ReferenceCounter::ReferenceCounter(MemoryStore* store, BorrowPeers* peers) : store_(store), peers_(peers) {
  store_->SetEraseListener([this](const ObjectId& id) { ReleaseHeld(id.Binary()); });
}

size_t ReferenceCounter::num_borrowers() {
  absl::MutexLock lock(&borrow_mu_);
  return borrowers_.size();
}

// ---------------------------------------------------------------- borrower side

void ReferenceCounter::AddLocalReference(const ObjectId& id) { store_->AddReference(id); }

void ReferenceCounter::RemoveLocalReference(const ObjectId& id) {
  if (store_->RemoveReference(id) == 0 && num_borrowed_.load(std::memory_order_relaxed) > 0) EndBorrow(id);
}

void ReferenceCounter::AddBorrowedReference(const ObjectRefInfo& info) {
  rpc::Address owner;
  if (info.owner_address.empty() || !owner.ParseFromString(info.owner_address) || IsMine(owner)) {
    store_->AddReference(info.id);  // owned here
    return;
  }
  if (store_->AddReference(info.id) > 1 || stopped_.load(std::memory_order_relaxed)) return;
  // The first ref here: the value must stay at its owner until this one goes.
  const std::string owner_key = AddressKey(owner);
  if (!peers_->AddBorrower(owner_key, info.id, self_)) return;  // gone already: a Get says so
  AddRegistration(info.id, owner_key);
}

void ReferenceCounter::AddRegistration(const ObjectId& id, const std::string& owner) {
  absl::MutexLock lock(&borrow_mu_);
  Borrowed& b = borrowed_[id];
  b.owner = owner;
  ++b.registrations;
  num_borrowed_.store(borrowed_.size(), std::memory_order_relaxed);
}

void ReferenceCounter::EndBorrow(const ObjectId& id) {
  // Every registration ends with the last ref (a ref handed over in several
  // results, or borrowed again while borrowed, registered more than once).
  Borrowed ended;
  {
    absl::MutexLock lock(&borrow_mu_);
    auto it = borrowed_.find(id);
    if (it == borrowed_.end()) return;
    ended = std::move(it->second);
    borrowed_.erase(it);
    num_borrowed_.store(borrowed_.size(), std::memory_order_relaxed);
  }
  // A lost one keeps the value until one of the two processes exits.
  if (ended.registrations > 0) peers_->RemoveBorrower(ended.owner, id, self_.worker_id(), ended.registrations);
}

// ---------------------------------------------------------------- holds

void ReferenceCounter::HoldArgs(const std::string& key, const rpc::TaskSpec& spec,
                                const std::vector<ObjectId>& contained) {
  // Every reference argument (owned here or borrowed) and every ref inside
  // an argument's value: the caller holds them now, so none is gone yet.
  std::vector<ObjectId> ids = contained;
  for (const auto& a : spec.args()) {
    if (a.object_id().empty()) continue;
    auto id = ObjectId::FromBinary(a.object_id());
    if (id.ok()) ids.push_back(*id);
  }
  if (ids.empty()) return;
  for (const ObjectId& id : ids) store_->AddReference(id);
  if (!HoldRefs(key, ids)) {
    for (const ObjectId& id : ids) RemoveLocalReference(id);
  }
}

bool ReferenceCounter::HoldRefs(const std::string& key, std::vector<ObjectId> ids) {
  absl::MutexLock lock(&holds_mu_);
  if (!holds_.try_emplace(key, std::move(ids)).second) return false;
  num_holds_.store(holds_.size(), std::memory_order_relaxed);
  return true;
}

void ReferenceCounter::ReleaseHeld(const std::string& key) {
  // Most work holds nothing: no lock for it.
  if (num_holds_.load(std::memory_order_relaxed) == 0) return;
  std::vector<ObjectId> ids;
  {
    absl::MutexLock lock(&holds_mu_);
    auto it = holds_.find(key);
    if (it == holds_.end()) return;
    ids = std::move(it->second);
    holds_.erase(it);
    num_holds_.store(holds_.size(), std::memory_order_relaxed);
  }
  for (const ObjectId& id : ids) RemoveLocalReference(id);
}

// ---------------------------------------------------------------- owner side

bool ReferenceCounter::RecordBorrower(const ObjectId& id, const rpc::Address& borrower) {
  {
    // Under borrow_mu_, so a DropBorrower of the same worker cannot run
    // between the reference and its record.
    absl::MutexLock lock(&borrow_mu_);
    if (!store_->TryAddReference(id)) return false;
    Borrower& b = borrowers_[borrower.worker_id()];
    b.address = borrower;
    ++b.objects[id];
    if (borrower_check_armed_) return true;
    borrower_check_armed_ = true;
  }
  peers_->RunAfter(kBorrowerCheckEvery, [this] { CheckBorrowers(); });
  return true;
}

void ReferenceCounter::RemoveBorrower(const ObjectId& id, const std::string& borrower_worker_id, int count) {
  int ended = 0;
  {
    absl::MutexLock lock(&borrow_mu_);
    auto b = borrowers_.find(borrower_worker_id);
    if (b == borrowers_.end()) return;
    auto o = b->second.objects.find(id);
    if (o == b->second.objects.end()) return;
    ended = std::min(o->second, std::max(1, count));
    if ((o->second -= ended) <= 0) b->second.objects.erase(o);
    if (b->second.objects.empty()) borrowers_.erase(b);
  }
  for (int i = 0; i < ended; ++i) RemoveLocalReference(id);
}

void ReferenceCounter::CheckBorrowers() {
  std::vector<std::pair<std::string, rpc::Address>> workers;
  {
    absl::MutexLock lock(&borrow_mu_);
    if (borrowers_.empty() || stopped_.load(std::memory_order_relaxed)) {
      borrower_check_armed_ = false;
      return;
    }
    for (const auto& [worker_id, b] : borrowers_) workers.emplace_back(worker_id, b.address);
  }
  for (auto& [worker_id, address] : workers) {
    peers_->CheckWorker(address, worker_id, [this, worker_id = worker_id](const absl::Status& s, bool same) {
      OnCheck(worker_id, s, same);
    });
  }
  peers_->RunAfter(kBorrowerCheckEvery, [this] { CheckBorrowers(); });
}

void ReferenceCounter::OnCheck(const std::string& worker_id, const absl::Status& s, bool same) {
  // Gone: another worker answers at the borrower's address, or for
  // kChecksBeforeGone checks in a row nothing did (refused) or a server that
  // is no worker of this cluster did (it does not know the call, or refuses
  // the token). A borrower's answer starts the count again. Other outcomes
  // leave the count as it was: a timed-out check may be a live borrower
  // that is stopped or overloaded, whose values must not go.
  bool gone = s.ok() && !same;
  {
    absl::MutexLock lock(&borrow_mu_);
    auto it = borrowers_.find(worker_id);
    if (it == borrowers_.end()) return;
    int& failed = it->second.failed_checks;
    if (s.ok()) {
      failed = 0;
    } else if (absl::IsUnavailable(s) || absl::IsUnimplemented(s) || absl::IsUnauthenticated(s)) {
      ++failed;
    }
    gone |= failed >= kChecksBeforeGone;
  }
  if (gone) DropBorrower(worker_id);
}

void ReferenceCounter::DropBorrower(const std::string& worker_id) {
  std::vector<std::pair<ObjectId, int>> objects;
  {
    absl::MutexLock lock(&borrow_mu_);
    auto it = borrowers_.find(worker_id);
    if (it == borrowers_.end()) return;
    objects.assign(it->second.objects.begin(), it->second.objects.end());
    borrowers_.erase(it);
  }
  Logger("core_worker")->info("a borrower of {} objects is gone; releasing them", objects.size());
  for (const auto& [id, n] : objects) {
    for (int i = 0; i < n; ++i) RemoveLocalReference(id);
  }
}

// ---------------------------------------------------------------- refs inside return values

void ReferenceCounter::HandOverNested(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs,
                                      rpc::ReturnObject* ret) {
  const rpc::Address& caller = spec.caller_address();
  std::vector<ObjectId> later;  // the caller's own: held a while longer
  for (const ObjectRefInfo& ref : refs) {
    rpc::Address owner;
    const bool mine = ref.owner_address.empty() || !owner.ParseFromString(ref.owner_address) || IsMine(owner);
    if (mine) owner = self_;
    rpc::NestedRef* n = ret->add_nested();
    n->set_object_id(ref.id.Binary());
    n->set_owner(owner.SerializeAsString());
    // The caller holds its own values once it has the reply (this hold
    // stays a while, as the reply may reach it after a RemoveBorrower
    // would); of the others it becomes a borrower now, while this process
    // still holds the ref.
    if (owner.worker_id() == spec.caller_worker_id() || caller.worker_id().empty()) {
      later.push_back(ref.id);
      continue;
    }
    n->set_registered(mine ? RecordBorrower(ref.id, caller) : peers_->AddBorrower(AddressKey(owner), ref.id, caller));
    RemoveLocalReference(ref.id);
  }
  if (later.empty()) return;
  peers_->RunAfter(kHandOverGrace, [this, later = std::move(later)] {
    for (const ObjectId& id : later) RemoveLocalReference(id);
  });
}

void ReferenceCounter::HoldNested(const ObjectId& outer, const rpc::ReturnObject& ret) {
  std::vector<ObjectId> held;
  for (const rpc::NestedRef& n : ret.nested()) {
    auto id = ObjectId::FromBinary(n.object_id());
    rpc::Address owner;
    if (!id.ok() || !owner.ParseFromString(n.owner())) continue;
    if (IsMine(owner)) {
      if (store_->TryAddReference(*id)) held.push_back(*id);  // else gone already
    } else if (n.registered()) {
      // Registered for this process by the worker: as if it had borrowed.
      store_->AddReference(*id);
      AddRegistration(*id, AddressKey(owner));
      held.push_back(*id);
    }
  }
  if (held.empty()) return;
  // One reply per object counts (a call answered twice brings two).
  if (!HoldRefs(outer.Binary(), held)) {
    for (const ObjectId& id : held) RemoveLocalReference(id);
    return;
  }
  // The outer object gone already (nobody wanted it): let them go too.
  if (!store_->NotifyOnErase(outer)) ReleaseHeld(outer.Binary());
}

}  // namespace manta::core
