// The core worker's side of reference counting (reference_counter.h): its
// API calls, the borrowing handlers of its service, and GrpcPeers (peers.h),
// the counter's and the object service's way to other processes.
#include "common/rpc/client_call.h"
#include "common/rpc/grpc_util.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/peers.h"

namespace manta::core {
namespace {
constexpr absl::Duration kBorrowRpcTimeout = absl::Seconds(10);
}  // namespace

bool GrpcPeers::AddBorrower(const std::string& owner, const ObjectId& id, const rpc::Address& borrower) {
  rpc::AddBorrowerRequest req;
  req.set_object_id(id.Binary());
  *req.mutable_borrower() = borrower;
  auto* stub = pool_->Worker(owner);
  auto reply = SyncCall<rpc::AddBorrowerReply>(
      token_, [&](auto* ctx, auto* r) { return stub->AddBorrower(ctx, req, r); }, kBorrowRpcTimeout);
  return reply.ok() && reply->found();
}

void GrpcPeers::RemoveBorrower(const std::string& owner, const ObjectId& id, const std::string& borrower_worker_id,
                               int count) {
  rpc::RemoveBorrowerRequest req;
  req.set_object_id(id.Binary());
  req.set_borrower_worker_id(borrower_worker_id);
  req.set_count(count);
  loop_->Post([this, stub = pool_->Worker(owner), req = std::move(req)]() mutable {
    rpc::UnaryCall<rpc::RemoveBorrowerReply>(
        loop_, token_, kBorrowRpcTimeout, std::move(req),
        [stub](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->RemoveBorrower(ctx, r, reply, std::move(done));
        },
        [](const absl::Status&, rpc::RemoveBorrowerReply&&) {});
  });
}

void GrpcPeers::CheckWorker(const rpc::Address& at, const std::string& worker_id,
                            std::function<void(const absl::Status&, bool)> done) {
  rpc::CheckWorkerRequest req;
  req.set_worker_id(worker_id);
  loop_->Post([this, stub = pool_->Worker(AddressKey(at)), req = std::move(req), done = std::move(done)]() mutable {
    rpc::UnaryCall<rpc::CheckWorkerReply>(
        loop_, token_, kBorrowRpcTimeout, std::move(req),
        [stub](auto* ctx, auto* r, auto* reply, auto cb) { stub->async()->CheckWorker(ctx, r, reply, std::move(cb)); },
        [done = std::move(done)](const absl::Status& s, rpc::CheckWorkerReply&& reply) { done(s, reply.same()); });
  });
}

absl::StatusOr<Value> GrpcPeers::Fetch(const std::string& owner, const ObjectId& id, absl::Duration wait) {
  return FetchObject(pool_, token_, owner, id, wait);
}

void GrpcPeers::Watch(const std::string& owner, const ObjectId& id, absl::Duration wait, bool fetch, Watched done) {
  rpc::GetObjectStatusRequest req;
  req.set_object_id(id.Binary());
  req.set_wait_ms(static_cast<int32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(wait), 1 << 30)));
  req.set_status_only(!fetch);
  loop_->Post([this, owner, id, wait, fetch, req = std::move(req), done = std::move(done)]() mutable {
    rpc::UnaryCall<rpc::GetObjectStatusReply>(
        loop_, token_, wait + kBorrowRpcTimeout, std::move(req),
        [stub = pool_->Worker(owner)](auto* ctx, auto* r, auto* reply, auto cb) {
          stub->async()->GetObjectStatus(ctx, r, reply, std::move(cb));
        },
        [this, owner, id, fetch, done = std::move(done)](const absl::Status& s, rpc::GetObjectStatusReply&& reply) {
          if (!s.ok()) {
            return done(MakeError(ErrorType::kOwnerDied, "cannot reach the owner of object " + id.Hex() + " at " +
                                                             owner + ": " + std::string(s.message())));
          }
          absl::StatusOr<std::optional<Value>> told = StatusReplyValue(id, reply, fetch);
          if (!told.ok() || told->has_value() || !fetch) return done(std::move(told));
          // Ready, and too large to come inline: streamed in off the loop.
          bool queued = fetches_->Submit([this, owner, id, done](rpc::CallCanceller* cancel) {
            absl::StatusOr<Value> v = FetchObject(pool_, token_, owner, id, absl::ZeroDuration(), cancel);
            if (!v.ok()) return done(v.status());
            done(std::optional<Value>(*std::move(v)));
          });
          if (!queued) done(MakeError(ErrorType::kObjectLost, "the core worker is shutting down"));
        });
  });
}

void GrpcPeers::RunAfter(absl::Duration delay, std::function<void()> fn) {
  loop_->Post([this, delay, fn = std::move(fn)]() mutable { loop_->RunOnce(delay, std::move(fn)); });
}

void CoreWorkerImpl::AddLocalReference(const ObjectId& id) { refs_.AddLocalReference(id); }

void CoreWorkerImpl::RemoveLocalReference(const ObjectId& id) { refs_.RemoveLocalReference(id); }

void CoreWorkerImpl::AddBorrowedReference(const ObjectRefInfo& info) { refs_.AddBorrowedReference(info); }

grpc::ServerUnaryReactor* CoreWorkerImpl::CheckWorker(grpc::CallbackServerContext* ctx,
                                                      const rpc::CheckWorkerRequest* req,
                                                      rpc::CheckWorkerReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status auth = rpc::CheckAuth(*ctx, options_.token);
  if (auth.ok()) reply->set_same(req->worker_id() == address_proto_.worker_id());
  reactor->Finish(auth);
  return reactor;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::AddBorrower(grpc::CallbackServerContext* ctx,
                                                      const rpc::AddBorrowerRequest* req,
                                                      rpc::AddBorrowerReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id);
  if (s.ok() && req->borrower().worker_id().empty()) {
    s = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed borrower");
  }
  if (s.ok()) reply->set_found(refs_.RecordBorrower(id, req->borrower()));
  reactor->Finish(s);
  return reactor;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::RemoveBorrower(grpc::CallbackServerContext* ctx,
                                                         const rpc::RemoveBorrowerRequest* req,
                                                         rpc::RemoveBorrowerReply*) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id);
  if (s.ok()) refs_.RemoveBorrower(id, req->borrower_worker_id(), req->count());
  reactor->Finish(s);
  return reactor;
}

}  // namespace manta::core
