#include "runtime/core_worker/object_service.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

absl::Time DeadlineAfter(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
}

// The owner's "ip:port" from a serialized address; empty when malformed.
std::string OwnerKey(const std::string& owner_address) {
  rpc::Address owner;
  if (!owner.ParseFromString(owner_address)) return "";
  return AddressKey(owner);
}

}  // namespace

// ---------------------------------------------------------------- reading

std::vector<absl::StatusOr<Value>> ObjectService::Get(const std::vector<ObjectRefInfo>& refs, absl::Duration timeout) {
  const absl::Time deadline = DeadlineAfter(timeout);
  // Values owned elsewhere are fetched into the local store first.
  for (const auto& ref : refs) {
    if (!OwnedElsewhere(ref.owner_address) || store_->TryGet(ref.id)) continue;
    const std::string owner = OwnerKey(ref.owner_address);
    if (owner.empty()) {
      store_->Fail(ref.id, MakeError(ErrorType::kInvalidArgument, "malformed owner address"));
      continue;
    }
    auto v = owners_->Fetch(owner, ref.id, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (v.ok()) {
      store_->Put(ref.id, *v);
    } else if (GetErrorType(v.status()) != ErrorType::kTimeout) {
      store_->Fail(ref.id, v.status());
    }
  }
  std::vector<ObjectId> ids;
  ids.reserve(refs.size());
  for (const auto& r : refs) ids.push_back(r.id);
  return store_->Get(ids, deadline);
}

std::vector<bool> ObjectService::Wait(const std::vector<ObjectRefInfo>& refs, int num_ready, absl::Duration timeout,
                                      bool fetch_local) {
  const absl::Time deadline = DeadlineAfter(timeout);
  std::vector<ObjectId> ids;
  ids.reserve(refs.size());
  for (const auto& r : refs) ids.push_back(r.id);
  std::vector<bool> now = store_->Ready(ids, /*count_elsewhere=*/!fetch_local);
  if (std::count(now.begin(), now.end(), true) >= num_ready) return now;
  // Values owned elsewhere and not known ready: watched at their owners
  // (each watch settles the entry in the store) while this Wait lasts.
  auto live = std::make_shared<std::atomic<bool>>(true);
  for (size_t i = 0; i < refs.size(); ++i) {
    const ObjectRefInfo& r = refs[i];
    if (now[i] || !OwnedElsewhere(r.owner_address)) continue;
    const std::string owner = OwnerKey(r.owner_address);
    if (owner.empty()) {
      store_->PutIfPresent(r.id, MakeError(ErrorType::kInvalidArgument, "malformed owner address"));
      continue;
    }
    WatchOwner(owner, r.id, deadline, fetch_local, live);
  }
  std::vector<bool> which = store_->Wait(ids, num_ready, deadline, /*count_elsewhere=*/!fetch_local);
  live->store(false);
  return which;
}

void ObjectService::WatchOwner(const std::string& owner, const ObjectId& id, absl::Time deadline, bool fetch,
                               std::shared_ptr<std::atomic<bool>> live) {
  absl::Duration wait = std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kMaxWatchWait);
  auto settle = [this, owner, id, deadline, fetch, live](absl::StatusOr<std::optional<Value>> v) {
    if (v.ok()) {
      // Only for a ref still held here: a late answer stores nothing.
      if (v->has_value()) {
        store_->PutIfPresent(id, **v);
      } else {
        store_->MarkReadyElsewhere(id);
      }
    } else if (GetErrorType(v.status()) != ErrorType::kTimeout) {
      store_->PutIfPresent(id, v.status());  // its error, or its owner's loss
    } else if (live->load() && absl::Now() < deadline) {
      WatchOwner(owner, id, deadline, fetch, live);
    }
  };
  owners_->Watch(owner, id, wait, fetch, std::move(settle));
}

absl::StatusOr<Value> ObjectService::ResolveArg(const rpc::TaskArg& arg) {
  if (arg.object_id().empty()) return std::make_shared<const std::string>(arg.data());
  auto id = ObjectId::FromBinary(arg.object_id());
  if (!id.ok()) return MakeError(ErrorType::kInvalidArgument, "malformed argument object id");
  if (auto local = store_->TryGet(*id)) return *local;
  auto v = owners_->Fetch(AddressKey(arg.owner()), *id, absl::Minutes(10));
  if (!v.ok() && GetErrorType(v.status()) == ErrorType::kWorkerDied) {
    return MakeError(ErrorType::kOwnerDied, "the owner of an argument died: " + std::string(v.status().message()));
  }
  return v;
}

// ---------------------------------------------------------------- serving

void ObjectService::Fill(const ObjectId& id, const absl::StatusOr<Value>& v, const rpc::Address& self,
                         rpc::ReturnObject* out) {
  out->set_object_id(id.Binary());
  if (!v.ok()) {
    ToErrorInfo(v.status(), out->mutable_error());
    return;
  }
  out->set_size(static_cast<int64_t>((*v)->size()));
  if ((*v)->size() <= kInlineLimit) {
    out->set_data(**v);
  } else {
    out->set_stored_remotely(true);
    *out->mutable_location() = self;
  }
}

void ObjectService::AnswerStatus(const ObjectId& id, absl::Duration wait, rpc::GetObjectStatusReply* reply,
                                 std::function<void()> done, bool status_only) {
  if (!store_->Contains(id)) {
    reply->set_status(rpc::GetObjectStatusReply::NOT_FOUND);
    return done();
  }
  // Answered once: by the value becoming ready or by the wait ending,
  // whichever comes first; the other does nothing.
  struct Call {
    std::atomic<bool> answered{false};
    rpc::GetObjectStatusReply* reply;
    std::function<void()> done;
    bool Claim() { return !answered.exchange(true); }
  };
  auto call = std::make_shared<Call>();
  call->reply = reply;
  call->done = std::move(done);
  store_->OnReady(id, [call, id, self = self_, status_only](const absl::StatusOr<Value>& v) {
    if (!call->Claim()) return;
    call->reply->set_status(rpc::GetObjectStatusReply::READY);
    if (status_only && v.ok()) {
      call->reply->mutable_object()->set_object_id(id.Binary());
      call->reply->mutable_object()->set_size(static_cast<int64_t>((*v)->size()));
    } else {
      Fill(id, v, self, call->reply->mutable_object());
    }
    call->done();
  });
  // A ready value has answered already: no timer to hold for the wait.
  if (call->answered.load()) return;
  owners_->RunAfter(std::max(wait, absl::ZeroDuration()), [call] {
    if (!call->Claim()) return;
    call->reply->set_status(rpc::GetObjectStatusReply::PENDING);
    call->done();
  });
}

absl::StatusOr<Value> ObjectService::ValueToSend(const ObjectId& id) {
  auto v = store_->TryGet(id);
  if (!v) return MakeError(ErrorType::kObjectLost, "object " + id.Hex() + " is not ready here");
  return *v;
}

void ObjectService::Sent(const ObjectId& id) {
  // Under mu_: a new hold of the same id (another attempt of its task) is
  // not erased with this one.
  absl::MutexLock lock(&mu_);
  if (held_for_owner_.erase(id) > 0) store_->Erase(id);
}

void ObjectService::HoldForOwner(const ObjectId& id, Value value) {
  {
    absl::MutexLock lock(&mu_);
    held_for_owner_.insert(id);
  }
  store_->Put(id, std::move(value));
}

}  // namespace manta::core
