// GcsClient: asynchronous calls to the GCS for raylets and core workers.
//
// Every call has a deadline and carries the cluster token; its callback runs
// on the owner's EventLoop. Calls idempotent on the GCS (UnregisterNode,
// DrainNode, KvPut, ReportWorkerFailure) are made again, a few times, when
// their connection breaks. Safe to call from the loop thread only.
//
//   GcsClient gcs(&loop, "127.0.0.1:6379", token);
//   gcs.RegisterNode(request, [](const absl::Status& s, rpc::RegisterNodeReply r) { ... });
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class GcsClient {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  GcsClient(EventLoop* loop, const std::string& address, std::string token,
            absl::Duration timeout = absl::Seconds(5));
  ~GcsClient();

  const std::string& address() const { return address_; }

  void GetClusterId(Callback<rpc::GetClusterIdReply> cb);
  void RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb);
  void UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration timeout,
                      Callback<rpc::UnregisterNodeReply> cb);
  // A raylet drains itself (SIGTERM with a drain grace).
  void DrainNode(const rpc::DrainNodeRequest& request, absl::Duration timeout, Callback<rpc::DrainNodeReply> cb);
  void GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb);
  void ReportResources(const rpc::ReportResourcesRequest& request, Callback<rpc::ReportResourcesReply> cb);
  void GetClusterResources(Callback<rpc::GetClusterResourcesReply> cb);
  // A long poll: the deadline is the request's max_wait plus the timeout.
  void Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb);
  // A request without request_id gets one, so a retry is answered as the
  // first attempt was.
  void KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb);
  void KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb);
  // A raylet reports that one of its workers exited.
  void ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                           Callback<rpc::ReportWorkerFailureReply> cb);
  // A raylet forwards worker output to the job's LOGS channel.
  void PublishLogs(const rpc::PublishLogsRequest& request, Callback<rpc::PublishLogsReply> cb);
  // A raylet asks whether a group its waiting leases name still exists.
  void GetPlacementGroup(const rpc::GetPlacementGroupRequest& request, Callback<rpc::GetPlacementGroupReply> cb);

 private:
  class Impl;
  std::string address_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::gcs
