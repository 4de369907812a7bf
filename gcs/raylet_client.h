// RayletClientPool: the GCS's calls to raylets (worker leases for actors,
// returning workers, stopping a finished job's workers, reserving
// placement-group bundles, draining a node).
//
//   pool->RequestWorkerLease(node, "10.0.0.2:7000", request,
//       [](const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) { ... });
//
// Implementations keep one connection per node until Forget(). Every call has
// a deadline; its callback runs once, on the GCS loop thread. Every method
// is idempotent on the raylet, and the gRPC implementation makes a call
// whose connection broke (UNAVAILABLE) again, a few times, before it reports
// the failure. Callers and
// callbacks: the GCS loop thread only. The gRPC implementation is made by
// MakeGrpcRayletClientPool; managers' tests hand in fakes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "proto/node_manager.pb.h"

namespace manta::gcs {

class RayletClientPool {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  virtual ~RayletClientPool() = default;

  // `address` is the raylet's "ip:port". A failed call reports Unavailable or
  // DeadlineExceeded; the reply is then empty.
  virtual void RequestWorkerLease(const NodeId& node, const std::string& address,
                                  const rpc::RequestWorkerLeaseRequest& request,
                                  Callback<rpc::RequestWorkerLeaseReply> cb) = 0;
  virtual void ReturnWorker(const NodeId& node, const std::string& address, const rpc::ReturnWorkerRequest& request,
                            Callback<rpc::ReturnWorkerReply> cb) = 0;
  virtual void KillJobWorkers(const NodeId& node, const std::string& address, const rpc::KillJobWorkersRequest& request,
                              Callback<rpc::KillJobWorkersReply> cb) = 0;
  // Placement-group bundles (two-phase reservation; every call idempotent).
  virtual void PrepareBundles(const NodeId& node, const std::string& address, const rpc::PrepareBundlesRequest& request,
                              Callback<rpc::PrepareBundlesReply> cb) = 0;
  virtual void CommitBundles(const NodeId& node, const std::string& address, const rpc::CommitBundlesRequest& request,
                             Callback<rpc::CommitBundlesReply> cb) = 0;
  virtual void CancelBundles(const NodeId& node, const std::string& address, const rpc::CancelBundlesRequest& request,
                             Callback<rpc::CancelBundlesReply> cb) = 0;
  virtual void ReleaseUnusedBundles(const NodeId& node, const std::string& address,
                                    const rpc::ReleaseUnusedBundlesRequest& request,
                                    Callback<rpc::ReleaseUnusedBundlesReply> cb) = 0;
  // Tells the raylet its node drains (idempotent on the raylet).
  virtual void DrainRaylet(const NodeId& node, const std::string& address, const rpc::DrainRayletRequest& request,
                           Callback<rpc::DrainRayletReply> cb) = 0;
  // The node is gone: drop its connection (calls in flight finish on their own).
  virtual void Forget(const NodeId& node) = 0;
};

// Over gRPC, with `token` on every call; callbacks are posted to `loop`.
// `unreachable` (may be null) runs on the loop each time a call to a node
// fails UNAVAILABLE and is to be retried: the raylet may be gone, and the
// caller need not wait for the retries to run out to find out. `answered`
// (may be null) runs on the loop before the callback of each call the
// raylet answered: its loop is alive.
std::unique_ptr<RayletClientPool> MakeGrpcRayletClientPool(EventLoop* loop, std::string token,
                                                           std::function<void(const NodeId&)> unreachable = nullptr,
                                                           std::function<void(const NodeId&)> answered = nullptr);

using rpc::RayletAddress;

}  // namespace manta::gcs
