#include "common/rpc/rpc_chaos_interceptor.h"

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace manta::rpc {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Runs callbacks at their due time on one thread, started on first use and
// never stopped (calls may be held while the process exits).
class DelayThread {
 public:
  static DelayThread* Get() {
    static DelayThread* const thread = new DelayThread;
    return thread;
  }

  void After(absl::Duration delay, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    due_.emplace(absl::Now() + delay, std::move(fn));
    changed_ = true;
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    }
  }

 private:
  void Run() {
    mu_.Lock();
    while (true) {
      if (due_.empty()) {
        mu_.Await(absl::Condition(
            +[](std::multimap<absl::Time, std::function<void()>>* d) { return !d->empty(); }, &due_));
        continue;
      }
      absl::Time next = due_.begin()->first;
      if (absl::Now() < next) {
        changed_ = false;
        mu_.AwaitWithDeadline(absl::Condition(&changed_), next);
        continue;
      }
      std::function<void()> fn = std::move(due_.begin()->second);
      due_.erase(due_.begin());
      mu_.Unlock();
      fn();
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  std::multimap<absl::Time, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  bool changed_ ABSL_GUARDED_BY(mu_) = false;  // due_ gained an entry
  bool started_ ABSL_GUARDED_BY(mu_) = false;
};

// One per covered call; gRPC owns and deletes it.
class ChaosInterceptor : public grpc::experimental::Interceptor {
 public:
  ChaosInterceptor(RpcChaos* chaos, std::string method) : chaos_(chaos), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      fault_ = chaos_->Decide(method_);
      if (fault_.kind == RpcFault::kDropRequest) return m->Hijack();
      if (fault_.delay > absl::ZeroDuration()) {
        DelayThread::Get()->After(fault_.delay, [m] { m->Proceed(); });
        return;
      }
      return m->Proceed();
    }
    // Only a hijacked (dropped) call has PRE_RECV hooks: nothing comes back.
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE)) m->FailHijackedRecvMessage();
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS)) {
      *m->GetRecvStatus() = Unavailable(RpcFault::kDropRequest);
    }
    if (fault_.kind == RpcFault::kDropReply &&
        m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
      *m->GetRecvStatus() = Unavailable(RpcFault::kDropReply);
    }
    m->Proceed();
  }

 private:
  grpc::Status Unavailable(RpcFault::Kind kind) const {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, InjectedFailureMessage(method_, kind));
  }

  RpcChaos* const chaos_;
  const std::string method_;
  RpcFault fault_;
};

class ChaosInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ChaosInterceptorFactory(RpcChaos* chaos) : chaos_(chaos) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo* info) override {
    if (info->type() != grpc::experimental::ClientRpcInfo::Type::UNARY || info->method() == nullptr ||
        !chaos_->Covers(info->method())) {
      return nullptr;
    }
    return new ChaosInterceptor(chaos_, info->method());
  }

 private:
  RpcChaos* const chaos_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeRpcChaosInterceptorFactory(RpcChaos* chaos) {
  return std::make_unique<ChaosInterceptorFactory>(chaos);
}

}  // namespace manta::rpc
