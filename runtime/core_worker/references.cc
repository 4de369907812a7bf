// Reference counting across processes.
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
#include <algorithm>

#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "common/rpc/grpc_util.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {
constexpr absl::Duration kBorrowRpcTimeout = absl::Seconds(10);
constexpr absl::Duration kBorrowerCheckEvery = absl::Seconds(5);
constexpr int kChecksBeforeGone = 3;
// How long a worker keeps the refs its caller owns that it returned inside a
// value, so the caller has the reply before this process lets go.
constexpr absl::Duration kHandOverGrace = absl::Seconds(2);
}  // namespace

// ---------------------------------------------------------------- borrower side

void CoreWorkerImpl::AddLocalReference(const ObjectId& id) { store_.AddReference(id); }

void CoreWorkerImpl::RemoveLocalReference(const ObjectId& id) {
  if (store_.RemoveReference(id) == 0 && num_borrowed_.load(std::memory_order_relaxed) > 0) EndBorrow(id);
}

void CoreWorkerImpl::AddBorrowedReference(const ObjectRefInfo& info) {
  rpc::Address owner;
  if (info.owner_address.empty() || !owner.ParseFromString(info.owner_address) ||
      owner.worker_id() == address_proto_.worker_id()) {
    store_.AddReference(info.id);  // owned here
    return;
  }
  if (store_.AddReference(info.id) > 1 || stopping_) return;
  // The first ref here: the value must stay at its owner until this one goes.
  rpc::AddBorrowerRequest req;
  req.set_object_id(info.id.Binary());
  *req.mutable_borrower() = address_proto_;
  const std::string owner_key = AddressKey(owner);
  auto* stub = pool_.Worker(owner_key);
  auto reply = SyncCall<rpc::AddBorrowerReply>(
      options_.token, [&](auto* ctx, auto* r) { return stub->AddBorrower(ctx, req, r); }, kBorrowRpcTimeout);
  if (!reply.ok() || !reply->found()) return;  // gone already: a Get says so
  absl::MutexLock lock(&borrow_mu_);
  Borrowed& b = borrowed_[info.id];
  b.owner = owner_key;
  ++b.registrations;
  num_borrowed_.store(borrowed_.size(), std::memory_order_relaxed);
}

void CoreWorkerImpl::EndBorrow(const ObjectId& id) {
  // Every registration ends with the last ref (a ref handed over in several
  // results, or borrowed again while borrowed, registered more than once).
  std::string owner;
  int registrations = 0;
  {
    absl::MutexLock lock(&borrow_mu_);
    auto it = borrowed_.find(id);
    if (it == borrowed_.end()) return;
    owner = it->second.owner;
    registrations = it->second.registrations;
    borrowed_.erase(it);
    num_borrowed_.store(borrowed_.size(), std::memory_order_relaxed);
  }
  if (registrations <= 0) return;
  rpc::RemoveBorrowerRequest req;
  req.set_object_id(id.Binary());
  req.set_borrower_worker_id(address_proto_.worker_id());
  req.set_count(registrations);
  loop_.Post([this, owner, req = std::move(req)]() mutable {
    rpc::UnaryCall<rpc::RemoveBorrowerReply>(
        &loop_, options_.token, kBorrowRpcTimeout, std::move(req),
        [stub = pool_.Worker(owner)](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->RemoveBorrower(ctx, r, reply, std::move(done));
        },
        // A lost one keeps the value until one of the two processes exits.
        [](const absl::Status&, rpc::RemoveBorrowerReply&&) {});
  });
}

grpc::ServerUnaryReactor* CoreWorkerImpl::CheckWorker(grpc::CallbackServerContext* ctx,
                                                      const rpc::CheckWorkerRequest* req,
                                                      rpc::CheckWorkerReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status auth = rpc::CheckAuth(*ctx, options_.token);
  if (auth.ok()) reply->set_same(req->worker_id() == address_proto_.worker_id());
  reactor->Finish(auth);
  return reactor;
}

// ---------------------------------------------------------------- owner side

