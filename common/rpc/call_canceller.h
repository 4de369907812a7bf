// CallCanceller: ends blocking client calls from another thread.
//
// A thread making a blocking call registers its ClientContext for the call's
// length (Scope); CancelAll() cancels every registered call and every call
// registered afterwards, so the calls return CANCELLED at once instead of
// running to their deadlines. Used to stop owned threads promptly.
//
//   rpc::CallCanceller canceller;
//   grpc::ClientContext ctx;
//   rpc::CallCanceller::Scope scope(&canceller, &ctx);   // may be cancelled from here
//   stub->Call(&ctx, req, &reply);
//   ...
//   canceller.CancelAll();   // from any thread
//
// Thread-safety: every method from any thread.
#pragma once

#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace manta::rpc {

class CallCanceller {
 public:
  // Registers `ctx` for its scope; a null canceller registers nothing.
  class Scope {
   public:
    Scope(CallCanceller* canceller, grpc::ClientContext* ctx) : canceller_(canceller), ctx_(ctx) {
      if (canceller_ != nullptr) canceller_->Add(ctx_);
    }
    ~Scope() {
      if (canceller_ != nullptr) canceller_->Remove(ctx_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallCanceller* canceller_;
    grpc::ClientContext* ctx_;
  };

  void CancelAll() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
  }

  bool cancelled() const {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

 private:
  void Add(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    calls_.insert(ctx);
    // Cancelled before the call starts: gRPC cancels it as it starts.
    if (cancelled_) ctx->TryCancel();
  }
  void Remove(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    calls_.erase(ctx);
  }

  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::rpc
