#include "runtime/core_worker/push_stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/rpc/tsan_handoff.h"
#include "runtime/core_worker/task_receiver.h"

namespace manta::core {
namespace {

// The message of `queue` that takes `bytes` more: the last one, or a new one
// when the last would pass kMaxPushBatchBytes. `back_bytes`: the last one's.
template <typename Message>
Message& BatchFor(std::deque<Message>& queue, size_t& back_bytes, size_t bytes) {
  if (queue.empty() || back_bytes + bytes > kMaxPushBatchBytes) {
    queue.emplace_back();
    back_bytes = 0;
  }
  back_bytes += bytes;
  return queue.back();
}

}  // namespace

// ---------------------------------------------------------------- caller side

PushStream::PushStream(PushTransport* transport, std::string key) : transport_(transport), key_(std::move(key)) {}

void PushStream::Bind(std::shared_ptr<PushStream> self, std::shared_ptr<rpc::CoreWorkerService::Stub> stub,
                      const std::string& token) {
  self_ = std::move(self);
  stub_ = std::move(stub);
  rpc::PrepareContext(&ctx_, token, absl::InfiniteDuration());
  stub_->async()->PushTasks(&ctx_, this);
}

void PushStream::Start() {
  AddHold();
  MANTA_GRPC_HANDOFF_BEFORE();
  StartRead(&in_);
  MANTA_GRPC_HANDOFF_BEFORE();
  StartCall();
}

bool PushStream::Usable() {
  absl::MutexLock lock(&mu_);
  return !broken_;
}

bool PushStream::ReleaseHoldLocked() {
  if (!broken_ || writing_ || hold_released_) return false;
  hold_released_ = true;
  return true;
}

PushStream::Sent PushStream::Send(PushCall* call) {
  std::string wire;
  call->request.SerializeToString(&wire);
  // Over the limit, it would end the stream, and every call on it.
  if (wire.size() + 64 > static_cast<size_t>(rpc::kMaxMessageBytes)) return Sent::kTooLarge;
  {
    absl::MutexLock lock(&mu_);
    if (broken_) return Sent::kBroken;
    const int64_t tag = next_tag_++;
    sent_.emplace(tag, call);
    rpc::PushTasksRequest& batch = BatchFor(queued_, queued_back_bytes_, wire.size());
    batch.add_tags(tag);
    batch.add_pushes(std::move(wire));
    if (writing_) return Sent::kSent;  // goes with a later write
    writing_ = true;
    out_.Swap(&queued_.front());
    queued_.pop_front();
  }
  MANTA_GRPC_HANDOFF_BEFORE();
  StartWrite(&out_);
  return Sent::kSent;
}

void PushStream::OnWriteDone(bool ok) {
  MANTA_GRPC_HANDOFF_AFTER();
  bool release = false, write = false;
  {
    absl::MutexLock lock(&mu_);
    out_.Clear();
    if (!ok && !broken_) {
      // The call is ending; make sure of it (it may be out of the
      // transport's streams already, where CancelAll would not find it).
      broken_ = true;
      ctx_.TryCancel();
    }
    if (broken_ || queued_.empty()) {
      writing_ = false;
      release = ReleaseHoldLocked();
    } else {
      out_.Swap(&queued_.front());
      queued_.pop_front();
      write = true;
    }
  }
  if (write) {
    MANTA_GRPC_HANDOFF_BEFORE();
    StartWrite(&out_);
  }
  if (release) RemoveHold();
}

void PushStream::OnReadDone(bool ok) {
  MANTA_GRPC_HANDOFF_AFTER();
  if (!ok) {
    // The stream is over: no write starts from now, and once none is out
    // the hold goes, so OnDone can follow.
    bool release;
    {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      release = ReleaseHoldLocked();
    }
    if (release) RemoveHold();
    return;
  }
  // The calls these results settle, taken off the stream at once (a tag
  // not of ours settles nothing).
  std::vector<PushCall*> calls(in_.results_size(), nullptr);
  {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < in_.results_size(); ++i) {
      auto it = sent_.find(in_.results(i).tag());
      if (it == sent_.end()) continue;
      calls[i] = it->second;
      sent_.erase(it);
    }
  }
  for (int i = 0; i < in_.results_size(); ++i) {
    PushCall* call = calls[i];
    if (call == nullptr) continue;
    const rpc::PushResult& r = in_.results(i);
    grpc::Status status;
    if (r.code() != 0) {
      const int code = r.code() > 0 && r.code() <= grpc::StatusCode::UNAUTHENTICATED ? r.code() : grpc::UNKNOWN;
      status = grpc::Status(static_cast<grpc::StatusCode>(code), r.message());
    } else if (!call->reply.ParseFromString(r.reply())) {
      status = grpc::Status(grpc::StatusCode::INTERNAL, "malformed reply from the worker");
    }
    transport_->OnPushDone(call, status);
  }
  in_.Clear();
  MANTA_GRPC_HANDOFF_BEFORE();
  StartRead(&in_);
}

