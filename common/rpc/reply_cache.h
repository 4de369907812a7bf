// ReplyCache: makes a handler idempotent under retries by a request id the
// client chose. The first request with an id runs; a later one with the same
// id (a retry after a lost reply) gets the first one's reply and status and
// changes nothing. A retry that arrives while the first is still running is
// answered when it finishes. Only successful outcomes are kept: after an
// error the id may run again. Bounded: past `capacity` ids, the oldest are
// forgotten. An empty id is never cached.
//
// Not thread-safe: use from one thread (a daemon's loop); the wrapped `done`
// must be called on that thread too. Compiles without gRPC.
//
//   if (cache_.Replay(request.request_id(), reply, done)) return;
//   done = cache_.Record(request.request_id(), reply, std::move(done));
//   ... handle the request, fill `reply`, then done(status) ...
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/id.h"
#include "common/rpc/done.h"

namespace manta::rpc {

// The longest request id a handler accepts.
inline constexpr size_t kMaxRequestIdBytes = 64;

// InvalidArgument for a request id longer than kMaxRequestIdBytes.
inline absl::Status ValidateRequestId(const std::string& id) {
  if (id.size() > kMaxRequestIdBytes) return absl::InvalidArgumentError("request_id is longer than 64 bytes");
  return absl::OkStatus();
}

// A fresh random request id, for a client to send on every attempt of one
// request.
inline std::string NewRequestId() {
  std::string id(16, '\0');
  FillRandom(id.data(), id.size());
  return id;
}

template <typename Reply>
class ReplyCache {
 public:
  explicit ReplyCache(size_t capacity = 10000) : capacity_(capacity) {}

  // True when `id` was seen: `reply` and `done` are answered as the first
  // request was (now, or when it finishes). Leaves `done` empty then.
  bool Replay(const std::string& id, Reply* reply, Done& done) {
    if (id.empty()) return false;
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    Entry& e = *it->second;
    if (!e.finished) {
      e.waiters.push_back({reply, std::move(done)});
      done = nullptr;
      return true;
    }
    *reply = e.reply;
    Done answer = std::move(done);
    done = nullptr;
    answer(absl::OkStatus());
    return true;
  }

  // Returns `done` wrapped so that the outcome is kept under `id` (and
  // given to retries waiting for it). `reply` must be filled before the
  // wrapped done is called.
  Done Record(const std::string& id, Reply* reply, Done done) {
    if (id.empty()) return done;
    auto entry = std::make_shared<Entry>();
    if (entries_.insert_or_assign(id, entry).second) order_.push_back(id);
    Trim();
    return [this, id, entry, reply, done = std::move(done)](const absl::Status& s) {
      std::vector<Waiter> waiters = std::move(entry->waiters);
      entry->waiters.clear();
      if (s.ok()) {
        entry->finished = true;
        entry->reply = *reply;
      } else if (auto it = entries_.find(id); it != entries_.end() && it->second == entry) {
        entries_.erase(it);  // order_ keeps the id; Trim skips it
      }
      done(s);
      for (Waiter& w : waiters) {
        if (s.ok()) *w.reply = entry->reply;
        w.done(s);
      }
    };
  }

  size_t size() const { return entries_.size(); }

 private:
  struct Waiter {
    Reply* reply;
    Done done;
  };
  struct Entry {
    bool finished = false;
    Reply reply;
    std::vector<Waiter> waiters;
  };

  void Trim() {
    while (order_.size() > capacity_) {
      std::string oldest = std::move(order_.front());
      order_.pop_front();
      auto it = entries_.find(oldest);
      if (it == entries_.end()) continue;
      if (!it->second->finished) {
        // Still running (its retries wait on it): trimmed on a later round.
        order_.push_back(std::move(oldest));
        return;
      }
      entries_.erase(it);
    }
  }

  const size_t capacity_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_;
  std::deque<std::string> order_;  // oldest first; may name forgotten ids
};

}  // namespace manta::rpc
