// The push transport of the core worker: every task and actor call goes to
// its worker over that worker's PushTasks stream (push_stream.h), is resent
// while its connection breaks (normal tasks; the worker runs an attempt
// once), and ends by storing its returns and settling with its submitter.
// Also the submitters' host: leases from the raylets, task events.
#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "common/rpc/rpc_chaos.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/push_stream.h"

namespace manta::core {
namespace {

// A normal task's push counts as this call for fault injection.
constexpr char kPushTaskMethod[] = "/manta.rpc.CoreWorkerService/PushTask";
// A push of a normal task whose connection broke (UNAVAILABLE) goes to the
// same worker again, at once, this many times before the worker counts as
// dead (a dead worker refuses the connection, so this costs little); the
// worker runs an attempt once and answers a resend with its reply.
constexpr int kPushResends = 9;

}  // namespace

// ---------------------------------------------------------------- the submitters' host

class CoreWorkerImpl::SubmitHostImpl final : public SubmitHost {
 public:
  explicit SubmitHostImpl(CoreWorkerImpl* cw) : cw_(cw) {}

  void StartPushes(const std::vector<PushCall*>& calls) override { cw_->StartPushes(calls); }

  void RecordTaskEvent(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
                       const rpc::Address* worker, int pid,
                       std::shared_ptr<const TaskEventBuffer::Resources> resources) override {
    cw_->RecordTaskEvent(spec, state, error, worker, pid, std::move(resources));
  }

  // Raylet calls are idempotent by lease id: made again when the connection
  // broke.
  void RequestWorkerLease(const std::string& raylet, rpc::RequestWorkerLeaseRequest req,
                          std::function<void(const absl::Status&, rpc::RequestWorkerLeaseReply&&)> done) override {
    rpc::RetryingUnaryCall<rpc::RequestWorkerLeaseReply>(
        &cw_->loop_, cw_->options_.token, absl::Hours(24), rpc::RetryPolicy{}, std::move(req),
        [stub = cw_->pool_.Raylet(raylet)](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->RequestWorkerLease(ctx, r, reply, std::move(cb));
        },
        std::move(done));
  }

  // Returning a lease is tried longer (a miss leaks it until the job ends).
  void ReturnWorker(const std::string& raylet, rpc::ReturnWorkerRequest req, std::function<void()> done) override {
    rpc::RetryingUnaryCall<rpc::ReturnWorkerReply>(
        &cw_->loop_, cw_->options_.token, absl::Seconds(10), rpc::RetryPolicy::Patient(), std::move(req),
        [stub = cw_->pool_.Raylet(raylet)](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->ReturnWorker(ctx, r, reply, std::move(cb));
        },
        [done = std::move(done)](const absl::Status&, rpc::ReturnWorkerReply&&) {
          if (done) done();
        });
  }

 private:
  CoreWorkerImpl* const cw_;
};

std::unique_ptr<SubmitHost> CoreWorkerImpl::MakeSubmitHost() { return std::make_unique<SubmitHostImpl>(this); }

// ---------------------------------------------------------------- pushes

void CoreWorkerImpl::StartPush(PushCall* call) {
  {
    absl::MutexLock lock(&live_mu_);
    if (stopping_) {
      // Not started; a pending actor call may still point at it, so it
      // lives until Stop() is done.
      ended_pushes_.push_back(call);
      return;
    }
    live_pushes_.insert(call);
  }
  SendOnStream(call);
}

void CoreWorkerImpl::SendOnStream(PushCall* call) {
  if (call->queue != nullptr && InjectPushFault(call)) {
    return OnPushDone(call, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropRequest)));
  }
  // Tasks and actor calls alike go over the worker's stream.
  while (true) {
    bool fresh = false;
    std::shared_ptr<PushStream> stream = StreamTo(call->address, &fresh);
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
      return OnPushDone(call, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                           "the call is larger than a message may be"));
    }
  }
}

std::shared_ptr<PushStream> CoreWorkerImpl::StreamTo(const std::string& address, bool* fresh) {
  absl::MutexLock lock(&streams_mu_);
  if (stopping_) return nullptr;  // CancelPushes has cancelled, or will see it
  auto it = streams_.find(address);
  if (it != streams_.end() && it->second->Usable()) return it->second;
  auto stream = std::make_shared<PushStream>(this, address);
  stream->Bind(stream, pool_.Worker(address), options_.token);
  streams_[address] = stream;
  *fresh = true;
  absl::MutexLock live(&live_mu_);
  ++live_streams_;
  return stream;
}

void CoreWorkerImpl::ForgetStream(const std::string& address, const PushStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  auto it = streams_.find(address);
  if (it != streams_.end() && it->second.get() == stream) streams_.erase(it);
}

void CoreWorkerImpl::StreamEnded() {
  absl::MutexLock lock(&live_mu_);
  --live_streams_;
}

void CoreWorkerImpl::StartPushes(const std::vector<PushCall*>& calls) {
  for (PushCall* call : calls) StartPush(call);
}