void PushStream::OnDone(const grpc::Status& status) {
  MANTA_GRPC_HANDOFF_AFTER();
  std::vector<std::pair<int64_t, PushCall*>> left;
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    left.assign(sent_.begin(), sent_.end());
    sent_.clear();
  }
  transport_->ForgetStream(key_, this);
  // In the order they were sent. The worker ends a stream only with an
  // error (the caller never closes its side). What ended it is no refusal
  // of the calls on it, unless every call would meet it (token, a process
  // that takes no calls): they may be pushed again. (Once this process is
  // stopping, OnPushDone only lets them go.)
  std::sort(left.begin(), left.end());
  grpc::Status why = status;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::FAILED_PRECONDITION:  // not a worker
      break;
    default:
      why = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                         "the call stream to the actor's worker ended: " +
                             (status.ok() ? std::string("by the worker") : status.error_message()));
  }
  for (auto& [tag, call] : left) transport_->OnPushDone(call, why);
  transport_->StreamEnded();     // after this, `transport_` may be gone
  auto self = std::move(self_);  // may free this, last
}

// ---------------------------------------------------------------- worker side

PushTasksReactor::PushTasksReactor(CoreWorkerImpl* cw, grpc::CallbackServerContext* ctx) : cw_(cw) {
  grpc::Status refused = rpc::CheckAuth(*ctx, cw->options().token);
  if (refused.ok()) refused = cw->CheckRunsTasks();
  if (!refused.ok()) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      reading_done_ = true;
    }
    MANTA_GRPC_HANDOFF_BEFORE();
    Finish(refused);
    return;
  }
  MANTA_GRPC_HANDOFF_BEFORE();
  StartRead(&in_);
}

void PushTasksReactor::Push::Finish(const grpc::Status& status) {
  stream_->Answer(tag_, status, reply_);
  delete this;
}

void PushTasksReactor::EndReading(const grpc::Status& status) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    reading_done_ = true;
    final_status_ = status;
    next = Step();
  }
  Act(next);
}

void PushTasksReactor::OnReadDone(bool ok) {
  MANTA_GRPC_HANDOFF_AFTER();
  if (!ok) return EndReading(grpc::Status::OK);
  if (in_.tags_size() != in_.pushes_size()) {
    // No more reads: the stream ends with this once its pushes are answered.
    return EndReading(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "PushTasks: one tag per push"));
  }
  {
    absl::MutexLock lock(&mu_);
    outstanding_ += in_.pushes_size();
  }
  for (int i = 0; i < in_.pushes_size(); ++i) {
    auto* push = new Push(this, in_.tags(i));
    grpc::Status refused;
    if (!push->mutable_request()->ParseFromString(in_.pushes(i))) {
      refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed push");
    } else if (push->request().spec().type() == rpc::TaskSpec::ACTOR_CREATION_TASK) {
      refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an actor's creation does not go over PushTasks");
    } else {
      refused = cw_->CheckPush(push->request());
    }
    if (!refused.ok()) {
      push->Finish(refused);
    } else {
      cw_->receiver_->Enqueue(push);
    }
  }
  in_.Clear();
  MANTA_GRPC_HANDOFF_BEFORE();
  StartRead(&in_);
}

void PushTasksReactor::Answer(int64_t tag, const grpc::Status& status, const rpc::PushTaskReply& reply) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    --outstanding_;
    if (!broken_ && !finished_) {
      const size_t bytes = status.ok() ? reply.ByteSizeLong() : status.error_message().size();
      rpc::PushResult* r = BatchFor(pending_, pending_back_bytes_, bytes).add_results();
      r->set_tag(tag);
      if (status.ok()) {
        reply.SerializeToString(r->mutable_reply());
      } else {
        r->set_code(status.error_code());
        r->set_message(status.error_message());
      }
    }
    next = Step();
  }
  Act(next);
}

PushTasksReactor::Next PushTasksReactor::Step() {
  Next next;
  if (!writing_ && !finished_ && !broken_ && !pending_.empty()) {
    writing_ = true;
    out_.Swap(&pending_.front());
    pending_.pop_front();
    next.write = true;
  } else if (!writing_ && !finished_ && reading_done_ && outstanding_ == 0) {
    finished_ = true;
    next.finish = true;
    next.status = final_status_;
  }
  return next;
}

void PushTasksReactor::Act(const Next& next) {
  if (next.write) {
    MANTA_GRPC_HANDOFF_BEFORE();
    StartWrite(&out_);
  }
  // Nothing here touches this after Finish: OnDone may free it at once.
  if (next.finish) {
    MANTA_GRPC_HANDOFF_BEFORE();
    Finish(next.status);
  }
}

void PushTasksReactor::OnWriteDone(bool ok) {
  MANTA_GRPC_HANDOFF_AFTER();
  Next next;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    out_.Clear();
    if (!ok) {
      broken_ = true;
      pending_.clear();
    }
    next = Step();
  }
  Act(next);
}

// After Finish, which waits for every push read to be answered: nothing
// refers to this any more.
void PushTasksReactor::OnDone() {
  MANTA_GRPC_HANDOFF_AFTER();
  delete this;
}

}  // namespace manta::core
