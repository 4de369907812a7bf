// Objects between processes over gRPC: the core worker's GetObjectStatus
// and GetObject handlers (which ask its ObjectService), FetchObject and the
// stub pool.
#include <atomic>
#include <new>
#include <string>

#include "common/rpc/grpc_util.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "common/rpc/tsan_handoff.h"

namespace manta::core {

// ---------------------------------------------------------------- ClientPool

rpc::CoreWorkerService::Stub* ClientPool::Worker(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = workers_[address];
  if (!stub) stub = rpc::CoreWorkerService::NewStub(rpc::MakeChannel(address));
  return stub.get();
}

std::shared_ptr<rpc::CoreWorkerService::Stub> ClientPool::WorkerProcess(const std::string& address,
                                                                        const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  if (processes_.size() >= kMaxWorkerProcesses) processes_.clear();
  ProcessStub& entry = processes_[worker_id.empty() ? address : worker_id];
  if (!entry.stub || entry.address != address) {
    entry.address = address;
    entry.stub = rpc::CoreWorkerService::NewStub(rpc::MakeChannel(address));
  }
  return entry.stub;
}

rpc::NodeManagerService::Stub* ClientPool::Raylet(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = raylets_[address];
  if (!stub) stub = rpc::NodeManagerService::NewStub(rpc::MakeChannel(address));
  return stub.get();
}

// ---------------------------------------------------------------- fetching

absl::StatusOr<std::optional<Value>> StatusReplyValue(const ObjectId& id, const rpc::GetObjectStatusReply& reply,
                                                      bool asked_value) {
  switch (reply.status()) {
    case rpc::GetObjectStatusReply::PENDING:
      return MakeError(ErrorType::kTimeout, "timed out waiting for object " + id.Hex());
    case rpc::GetObjectStatusReply::NOT_FOUND:
      return MakeError(ErrorType::kObjectLost, "object " + id.Hex() + " is not at its owner (freed or lost)");
    default:
      break;
  }
  const rpc::ReturnObject& obj = reply.object();
  if (obj.error().type() != rpc::ErrorInfo::NONE) return FromErrorInfo(obj.error());
  if (!asked_value || obj.stored_remotely()) return std::nullopt;
  return std::optional<Value>(std::make_shared<const std::string>(obj.data()));
}

absl::StatusOr<Value> FetchObject(ClientPool* pool, const std::string& token, const std::string& address,
                                  const ObjectId& id, absl::Duration wait, rpc::CallCanceller* cancel) {
  auto* stub = pool->Worker(address);
  int wait_ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(wait), 1 << 30));
  rpc::GetObjectStatusRequest req;
  req.set_object_id(id.Binary());
  req.set_wait_ms(wait_ms);
  rpc::GetObjectStatusReply reply;
  {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token, wait + absl::Seconds(10));
    rpc::CallCanceller::Scope scope(cancel, &ctx);
    grpc::Status s = stub->GetObjectStatus(&ctx, req, &reply);
    if (!s.ok()) {
      return MakeError(ErrorType::kOwnerDied,
                       "cannot reach the owner of object " + id.Hex() + " at " + address + ": " + s.error_message());
    }
  }
  absl::StatusOr<std::optional<Value>> told = StatusReplyValue(id, reply, /*asked_value=*/true);
  if (!told.ok()) return told.status();
  if (told->has_value()) return **told;

  // Large: stream it in chunks.
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, absl::Minutes(10));
  rpc::CallCanceller::Scope scope(cancel, &ctx);
  rpc::GetObjectRequest get;
  get.set_object_id(id.Binary());
  auto reader = stub->GetObject(&ctx, get);
  auto out = std::make_shared<std::string>();
  rpc::ObjectChunk chunk;
  bool sized = false;
  while (reader->Read(&chunk)) {
    if (chunk.error().type() != rpc::ErrorInfo::NONE) {
      return FromErrorInfo(chunk.error());
    }
    if (!sized) {
      if (chunk.total_size() < 0 || chunk.total_size() > (int64_t{1} << 40)) {
        return MakeError(ErrorType::kObjectLost, "object " + id.Hex() + " has an invalid size");
      }
      try {
        out->reserve(static_cast<size_t>(chunk.total_size()));
      } catch (const std::bad_alloc&) {
        return MakeError(ErrorType::kObjectLost, "object " + id.Hex() + " (" + std::to_string(chunk.total_size()) +
                                                     " bytes) does not fit in this process's memory");
      }
      sized = true;
    }
    if (chunk.offset() != static_cast<int64_t>(out->size())) {
      return MakeError(ErrorType::kObjectLost, "object " + id.Hex() + " arrived out of order");
    }
    out->append(chunk.data());
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) {
    return MakeError(ErrorType::kOwnerDied, "lost the owner of object " + id.Hex() + ": " + s.error_message());
  }
  return std::shared_ptr<const std::string>(std::move(out));
}

