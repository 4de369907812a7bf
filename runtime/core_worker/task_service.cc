// The worker side of the core worker's service: pushes go to its
// TaskReceiver (task_receiver.h), which knows this process as a TaskHost.
#include <atomic>
#include <cstdlib>

#include "common/logging.h"
#include "common/rpc/grpc_util.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/push_stream.h"
#include "runtime/core_worker/task_receiver.h"

namespace manta::core {
namespace {

// A push by PushTask: finished through its call's reactor.
class UnaryPush final : public PushedTask {
 public:
  UnaryPush(const rpc::PushTaskRequest* request, rpc::PushTaskReply* reply, grpc::ServerUnaryReactor* reactor)
      : request_(request), reply_(reply), reactor_(reactor) {}
  const rpc::PushTaskRequest& request() const override { return *request_; }
  rpc::PushTaskReply* reply() override { return reply_; }
  void Finish(const grpc::Status& status) override {
    reactor_->Finish(status);
    delete this;
  }

 private:
  const rpc::PushTaskRequest* const request_;
  rpc::PushTaskReply* const reply_;
  grpc::ServerUnaryReactor* const reactor_;
};

}  // namespace

class CoreWorkerImpl::ReceiverHost final : public TaskHost {
 public:
  explicit ReceiverHost(CoreWorkerImpl* cw) : cw_(cw) {}
  absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg) override { return cw_->objects_.ResolveArg(arg); }
  void HandOverRefs(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs, rpc::ReturnObject* ret) override {
    cw_->refs_.HandOverNested(spec, std::move(refs), ret);
  }
  void DropRef(const ObjectId& id) override { cw_->refs_.RemoveLocalReference(id); }
  void AddRef(const ObjectId& id) override { cw_->refs_.AddLocalReference(id); }
  void HoldForOwner(const ObjectId& id, Value value, rpc::Address* location) override {
    cw_->objects_.HoldForOwner(id, std::move(value));
    *location = cw_->address_proto_;
  }
  void TaskRunning(const rpc::TaskSpec& spec, TaskEventBuffer::Ticket* ticket) override {
    if (auto id = TaskId::FromBinary(spec.task_id()); id.ok()) cw_->children_.Begin(*id);
    // Where it runs is here; an owner's records say where it pushed the
    // task, or nothing (its own address is not where the task ran).
    cw_->RecordTaskEvent(spec, rpc::TaskEvent::RUNNING, nullptr, &cw_->address_proto_, cw_->pid_, nullptr, ticket);
  }
  void TaskEnded(const rpc::TaskSpec& spec, const TaskEventBuffer::Ticket& ticket) override {
    if (auto id = TaskId::FromBinary(spec.task_id()); id.ok()) cw_->children_.End(*id);
    cw_->task_events_.Withdraw(ticket);
  }

 private:
  CoreWorkerImpl* const cw_;
};

void CoreWorkerImpl::StartReceiver() {
  receiver_host_ = std::make_unique<ReceiverHost>(this);
  receiver_ = std::make_unique<TaskReceiver>(receiver_host_.get());
}

grpc::ServerUnaryReactor* CoreWorkerImpl::PushTask(grpc::CallbackServerContext* ctx, const rpc::PushTaskRequest* req,
                                                   rpc::PushTaskReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status refused = rpc::CheckAuth(*ctx, options_.token);
  if (refused.ok()) refused = CheckPush(*req);
  if (!refused.ok()) {
    reactor->Finish(refused);
  } else {
    receiver_->Enqueue(new UnaryPush(req, reply, reactor));
  }
  return reactor;
}

grpc::ServerBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply>* CoreWorkerImpl::PushTasks(
    grpc::CallbackServerContext* ctx) {
  return new PushTasksReactor(this, ctx);
}

grpc::Status CoreWorkerImpl::CheckRunsTasks() const {
  if (!receiver_) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "a driver does not run tasks");
  return grpc::Status::OK;
}