grpc::ServerUnaryReactor* CoreWorkerImpl::AddBorrower(grpc::CallbackServerContext* ctx,
                                                      const rpc::AddBorrowerRequest* req,
                                                      rpc::AddBorrowerReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id);
  if (s.ok() && req->borrower().worker_id().empty()) {
    s = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed borrower");
  }
  if (!s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  reply->set_found(RecordBorrower(id, req->borrower()));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

bool CoreWorkerImpl::RecordBorrower(const ObjectId& id, const rpc::Address& borrower) {
  {
    // Under borrow_mu_, so a DropBorrower of the same worker cannot run
    // between the reference and its record.
    absl::MutexLock lock(&borrow_mu_);
    if (!store_.TryAddReference(id)) return false;
    Borrower& b = borrowers_[borrower.worker_id()];
    b.address = borrower;
    ++b.objects[id];
    if (borrower_check_armed_) return true;
    borrower_check_armed_ = true;
  }
  loop_.Post([this] {
    loop_.RunOnce(kBorrowerCheckEvery, [this] {
      CheckBorrowers();
    });
  });
  return true;
}

// ---------------------------------------------------------------- refs inside return values

void CoreWorkerImpl::HandOverNested(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs,
                                    rpc::ReturnObject* ret) {
  const rpc::Address& caller = spec.caller_address();
  std::vector<ObjectId> later;  // the caller's own: held a while longer
  for (const ObjectRefInfo& ref : refs) {
    rpc::Address owner;
    const bool mine = ref.owner_address.empty() || !owner.ParseFromString(ref.owner_address) ||
                      owner.worker_id() == address_proto_.worker_id();
    if (mine) owner = address_proto_;
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
    if (mine) {
      n->set_registered(RecordBorrower(ref.id, caller));
      RemoveLocalReference(ref.id);
      continue;
    }
    rpc::AddBorrowerRequest req;
    req.set_object_id(ref.id.Binary());
    *req.mutable_borrower() = caller;
    auto* stub = pool_.Worker(AddressKey(owner));
    auto reply = SyncCall<rpc::AddBorrowerReply>(
        options_.token, [&](auto* ctx, auto* r) { return stub->AddBorrower(ctx, req, r); }, kBorrowRpcTimeout);
    n->set_registered(reply.ok() && reply->found());
    RemoveLocalReference(ref.id);
  }
  if (later.empty()) return;
  loop_.Post([this, later = std::move(later)] {
    loop_.RunOnce(kHandOverGrace, [this, later] {
      for (const ObjectId& id : later) RemoveLocalReference(id);
    });
  });
}

void CoreWorkerImpl::HoldNested(const ObjectId& outer, const rpc::ReturnObject& ret) {
  std::vector<ObjectId> held;
  for (const rpc::NestedRef& n : ret.nested()) {
    auto id = ObjectId::FromBinary(n.object_id());
    rpc::Address owner;
    if (!id.ok() || !owner.ParseFromString(n.owner())) continue;
    if (owner.worker_id() == address_proto_.worker_id()) {
      if (store_.TryAddReference(*id)) held.push_back(*id);  // else gone already
    } else if (n.registered()) {
      // Registered for this process by the worker: as if it had borrowed.
      store_.AddReference(*id);
      {
        absl::MutexLock lock(&borrow_mu_);
        Borrowed& b = borrowed_[*id];
        b.owner = AddressKey(owner);
        ++b.registrations;
        num_borrowed_.store(borrowed_.size(), std::memory_order_relaxed);
      }
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
  if (!store_.NotifyOnErase(outer)) ReleaseHeld(outer.Binary());
}

grpc::ServerUnaryReactor* CoreWorkerImpl::RemoveBorrower(grpc::CallbackServerContext* ctx,
                                                         const rpc::RemoveBorrowerRequest* req,
                                                         rpc::RemoveBorrowerReply*) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id);
  if (s.ok()) {
    int ended = 0;
    {
      absl::MutexLock lock(&borrow_mu_);
      auto b = borrowers_.find(req->borrower_worker_id());
      if (b != borrowers_.end()) {
        auto o = b->second.objects.find(id);
        if (o != b->second.objects.end()) {
          // Only registrations this process recorded are matched.
          ended = std::min(o->second, std::max(1, req->count()));
          if ((o->second -= ended) <= 0) b->second.objects.erase(o);
          if (b->second.objects.empty()) borrowers_.erase(b);
        }
      }
    }
    for (int i = 0; i < ended; ++i) RemoveLocalReference(id);
  }
  reactor->Finish(s);
  return reactor;
}

void CoreWorkerImpl::CheckBorrowers() {
  if (stopping_) return;
  std::vector<std::pair<std::string, rpc::Address>> workers;
  {
    absl::MutexLock lock(&borrow_mu_);
    if (borrowers_.empty()) {
      borrower_check_armed_ = false;
      return;
    }
    for (const auto& [worker_id, b] : borrowers_) workers.emplace_back(worker_id, b.address);
  }
  for (auto& [worker_id, address] : workers) {
    rpc::CheckWorkerRequest req;
    req.set_worker_id(worker_id);
    rpc::UnaryCall<rpc::CheckWorkerReply>(
        &loop_, options_.token, kBorrowRpcTimeout, std::move(req),
        [stub = pool_.Worker(AddressKey(address))](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->CheckWorker(ctx, r, reply, std::move(done));
        },
        [this, worker_id = worker_id](const absl::Status& s, rpc::CheckWorkerReply&& reply) {
          // Gone: another process listens there, or nothing has for three
          // checks in a row (one failed connection is not a death).
          bool gone = s.ok() && !reply.same();
          {
            absl::MutexLock lock(&borrow_mu_);
            auto it = borrowers_.find(worker_id);
            if (it == borrowers_.end()) return;
            int& failed = it->second.failed_checks;
            failed = absl::IsUnavailable(s) ? failed + 1 : 0;
            gone |= failed >= kChecksBeforeGone;
          }
          if (gone) DropBorrower(worker_id);
        });
  }
  loop_.RunOnce(kBorrowerCheckEvery, [this] {
    CheckBorrowers();
  });
}

void CoreWorkerImpl::DropBorrower(const std::string& worker_id) {
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

}  // namespace manta::core
