// PushTransport: how a process's tasks and actor calls reach the workers
// that run them. Every call goes over its worker's PushTasks stream
// (push_stream.h), one stream per worker, opened on the first call to it. A
// normal task's call whose connection broke goes to the same worker again,
// which runs an attempt once and answers a resend with its first reply. A
// call that ended is settled through the Host (its returns stored, its
// submitter told), and the calls that made due go out from there.
//
//   PushTransport pushes(&host, token);
//   pushes.Start({call});              // later: host.Settle(call, ...)
//   ...
//   pushes.Stop();                     // no call starts from now
//   bool quiet = pushes.CancelAll();   // streams cancelled, completions waited for
//   if (quiet) pushes.FreeEnded();     // once nothing can reach a call
//
// Owns: the stream to each worker, the calls started and not ended, the
// count of streams not yet over, and the calls that ended or were never
// started once stopping. A call belongs to the transport from Start until it
// is settled, after which the transport deletes it; once stopping, a call is
// only let go, and FreeEnded deletes it. The transport may be destroyed only
// once CancelAll has returned true.
//
// Threads: Start from any thread holding no submitter's lock (a call that
// fails at once completes inline); completions run on gRPC threads.
// Lock order: streams_mu_, then live_mu_; Host::Worker may be called with
// streams_mu_ held, nothing else of the host with either held.
//
// Internal header: includes gRPC; only runtime/core_worker/*.cc include it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "proto/core_worker.grpc.pb.h"
#include "runtime/core_worker/push_call.h"

namespace manta::core {

class PushStream;

class PushTransport {
 public:
  // What the transport needs of the process it carries calls for.
  class Host {
   public:
    virtual ~Host() = default;
    // A stub for worker process `worker_id` at `address` ("ip:port") that
    // no other process's calls use (ClientPool::WorkerProcess).
    virtual std::shared_ptr<rpc::CoreWorkerService::Stub> Worker(const std::string& address,
                                                                 const std::string& worker_id) = 0;
    // `call` ended with call->status (when OK, call->reply is the worker's
    // reply): stores its returns and settles it with its submitter, adding
    // to `to_start` the calls that made due. Never once stopping.
    virtual void Settle(PushCall* call, std::vector<PushCall*>* to_start) = 0;
  };

  // A push of a normal task whose connection broke (UNAVAILABLE) goes to the
  // same worker again, at once, this many times before the worker counts as
  // dead (a dead worker refuses the connection, so this costs little).
  static constexpr int kMaxResends = 9;

  // `host` outlives this; `token`: what every stream carries.
  PushTransport(Host* host, std::string token);
  PushTransport(const PushTransport&) = delete;
  PushTransport& operator=(const PushTransport&) = delete;

  // Starts `calls` (made under a submitter's lock, once it is released).
  // Once stopping, they are kept, not started, until FreeEnded.
  void Start(const std::vector<PushCall*>& calls) ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // From now on no call starts, none is sent again, and none is settled:
  // an ending call is only let go.
  void Stop() ABSL_LOCKS_EXCLUDED(live_mu_);
  // After Stop: cancels the calls in flight and the streams, and waits for
  // their completions; false if some did not end within 10 s (their
  // completions may still run, so neither this nor the host may be freed).
  bool CancelAll() ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // After CancelAll returned true and nothing can reach a call any more
  // (a pending actor call may point at one until its submitter is gone):
  // deletes the calls that ended once stopping.
  void FreeEnded() ABSL_LOCKS_EXCLUDED(live_mu_);

  // ---- for PushStream ----
  // A call's result or failure (gRPC thread, or inline from Start).
  void OnPushDone(PushCall* call, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // A stream that ended: no longer the one under `key` (if it was).
  void ForgetStream(const std::string& key, const PushStream* stream) ABSL_LOCKS_EXCLUDED(streams_mu_);
  // Last of a stream's completion; after it the stream touches nothing here.
  void StreamEnded() ABSL_LOCKS_EXCLUDED(live_mu_);

 private:
  void StartOne(PushCall* call) ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // Sends a started call on the stream to its worker (a new one if needed).
  // Under MANTA_testing_rpc_failure, a normal task's push is a "PushTask"
  // call: its request or reply may be dropped (it then fails UNAVAILABLE).
  void SendOnStream(PushCall* call) ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // Draws a normal task push's injected fault: true to drop its request,
  // or marks its reply to be dropped.
  bool InjectPushFault(PushCall* call);
  // A normal task's push whose connection broke goes out again (true) while
  // resends are left and the transport is not stopping.
  bool ResendPush(PushCall* call, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(live_mu_, streams_mu_);
  // The open stream to `call`'s worker process, or a new one, bound but not
  // started (*fresh; the caller starts it once it has sent on it); null
  // once stopping. Streams are by process: a call never goes out on a
  // stream to an earlier process at its address.
  std::shared_ptr<PushStream> StreamTo(const PushCall& call, bool* fresh) ABSL_LOCKS_EXCLUDED(streams_mu_);

  // Constant after construction.
  Host* const host_;
  const std::string token_;

  // Set once, under live_mu_ (so no call starts after it); read with or
  // without a lock.
  std::atomic<bool> stopping_{false};

  absl::Mutex streams_mu_;
  // The stream to each worker process, by "ip:port" and worker id.
  absl::flat_hash_map<std::string, std::shared_ptr<PushStream>> streams_ ABSL_GUARDED_BY(streams_mu_);

  absl::Mutex live_mu_;
  // The calls started and not completed: CancelAll waits until their
  // completions, which touch this object and the host, have all run.
  absl::flat_hash_set<PushCall*> live_pushes_ ABSL_GUARDED_BY(live_mu_);
  int live_streams_ ABSL_GUARDED_BY(live_mu_) = 0;                 // bound, OnDone not yet over
  std::vector<PushCall*> ended_pushes_ ABSL_GUARDED_BY(live_mu_);  // once stopping
};

}  // namespace manta::core
