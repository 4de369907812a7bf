// CoreWorkerClientPool: the GCS's calls to workers (pushing an actor's
// creation task, killing an actor, asking a worker to exit, asking whether a
// driver still lives).
//
//   pool->PushTask(worker_address, request, absl::Minutes(10),
//       [](const absl::Status& s, rpc::PushTaskReply&& reply) { ... });
//
// Connections are kept per worker id until Forget(). Every call has a
// deadline; its callback runs once, on the GCS loop thread. Every method is
// idempotent on the worker (a pushed task attempt runs once), and the gRPC
// implementation makes a call whose connection broke (UNAVAILABLE) again, a
// few times, before it reports the failure. Callers and
// callbacks: the GCS loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "proto/core_worker.pb.h"

namespace manta::gcs {

class CoreWorkerClientPool {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  virtual ~CoreWorkerClientPool() = default;

  // `worker` must carry ip, port and worker_id. A transport failure reports
  // Unavailable or DeadlineExceeded (the worker is gone or hung).
  virtual void PushTask(const rpc::Address& worker, const rpc::PushTaskRequest& request, absl::Duration timeout,
                        Callback<rpc::PushTaskReply> cb) = 0;
  virtual void KillActor(const rpc::Address& worker, const rpc::KillActorOnWorkerRequest& request,
                         Callback<rpc::KillActorOnWorkerReply> cb) = 0;
  virtual void Exit(const rpc::Address& worker, const rpc::ExitRequest& request, Callback<rpc::ExitReply> cb) = 0;
  // Whether the process at `worker`'s address is that worker (reply.same).
  virtual void CheckWorker(const rpc::Address& worker, Callback<rpc::CheckWorkerReply> cb) = 0;
  // The worker is gone: drop its connection.
  virtual void Forget(const std::string& worker_id) = 0;
};

// Over gRPC, with `token` on every call; callbacks are posted to `loop`.
std::unique_ptr<CoreWorkerClientPool> MakeGrpcCoreWorkerClientPool(EventLoop* loop, std::string token);

}  // namespace manta::gcs
