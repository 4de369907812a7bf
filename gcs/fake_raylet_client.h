// FakeRayletClientPool: records the GCS's calls to raylets; a test answers
// them when it chooses, so interleavings are deterministic.
#pragma once

#include <deque>
#include <string>
#include <utility>

#include "gcs/raylet_client.h"

namespace manta::gcs {

class FakeRayletClientPool : public RayletClientPool {
 public:
  template <typename Req, typename Reply>
  struct Call {
    NodeId node;
    std::string address;
    Req request;
    Callback<Reply> cb;
  };
  using LeaseCall = Call<rpc::RequestWorkerLeaseRequest, rpc::RequestWorkerLeaseReply>;

  void RequestWorkerLease(const NodeId& node, const std::string& address, const rpc::RequestWorkerLeaseRequest& request,
                          Callback<rpc::RequestWorkerLeaseReply> cb) override {
    leases.push_back({node, address, request, std::move(cb)});
  }
  void ReturnWorker(const NodeId& node, const std::string& address, const rpc::ReturnWorkerRequest& request,
                    Callback<rpc::ReturnWorkerReply> cb) override {
    returned.push_back({node, address, request, nullptr});
    cb(absl::OkStatus(), {});
  }
  void KillJobWorkers(const NodeId& node, const std::string& address, const rpc::KillJobWorkersRequest& request,
                      Callback<rpc::KillJobWorkersReply> cb) override {
    killed_jobs.push_back({node, address, request, nullptr});
    cb(absl::OkStatus(), {});
  }
  void PrepareBundles(const NodeId& node, const std::string& address, const rpc::PrepareBundlesRequest& request,
                      Callback<rpc::PrepareBundlesReply> cb) override {
    prepares.push_back({node, address, request, std::move(cb)});
  }
  void CommitBundles(const NodeId& node, const std::string& address, const rpc::CommitBundlesRequest& request,
                     Callback<rpc::CommitBundlesReply> cb) override {
    commits.push_back({node, address, request, std::move(cb)});
  }
  void CancelBundles(const NodeId& node, const std::string& address, const rpc::CancelBundlesRequest& request,
                     Callback<rpc::CancelBundlesReply> cb) override {
    cancels.push_back({node, address, request, std::move(cb)});
  }
  void ReleaseUnusedBundles(const NodeId& node, const std::string& address,
                            const rpc::ReleaseUnusedBundlesRequest& request,
                            Callback<rpc::ReleaseUnusedBundlesReply> cb) override {
    releases.push_back({node, address, request, std::move(cb)});
  }
  void DrainRaylet(const NodeId& node, const std::string& address, const rpc::DrainRayletRequest& request,
                   Callback<rpc::DrainRayletReply> cb) override {
    drains.push_back({node, address, request, nullptr});
    cb(absl::OkStatus(), {});
  }
  void Forget(const NodeId& node) override { forgotten.push_back(node); }

  // Answers the oldest lease request.
  LeaseCall PopLease() {
    LeaseCall c = std::move(leases.front());
    leases.pop_front();
    return c;
  }

  std::deque<LeaseCall> leases;
  std::deque<Call<rpc::ReturnWorkerRequest, rpc::ReturnWorkerReply>> returned;
  std::deque<Call<rpc::KillJobWorkersRequest, rpc::KillJobWorkersReply>> killed_jobs;
  std::deque<Call<rpc::PrepareBundlesRequest, rpc::PrepareBundlesReply>> prepares;
  std::deque<Call<rpc::CommitBundlesRequest, rpc::CommitBundlesReply>> commits;
  std::deque<Call<rpc::CancelBundlesRequest, rpc::CancelBundlesReply>> cancels;
  std::deque<Call<rpc::ReleaseUnusedBundlesRequest, rpc::ReleaseUnusedBundlesReply>> releases;
  std::deque<Call<rpc::DrainRayletRequest, rpc::DrainRayletReply>> drains;
  std::deque<NodeId> forgotten;
};

}  // namespace manta::gcs