// ---------------------------------------------------------------- serving

namespace {

// Streams one value in chunks; deletes itself when done.
class ObjectWriter : public grpc::ServerWriteReactor<rpc::ObjectChunk> {
 public:
  explicit ObjectWriter(const absl::Status& error) {
    ToErrorInfo(error, chunk_.mutable_error());
    done_ = true;
    MANTA_GRPC_HANDOFF_BEFORE();
    StartWrite(&chunk_);
  }
  // `on_sent` runs once the whole value was written.
  ObjectWriter(Value value, std::function<void()> on_sent) : value_(std::move(value)), on_sent_(std::move(on_sent)) {
    Next();
  }

  void OnWriteDone(bool ok) override {
    MANTA_GRPC_HANDOFF_AFTER();
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
    if (done_) {
      if (on_sent_) on_sent_();
      return Finish(grpc::Status::OK);
    }
    Next();
  }
  void OnDone() override {
    MANTA_GRPC_HANDOFF_AFTER();
    delete this;
  }

 private:
  void Next() {
    size_t n = std::min(kChunkBytes, value_->size() - offset_);
    chunk_.Clear();
    chunk_.set_total_size(static_cast<int64_t>(value_->size()));
    chunk_.set_offset(static_cast<int64_t>(offset_));
    chunk_.set_data(value_->data() + offset_, n);
    offset_ += n;
    done_ = offset_ >= value_->size();
    MANTA_GRPC_HANDOFF_BEFORE();
    StartWrite(&chunk_);
  }

  Value value_;
  std::function<void()> on_sent_;
  size_t offset_ = 0;
  bool done_ = false;
  rpc::ObjectChunk chunk_;
};

}  // namespace

grpc::Status CoreWorkerImpl::CheckObjectRequest(const grpc::ServerContextBase& ctx, const std::string& object_id,
                                                ObjectId* id) const {
  grpc::Status auth = rpc::CheckAuth(ctx, options_.token);
  if (!auth.ok()) return auth;
  auto parsed = ObjectId::FromBinary(object_id);
  if (!parsed.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed object id");
  *id = *parsed;
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::GetObjectStatus(grpc::CallbackServerContext* ctx,
                                                          const rpc::GetObjectStatusRequest* req,
                                                          rpc::GetObjectStatusReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  if (grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  objects_.AnswerStatus(
      id, absl::Milliseconds(std::max(0, req->wait_ms())), reply, [reactor] { reactor->Finish(grpc::Status::OK); },
      req->status_only());
  return reactor;
}

grpc::ServerWriteReactor<rpc::ObjectChunk>* CoreWorkerImpl::GetObject(grpc::CallbackServerContext* ctx,
                                                                      const rpc::GetObjectRequest* req) {
  grpc::Status auth = rpc::CheckAuth(*ctx, options_.token);
  if (!auth.ok()) {
    struct Refuse : grpc::ServerWriteReactor<rpc::ObjectChunk> {
      explicit Refuse(const grpc::Status& s) { Finish(s); }
      void OnDone() override {
        MANTA_GRPC_HANDOFF_AFTER();
        delete this;
      }
    };
    return new Refuse(auth);
  }
  auto id = ObjectId::FromBinary(req->object_id());
  if (!id.ok()) return new ObjectWriter(MakeError(ErrorType::kInvalidArgument, "malformed object id"));
  auto v = objects_.ValueToSend(*id);
  if (!v.ok()) return new ObjectWriter(v.status());
  return new ObjectWriter(*v, [this, oid = *id] { objects_.Sent(oid); });
}

}  // namespace manta::core
