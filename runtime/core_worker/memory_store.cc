#include "runtime/core_worker/memory_store.h"

#include "manta/internal/core_worker.h"

namespace manta::core {

void MemoryStore::Expect(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  entries_[id].expected = true;
}

void MemoryStore::Put(const ObjectId& id, Value value) { MakeReady(id, std::move(value)); }

void MemoryStore::Fail(const ObjectId& id, const absl::Status& error) { MakeReady(id, error); }

bool MemoryStore::EraseLocked(Entries::iterator it) {
  Entry& e = it->second;
  if (e.ready && e.value.ok() && *e.value) bytes_ -= static_cast<int64_t>((*e.value)->size());
  const bool notify = e.notify_erase;
  entries_.erase(it);
  return notify;
}

bool MemoryStore::NotifyOnErase(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  it->second.notify_erase = true;
  return true;
}

bool MemoryStore::PutIfPresent(const ObjectId& id, absl::StatusOr<Value> value) {
  return MakeReady(id, std::move(value), /*if_present=*/true);
}

void MemoryStore::MarkReadyElsewhere(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end() && !it->second.ready && !it->second.elsewhere) {
    it->second.elsewhere = true;
    ++readiness_;
  }
}

bool MemoryStore::ReadyElsewhere(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.elsewhere;
}

bool MemoryStore::MakeReady(const ObjectId& id, absl::StatusOr<Value> value, bool if_present) {
  std::vector<std::function<void(const absl::StatusOr<Value>&)>> callbacks;
  bool notify = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      if (if_present) return false;
      it = entries_.try_emplace(id).first;
    }
    Entry& e = it->second;
    if (e.ready) return true;
    e.ready = true;
    ++readiness_;
    if (value.ok() && *value) bytes_ += static_cast<int64_t>((*value)->size());
    if (e.callbacks.empty()) {
      // Nothing to run outside the lock: settle the entry now.
      e.value = std::move(value);
      if (e.released && e.refs <= 0) notify = EraseLocked(it);
    } else {
      e.value = value;
      callbacks.swap(e.callbacks);
    }
  }
  if (callbacks.empty()) {
    if (notify) Notify(id);
    return true;
  }
  for (auto& cb : callbacks) cb(value);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.released && it->second.refs <= 0 && it->second.callbacks.empty()) {
      notify = EraseLocked(it);
    }
  }
  if (notify) Notify(id);
  return true;
}

std::vector<absl::StatusOr<Value>> MemoryStore::Get(const std::vector<ObjectId>& ids, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // Entries never go from ready back to pending, so the scan resumes where it
  // stopped. The condition is evaluated by the thread that makes an entry
  // ready: the waiter wakes once, when all are ready, not on every Put.
  size_t next = 0;
  auto all_ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (; next < ids.size(); ++next) {
      auto it = entries_.find(ids[next]);
      if (it != entries_.end() && !it->second.ready) return false;
    }
    return true;
  };
  mu_.AwaitWithDeadline(absl::Condition(&all_ready), deadline);
  std::vector<absl::StatusOr<Value>> out;
  out.reserve(ids.size());
  for (const auto& id : ids) {
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      out.push_back(absl::NotFoundError("object " + id.Hex() + " is not in this process"));
    } else if (!it->second.ready) {
      out.push_back(MakeError(ErrorType::kTimeout, "timed out waiting for object " + id.Hex()));
    } else {
      out.push_back(it->second.value);
    }
  }
  return out;
}

std::optional<absl::StatusOr<Value>> MemoryStore::TryGet(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.ready) return std::nullopt;
  return it->second.value;
}

bool MemoryStore::Contains(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  return entries_.contains(id);
}

std::vector<bool> MemoryStore::Ready(const std::vector<ObjectId>& ids, bool count_elsewhere) {
  absl::MutexLock lock(&mu_);
  std::vector<bool> r(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) r[i] = IsReadyLocked(ids[i], count_elsewhere);
  return r;
}

bool MemoryStore::IsReadyLocked(const ObjectId& id, bool count_elsewhere) {
  auto it = entries_.find(id);
  return it != entries_.end() && (it->second.ready || (count_elsewhere && it->second.elsewhere));
}

std::vector<bool> MemoryStore::Wait(const std::vector<ObjectId>& ids, int num_ready, absl::Time deadline,
                                    bool count_elsewhere) {
  absl::MutexLock lock(&mu_);
  std::vector<bool> r(ids.size());
  int n = 0;
  // The condition runs on every unlock of the store by any thread: it
  // rescans (only the ids not yet ready) only when some entry has become
  // ready since its last scan. Ready entries stay ready while held.
  uint64_t seen = readiness_ - 1;
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (seen != readiness_) {
      seen = readiness_;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!r[i] && IsReadyLocked(ids[i], count_elsewhere)) {
          r[i] = true;
          ++n;
        }
      }
    }
    return n >= num_ready;
  };
  mu_.AwaitWithDeadline(absl::Condition(&enough), deadline);
  enough();
  return r;
}

void MemoryStore::OnReady(const ObjectId& id, std::function<void(const absl::StatusOr<Value>&)> cb) {
  absl::StatusOr<Value> value;
  {
    absl::MutexLock lock(&mu_);
    Entry& e = entries_[id];
    if (!e.ready) {
      e.callbacks.push_back(std::move(cb));
      return;
    }
    value = e.value;
  }
  cb(value);
}

int64_t MemoryStore::AddReference(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  return ++entries_[id].refs;
}

bool MemoryStore::TryAddReference(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  ++it->second.refs;
  return true;
}

int64_t MemoryStore::RemoveReference(const ObjectId& id) {
  bool notify = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return -1;
    Entry& e = it->second;
    if (--e.refs > 0) return e.refs;
    if (!e.callbacks.empty() || (!e.ready && e.expected)) {
      // A value is coming, or someone waits for it: erase it once it is here.
      e.released = true;
      return 0;
    }
    // Ready, or only ever referenced (a ref to a value elsewhere, not fetched).
    notify = EraseLocked(it);
  }
  if (notify) Notify(id);
  return 0;
}

void MemoryStore::Erase(const ObjectId& id) {
  bool notify = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    notify = EraseLocked(it);
  }
  if (notify) Notify(id);
}

size_t MemoryStore::size() {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t MemoryStore::bytes() {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace manta::core
