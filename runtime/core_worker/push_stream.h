// Tasks and actor calls over one PushTasks stream per caller and worker,
// instead of a PushTask call each: a call costs one message, not a new HTTP/2 stream with
// its headers, token and deadline, and calls that queue behind a write (a
// burst of calls, or replies ending while the last ones are sent) travel
// together in one message. Nothing waits to be batched: a write starts as
// soon as the previous one is done.
//
//   PushStream (caller; push_transport.h opens and owns them): Send(call)
//   queues the call's request and writes it; each result settles its call
//   through PushTransport::OnPushDone, as a PushTask reply would. When the
//   stream ends, every call still on it fails with the stream's status (and
//   is retried as a failed push is).
//
//   PushTasksReactor (worker): each push read is queued to the TaskReceiver
//   like a PushTask; Push::Finish writes its result back. An actor's
//   creation (pushed by the GCS) comes by PushTask only.
//
// Internal header: includes gRPC; only runtime/core_worker/*.cc include it.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/push_transport.h"
#include "runtime/core_worker/task_receiver.h"

namespace manta::core {

// A message gathers pushes (or results) up to about this many bytes; more
// wait for the next write.
constexpr size_t kMaxPushBatchBytes = 1 << 20;

class PushStream : public grpc::ClientBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply> {
 public:
  // `key`: what the transport knows it by (ForgetStream).
  PushStream(PushTransport* transport, std::string key);
  // Binds the call (`self` keeps this alive until OnDone); Send may be
  // called from then on, and never finds it broken before Start. Start
  // starts it.
  // Writes start outside reactions, so the stream holds the call open (a
  // gRPC hold) until it is broken and no write is out.
  // The stream keeps `stub` (and its channel) while it lives.
  void Bind(std::shared_ptr<PushStream> self, std::shared_ptr<rpc::CoreWorkerService::Stub> stub,
            const std::string& token);
  void Start();
  enum class Sent { kSent, kBroken, kTooLarge };
  // Sends `call`, whose result then reaches transport->OnPushDone. kBroken:
  // the stream is broken or over, send it on a new one. kTooLarge: no
  // message could carry it.
  Sent Send(PushCall* call);
  bool Usable();
  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  PushTransport* const transport_;
  const std::string key_;
  std::shared_ptr<rpc::CoreWorkerService::Stub> stub_;  // outlives ctx_
  grpc::ClientContext ctx_;
  std::shared_ptr<PushStream> self_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a read or write failed, or the stream ended
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_tag_ ABSL_GUARDED_BY(mu_) = 0;
  rpc::PushTasksRequest out_;                                      // being written (by the writer only)
  std::deque<rpc::PushTasksRequest> queued_ ABSL_GUARDED_BY(mu_);  // for the next writes
  size_t queued_back_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int64_t, PushCall*> sent_ ABSL_GUARDED_BY(mu_);  // awaiting results
  rpc::PushTasksReply in_;                                             // being read (by the reader only)

  // True (once) when the hold is to be released: broken, no write out.
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

class PushTasksReactor : public grpc::ServerBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply> {
 public:
  // One push read from the stream; lives until Finish.
  class Push final : public PushedTask {
   public:
    Push(PushTasksReactor* stream, int64_t tag) : stream_(stream), tag_(tag) {}
    const rpc::PushTaskRequest& request() const override { return request_; }
    rpc::PushTaskReply* reply() override { return &reply_; }
    rpc::PushTaskRequest* mutable_request() { return &request_; }
    // Sends the reply (status OK) or the refusal back; deletes this.
    void Finish(const grpc::Status& status) override;

   private:
    PushTasksReactor* const stream_;
    const int64_t tag_;
    rpc::PushTaskRequest request_;
    rpc::PushTaskReply reply_;
  };

  PushTasksReactor(CoreWorkerImpl* cw, grpc::CallbackServerContext* ctx);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // What to do once mu_ is released.
  struct Next {
    bool write = false;
    bool finish = false;
    grpc::Status status;  // to finish with
  };
  void Answer(int64_t tag, const grpc::Status& status, const rpc::PushTaskReply& reply);
  // No more reads; the stream ends with `status` once every push read is
  // answered.
  void EndReading(const grpc::Status& status);
  Next Step() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(const Next& next);

  CoreWorkerImpl* const cw_;
  rpc::PushTasksRequest in_;  // being read (by the reader only)
  rpc::PushTasksReply out_;   // being written (by the writer only)
  absl::Mutex mu_;
  std::deque<rpc::PushTasksReply> pending_ ABSL_GUARDED_BY(mu_);  // for the next writes
  size_t pending_back_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // pushes not yet finished
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: drop results
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
