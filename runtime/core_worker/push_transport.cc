#include "runtime/core_worker/push_transport.h"

#include "common/logging.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/rpc_chaos.h"
#include "runtime/core_worker/push_stream.h"

namespace manta::core {
namespace {

// A normal task's push counts as this call for fault injection.
constexpr char kPushTaskMethod[] = "/manta.rpc.CoreWorkerService/PushTask";

}  // namespace

PushTransport::PushTransport(Host* host, std::string token) : host_(host), token_(std::move(token)) {}

void PushTransport::Start(const std::vector<PushCall*>& calls) {
  for (PushCall* call : calls) StartOne(call);
}

void PushTransport::StartOne(PushCall* call) {
  {
    absl::MutexLock lock(&live_mu_);
    if (stopping_) {
      // Not started; a pending actor call may still point at it, so it
      // lives until FreeEnded.
      ended_pushes_.push_back(call);
      return;
    }
    live_pushes_.insert(call);
  }
  SendOnStream(call);
}

void PushTransport::SendOnStream(PushCall* call) {
  if (call->queue != nullptr && InjectPushFault(call)) {
    return OnPushDone(call, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropRequest)));
  }
  // Tasks and actor calls alike go over the worker's stream.
  while (true) {
    bool fresh = false;
    std::shared_ptr<PushStream> stream = StreamTo(*call, &fresh);
    if (stream == nullptr) {
      return OnPushDone(call, grpc::Status(grpc::StatusCode::CANCELLED, "this process is stopping"));
    }
    // A fresh stream takes the call before it starts, so it cannot refuse
    // it as broken: a worker that cannot be reached fails the call through
    // the stream's end, and its resend waits.
    const PushStream::Sent sent = stream->Send(call);
    if (fresh) stream->Start();
    if (sent == PushStream::Sent::kSent) return;
    if (sent == PushStream::Sent::kTooLarge) {
      return OnPushDone(call,
                        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the call is larger than a message may be"));
    }
  }
}

std::shared_ptr<PushStream> PushTransport::StreamTo(const PushCall& call, bool* fresh) {
  std::string key = call.address + "/" + call.worker_id;
  absl::MutexLock lock(&streams_mu_);
  if (stopping_) return nullptr;  // CancelAll has cancelled, or will see it
  auto it = streams_.find(key);
  if (it != streams_.end() && it->second->Usable()) return it->second;
  auto stream = std::make_shared<PushStream>(this, key);
  stream->Bind(stream, host_->Worker(call.address, call.worker_id), token_);
  streams_[key] = stream;
  *fresh = true;
  absl::MutexLock live(&live_mu_);
  ++live_streams_;
  return stream;
}

void PushTransport::ForgetStream(const std::string& key, const PushStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  auto it = streams_.find(key);
  if (it != streams_.end() && it->second.get() == stream) streams_.erase(it);
}

void PushTransport::StreamEnded() {
  absl::MutexLock lock(&live_mu_);
  --live_streams_;
}

bool PushTransport::ResendPush(PushCall* call, const grpc::Status& status) {
  if (call->queue == nullptr || status.error_code() != grpc::StatusCode::UNAVAILABLE || call->resends >= kMaxResends) {
    return false;
  }
  {
    absl::MutexLock lock(&live_mu_);
    if (stopping_) return false;  // no resend once stopping
    ++call->resends;
    call->reply.Clear();
  }
  SendOnStream(call);
  return true;
}

bool PushTransport::InjectPushFault(PushCall* call) {
  call->drop_reply = false;
  rpc::RpcChaos* chaos = rpc::ProcessRpcChaos();
  if (chaos == nullptr || !chaos->Covers(kPushTaskMethod)) return false;
  const rpc::RpcFault::Kind kind = chaos->Decide(kPushTaskMethod).kind;
  call->drop_reply = kind == rpc::RpcFault::kDropReply;
  return kind == rpc::RpcFault::kDropRequest;
}

void PushTransport::OnPushDone(PushCall* call, const grpc::Status& given) {
  grpc::Status status = given;
  if (call->drop_reply && status.ok()) {
    call->drop_reply = false;
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropReply));
  }
  // The connection broke: the same push to the same worker, which runs the
  // task at most once and answers a resend with the first push's reply.
  if (ResendPush(call, status)) return;
  // CancelAll waits for this: what is below runs before it returns.
  auto done = [this, call] {
    absl::MutexLock lock(&live_mu_);
    live_pushes_.erase(call);
    // Once stopping, CancelAll may still be cancelling it, and a pending
    // actor call may still point at it: FreeEnded deletes it.
    if (stopping_) {
      ended_pushes_.push_back(call);
    } else {
      delete call;
    }
  };
  if (stopping_) return done();
  call->status = rpc::ToAbslStatus(status);
  std::vector<PushCall*> to_start;
  host_->Settle(call, &to_start);
  // The queue's next calls go out from here (before this call counts as
  // done, so CancelAll also waits for them or they are kept).
  Start(to_start);
  done();
}

void PushTransport::Stop() {
  absl::MutexLock lock(&live_mu_);  // no call starts after this
  stopping_ = true;
}

bool PushTransport::CancelAll() {
  // stopping_ is set: no push starts and none is deleted but in FreeEnded.
  // Every push is on a stream, and a stream's end fails the calls on it
  // (StreamTo opens no new one now). Cancel without the lock (a completion
  // may run inline and take it).
  std::vector<std::shared_ptr<PushStream>> streams;
  {
    absl::MutexLock lock(&streams_mu_);
    for (auto& [key, stream] : streams_) streams.push_back(stream);
  }
  for (auto& stream : streams) stream->Cancel();
  streams.clear();
  absl::MutexLock lock(&live_mu_);
  auto all_ended = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_) { return live_pushes_.empty() && live_streams_ == 0; };
  if (!live_mu_.AwaitWithTimeout(absl::Condition(&all_ended), absl::Seconds(10))) {
    // Their completions would touch a freed object: keep them, and it.
    Logger("core_worker")
        ->error("{} task pushes and {} call streams did not end after being cancelled", live_pushes_.size(),
                live_streams_);
    return false;
  }
  return true;
}

void PushTransport::FreeEnded() {
  absl::MutexLock lock(&live_mu_);
  for (PushCall* call : ended_pushes_) delete call;
  ended_pushes_.clear();
}

}  // namespace manta::core