bool CoreWorkerImpl::ResendPush(PushCall* call, const grpc::Status& status) {
  if (call->queue == nullptr || status.error_code() != grpc::StatusCode::UNAVAILABLE || call->resends >= kPushResends) {
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

bool CoreWorkerImpl::InjectPushFault(PushCall* call) {
  call->drop_reply = false;
  rpc::RpcChaos* chaos = rpc::ProcessRpcChaos();
  if (chaos == nullptr || !chaos->Covers(kPushTaskMethod)) return false;
  const rpc::RpcFault::Kind kind = chaos->Decide(kPushTaskMethod).kind;
  call->drop_reply = kind == rpc::RpcFault::kDropReply;
  return kind == rpc::RpcFault::kDropRequest;
}

void CoreWorkerImpl::OnPushDone(PushCall* call, const grpc::Status& given) {
  grpc::Status status = given;
  if (call->drop_reply && status.ok()) {
    call->drop_reply = false;
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropReply));
  }
  // The connection broke: the same push to the same worker, which runs the
  // task at most once and answers a resend with the first push's reply.
  if (ResendPush(call, status)) return;
  // Stop() waits for this: what is below runs before it returns.
  auto done = [this, call] {
    absl::MutexLock lock(&live_mu_);
    live_pushes_.erase(call);
    // Once stopping, CancelPushes may still be cancelling it, and a pending
    // actor call may still point at it: Stop() deletes it at the end.
    if (stopping_) {
      ended_pushes_.push_back(call);
    } else {
      delete call;
    }
  };
  if (stopping_) return done();
  // Returns are stored first, so a waiting Get wakes while the bookkeeping
  // is done.
  call->status = rpc::ToAbslStatus(status);
  if (status.ok()) {
    HandleReturns(call->reply);
    refs_.ReleaseHeld(call->request.spec().task_id());
  }
  std::vector<PushCall*> to_start;
  if (call->queue == nullptr) {
    actors_.OnPushDone(*call, &to_start);
  } else {
    tasks_.OnPushDone(*call, &to_start);
  }
  // The queue's next tasks go out from here (before this call counts as
  // done, so Stop() also waits for them or they are dropped).
  StartPushes(to_start);
  done();
}

bool CoreWorkerImpl::CancelPushes() {
  // stopping_ is set: no push starts and none is deleted but here. Every
  // push is on a stream, and a stream's end fails the calls on it (StreamTo
  // opens no new one now). Cancel without the lock (a completion may run
  // inline and take it).
  std::vector<std::shared_ptr<PushStream>> streams;
  {
    absl::MutexLock lock(&streams_mu_);
    for (auto& [address, stream] : streams_) streams.push_back(stream);
  }
  for (auto& stream : streams) stream->Cancel();
  streams.clear();
  absl::MutexLock lock(&live_mu_);
  auto all_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_) {
    return live_pushes_.empty() && live_streams_ == 0;
  };
  if (!live_mu_.AwaitWithTimeout(absl::Condition(&all_ended), absl::Seconds(10))) {
    // Their completions would touch a freed object: keep them, and it.
    Logger("core_worker")->error("{} task pushes and {} call streams did not end after being cancelled",
                                 live_pushes_.size(), live_streams_);
    return false;
  }
  return true;
}

void CoreWorkerImpl::DeleteEndedPushes() {
  absl::MutexLock lock(&live_mu_);
  for (PushCall* call : ended_pushes_) delete call;
  ended_pushes_.clear();
}

// ---------------------------------------------------------------- returns

void CoreWorkerImpl::HandleReturns(rpc::PushTaskReply& reply) {
  for (auto& r : *reply.mutable_returns()) {
    auto id = ObjectId::FromBinary(r.object_id());
    if (!id.ok()) continue;
    if (r.nested_size() > 0) refs_.HoldNested(*id, r);
    if (r.error().type() != rpc::ErrorInfo::NONE) {
      store_.Fail(*id, MakeError(FromProtoErrorType(r.error().type()), r.error().message()));
    } else if (!r.stored_remotely()) {
      store_.Put(*id, std::make_shared<const std::string>(std::move(*r.mutable_data())));
    } else {
      // Large: pull it from the worker now, off the io loop.
      std::string from = AddressKey(r.location());
      ObjectId oid = *id;
      auto fetch = [this, from, oid](rpc::CallCanceller* cancel) {
        auto v = FetchObject(&pool_, options_.token, from, oid, absl::Seconds(30), cancel);
        if (v.ok()) {
          store_.Put(oid, *v);
        } else {
          store_.Fail(oid, MakeError(ErrorType::kObjectLost, "could not fetch a task's return from " + from + ": " +
                                                                 std::string(v.status().message())));
        }
      };
      if (!fetches_.Submit(std::move(fetch))) {
        store_.Fail(oid, MakeError(ErrorType::kObjectLost, "the core worker is shutting down"));
      }
    }
  }
}

}  // namespace manta::core
