// The core worker as host of its submitters and of its push transport:
// pushes go to the transport (push_transport.h), leases to the raylets, task
// events to the buffer; a push that ended has its returns stored, then is
// settled with the submitter that made it.
#include "common/rpc/client_call.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {

// ---------------------------------------------------------------- the submitters' host

class CoreWorkerImpl::SubmitHostImpl final : public SubmitHost {
 public:
  explicit SubmitHostImpl(CoreWorkerImpl* cw) : cw_(cw) {}

  void StartPushes(const std::vector<PushCall*>& calls) override { cw_->pushes_.Start(calls); }

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

  // Idempotent on the worker: made again while the connection breaks.
  void CancelOnWorker(const std::string& worker, const std::string& task_id, bool recursive, bool force,
                      std::function<void()> done) override {
    rpc::CancelTaskRequest req;
    req.set_task_id(task_id);
    req.set_recursive(recursive);
    req.set_force(force);
    rpc::RetryingUnaryCall<rpc::CancelTaskReply>(
        &cw_->loop_, cw_->options_.token, absl::Seconds(10), rpc::RetryPolicy{}, std::move(req),
        [stub = cw_->pool_.Worker(worker)](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->CancelTask(ctx, r, reply, std::move(cb));
        },
        [done = std::move(done)](const absl::Status&, rpc::CancelTaskReply&&) {
          if (done) done();
        });
  }

 private:
  CoreWorkerImpl* const cw_;
};

std::unique_ptr<SubmitHost> CoreWorkerImpl::MakeSubmitHost() { return std::make_unique<SubmitHostImpl>(this); }

// ---------------------------------------------------------------- the transport's host

class CoreWorkerImpl::PushHostImpl final : public PushTransport::Host {
 public:
  explicit PushHostImpl(CoreWorkerImpl* cw) : cw_(cw) {}

  std::shared_ptr<rpc::CoreWorkerService::Stub> Worker(const std::string& address,
                                                       const std::string& worker_id) override {
    return cw_->pool_.WorkerProcess(address, worker_id);
  }
  void Settle(PushCall* call, std::vector<PushCall*>* to_start) override { cw_->SettlePush(call, to_start); }

 private:
  CoreWorkerImpl* const cw_;
};

std::unique_ptr<PushTransport::Host> CoreWorkerImpl::MakePushHost() { return std::make_unique<PushHostImpl>(this); }

void CoreWorkerImpl::SettlePush(PushCall* call, std::vector<PushCall*>* to_start) {
  // Returns are stored first, so a waiting Get wakes while the bookkeeping
  // is done.
  // A retryable application error with retries left stores nothing: the
  // task runs again, holding its arguments.
  if (call->status.ok() && !(call->queue != nullptr && TaskSubmitter::RetriesApplicationError(*call))) {
    HandleReturns(call->reply);
    refs_.ReleaseHeld(call->request.spec().task_id());
  }
  if (call->queue == nullptr) {
    actors_.OnPushDone(*call, to_start);
  } else {
    tasks_.OnPushDone(*call, to_start);
  }
}

// ---------------------------------------------------------------- returns

void CoreWorkerImpl::HandleReturns(rpc::PushTaskReply& reply) {
  for (auto& r : *reply.mutable_returns()) {
    auto id = ObjectId::FromBinary(r.object_id());
    if (!id.ok()) continue;
    if (r.nested_size() > 0) refs_.HoldNested(*id, r);
    if (r.error().type() != rpc::ErrorInfo::NONE) {
      store_.Fail(*id, FromErrorInfo(r.error()));
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