grpc::Status CoreWorkerImpl::CheckPush(const rpc::PushTaskRequest& req) const {
  if (grpc::Status s = CheckRunsTasks(); !s.ok()) return s;
  return receiver_->Admit(req, worker_id_.Binary());
}

grpc::ServerUnaryReactor* CoreWorkerImpl::KillActor(grpc::CallbackServerContext* ctx,
                                                    const rpc::KillActorOnWorkerRequest*,
                                                    rpc::KillActorOnWorkerReply*) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status auth = rpc::CheckAuth(*ctx, options_.token);
  reactor->Finish(auth);
  if (auth.ok() && receiver_) receiver_->ExitSoon(0);
  return reactor;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::Exit(grpc::CallbackServerContext* ctx, const rpc::ExitRequest*,
                                               rpc::ExitReply*) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status auth = rpc::CheckAuth(*ctx, options_.token);
  reactor->Finish(auth);
  if (auth.ok() && receiver_) receiver_->ExitSoon(0);
  return reactor;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::CancelTask(grpc::CallbackServerContext* ctx,
                                                     const rpc::CancelTaskRequest* req, rpc::CancelTaskReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status s = rpc::CheckAuth(*ctx, options_.token);
  absl::StatusOr<TaskId> task = TaskId::FromBinary(req->task_id());
  if (s.ok() && !task.ok()) s = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed task id");
  if (!s.ok() || !receiver_) {  // a driver runs no task
    reactor->Finish(s);
    return reactor;
  }
  // Its children are taken before it is interrupted (ending, it forgets
  // them), and cancelled after its flag is set: a task that fails because
  // a child was cancelled still ends cancelled. Forced, it is not
  // interrupted: its caller kills this worker once the children's cancels
  // were carried out, which is when this is answered.
  std::vector<ChildTasks::Child> children;
  if (req->recursive()) children = children_.Take(*task, req->force());
  reply->set_found(receiver_->Cancel(req->task_id(), /*interrupt=*/!req->force()));
  CancelChildren(*task, std::move(children), req->force(), [reactor] { reactor->Finish(grpc::Status::OK); });
  return reactor;
}

grpc::ServerUnaryReactor* CoreWorkerImpl::RemoteCancelTask(grpc::CallbackServerContext* ctx,
                                                           const rpc::RemoteCancelTaskRequest* req,
                                                           rpc::RemoteCancelTaskReply*) {
  auto* reactor = ctx->DefaultReactor();
  ObjectId id;
  grpc::Status s = CheckObjectRequest(*ctx, req->object_id(), &id);
  // Owned here: nothing in it blocks (the worker is told asynchronously).
  if (s.ok()) s = rpc::ToGrpcStatus(CancelTask(ObjectRefInfo{id, std::string()}, req->force(), req->recursive()));
  reactor->Finish(s);
  return reactor;
}

void CoreWorkerImpl::CancelChildren(const TaskId& parent, std::vector<ChildTasks::Child> children, bool force,
                                    std::function<void()> done) {
  auto left = std::make_shared<std::atomic<size_t>>(children.size() + 1);
  auto one_done = [left, done = std::move(done)] {
    if (left->fetch_sub(1) == 1) done();
  };
  for (const ChildTasks::Child& child : children) {
    if (child.actor.IsNil()) {
      // NotFound: it ended already.
      (void)tasks_.Cancel(child.task.Binary(), force, /*recursive=*/true, one_done);
      continue;
    }
    absl::Status s = actors_.Cancel(child.task.Binary(), /*force=*/false, /*recursive=*/true);
    if (!s.ok() && !absl::IsNotFound(s)) {
      Logger("core_worker")
          ->warn("cancelling actor call {} of task {}: {}", child.task.Hex(), parent.Hex(), s.ToString());
    }
    one_done();
  }
  one_done();
}

void CoreWorkerImpl::RunTaskLoop() {
  receiver_->RunMainLoop();  // until stopped, which a worker never is
  std::_Exit(0);
}

}  // namespace manta::core
