// The K/V transfers of disaggregated serving (see group_engine.h): the
// prefill ops that fill and drain the per-chip queues, and the threads that
// move them over the mesh's data axis, one pair of chips (the same tensor
// rank on each slice) per gloo group.
#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "serve/engine/group_engine.h"
#include "serve/engine/group_wire.h"
#include "serve/engine/sampler.h"

namespace manta::serve {
using wire::JoinId;
using wire::kHeaderDone;
using wire::kHeaderNoop;
using wire::kPrefillOut;
using wire::kQuiet;
using wire::TransferHeader;

bool TransferQueue::Push(KvTransfer t) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || items_.size() < capacity_; };
  mu_.Await(absl::Condition(&room));
  if (closed_) return false;
  items_.push_back(std::move(t));
  return true;
}

bool TransferQueue::Pop(KvTransfer* t, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !items_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&some), timeout);
  if (closed_ || items_.empty()) return false;
  *t = std::move(items_.front());
  items_.pop_front();
  return true;
}

bool TransferQueue::WaitForSpace() {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || items_.size() < capacity_; };
  mu_.Await(absl::Condition(&room));
  return !closed_;
}

std::vector<const KvTransfer*> TransferQueue::Peek(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !items_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&some), timeout);
  std::vector<const KvTransfer*> out;
  // Only the consumer pops, so what is peeked stays until it does.
  for (size_t i = 0; i < std::min(n, items_.size()) && !closed_; ++i) out.push_back(&items_[i]);
  return out;
}

size_t TransferQueue::size() const {
  absl::MutexLock lock(&mu_);
  return items_.size();
}

void TransferQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

absl::Status GroupEngine::ExecuteTransferOp(int local, const std::vector<float>& cmd) {
  Engine& engine = *engines_[local];
  const int64_t n = static_cast<int64_t>(cmd[1]);
  if (static_cast<int>(cmd[0]) == kPrefillOut) {
    KvTransfer t;
    absl::StatusOr<int64_t> id = JoinId(cmd[2], cmd[3]);
    if (!id.ok()) return id.status();
    t.id = *id;
    t.len = n;
    std::vector<int32_t> prompt(n);
    for (int64_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(cmd[4 + i]);
    absl::Status s = engine.Prefill(0, prompt, scratch_[local].data());
    if (!s.ok()) return s;
    if (first_device_ + local == root_device_) {  // the leader draws the first token
      SamplingParams sampling;
      {
        absl::MutexLock lock(&mu_);
        auto it = sampling_.find(t.id);
        if (it != sampling_.end()) {
          sampling = it->second;
          sampling_.erase(it);
        }
      }
      t.first_token = Sampler(sampling).Next(scratch_[local].data(), engine.vocab());
    }
    t.kv.resize(engine.KvFloatsPerToken() * n);
    engine.ExportKv(0, n, t.kv.data());
    engine.Release(0);
    if (!queues_[local]->Push(std::move(t))) return absl::UnavailableError("the serving group is stopping");
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < n; ++i) {
    const int slot = static_cast<int>(cmd[2 + i]);
    absl::StatusOr<int64_t> id = JoinId(cmd[2 + n + i], cmd[2 + 2 * n + i]);
    if (!id.ok()) return id.status();
    KvTransfer t;
    if (!queues_[local]->Pop(&t, absl::InfiniteDuration())) {
      return absl::UnavailableError("the serving group is stopping");
    }
    if (t.id != *id) {
      return absl::InternalError(absl::StrCat("prefill ", t.id, " arrived where ", *id, " was expected"));
    }
    absl::Status s = engine.ImportKv(slot, t.len, t.kv.data());
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void GroupEngine::TransferLoop(int local) {
  try {
    if (role_.kind == GroupRole::kPrefill) {
      SendTransfers(local);
    } else {
      ReceiveTransfers(local);
    }
  } catch (const std::exception& e) {
    Break(absl::UnavailableError(absl::StrCat("the serving group lost a rank: ", e.what())));
  }
  absl::MutexLock lock(&mu_);
  --transferring_;
}

void GroupEngine::SendTransfers(int local) {
  const int device = first_device_ + local;
  while (true) {
    KvTransfer t;
    const bool got = queues_[local]->Pop(&t, kQuiet);
    float header[TransferHeader::kFloats] = {kHeaderNoop, 0, 0, 0};
    if (got) {
      absl::Status s = TransferHeader{t.id, t.len, t.first_token}.Encode(header);
      if (!s.ok()) {
        // The generate side waits for this transfer, and no header can say so.
        Break(absl::InternalError(absl::StrCat("a prefilled transfer cannot be sent: ", s.message())));
        return;
      }
    } else {
      absl::MutexLock lock(&mu_);
      if (!broken_.ok()) return;
      if (running_ == 0 && queues_[local]->size() == 0) header[0] = kHeaderDone;  // the group stopped
    }
    comm_->Broadcast(train::kDataAxis, device, header, TransferHeader::kFloats, 0);
    if (header[0] == kHeaderDone) return;
    if (!got) continue;
    comm_->Broadcast(train::kDataAxis, device, t.kv.data(), static_cast<int64_t>(t.kv.size()), 0);
    kv_bytes_ += static_cast<int64_t>(t.kv.size() * sizeof(float));
  }
}

void GroupEngine::ReceiveTransfers(int local) {
  const int device = first_device_ + local;
  const int64_t per_token = engines_[local]->KvFloatsPerToken();
  while (queues_[local]->WaitForSpace()) {
    float header[TransferHeader::kFloats] = {0, 0, 0, 0};
    comm_->Broadcast(train::kDataAxis, device, header, TransferHeader::kFloats, 0);
    if (header[0] == kHeaderDone) return;
    if (header[0] == kHeaderNoop) continue;
    absl::StatusOr<TransferHeader> h = TransferHeader::Decode(header);
    if (!h.ok()) {
      Break(absl::InternalError(
          absl::StrCat("the prefill group sent a malformed transfer header: ", h.status().message())));
      return;
    }
    KvTransfer t;
    t.id = h->id;
    t.len = h->len;
    t.first_token = h->first_token;
    t.kv.resize(per_token * t.len);
    comm_->Broadcast(train::kDataAxis, device, t.kv.data(), static_cast<int64_t>(t.kv.size()), 0);
    kv_bytes_ += static_cast<int64_t>(t.kv.size() * sizeof(float));
    if (!queues_[local]->Push(std::move(t))) return;
  }
}

}  // namespace manta::serve
