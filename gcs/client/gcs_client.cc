#include "gcs/client/gcs_client.h"

#include "common/rpc/client_call.h"
#include "common/rpc/reply_cache.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::gcs {

class GcsClient::Impl {
 public:
  Impl(EventLoop* loop, const std::string& address, std::string token, absl::Duration timeout)
      : loop(loop), token(std::move(token)), timeout(timeout) {
    auto channel = rpc::MakeChannel(address);
    nodes = rpc::NodeInfoGcsService::NewStub(channel);
    resources = rpc::NodeResourceGcsService::NewStub(channel);
    kv = rpc::InternalKvGcsService::NewStub(channel);
    pubsub = rpc::PubSubGcsService::NewStub(channel);
    actors = rpc::ActorGcsService::NewStub(channel);
    task_events = rpc::TaskEventGcsService::NewStub(channel);
    placement_groups = rpc::PlacementGroupGcsService::NewStub(channel);
  }

  template <typename Reply, typename Request, typename Start>
  void Call(Start start, Request request, absl::Duration deadline, Callback<Reply> cb) {
    rpc::UnaryCall<Reply>(loop, token, deadline, std::move(request), std::move(start), std::move(cb));
  }
  // For methods idempotent on the GCS: made again when the connection broke.
  template <typename Reply, typename Request, typename Start>
  void RetryingCall(Start start, Request request, absl::Duration deadline, Callback<Reply> cb) {
    rpc::RetryingUnaryCall<Reply>(loop, token, deadline, rpc::RetryPolicy{}, std::move(request), std::move(start),
                                  std::move(cb));
  }

  EventLoop* const loop;
  const std::string token;
  const absl::Duration timeout;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes;
  std::unique_ptr<rpc::NodeResourceGcsService::Stub> resources;
  std::unique_ptr<rpc::InternalKvGcsService::Stub> kv;
  std::unique_ptr<rpc::PubSubGcsService::Stub> pubsub;
  std::unique_ptr<rpc::ActorGcsService::Stub> actors;
  std::unique_ptr<rpc::TaskEventGcsService::Stub> task_events;
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> placement_groups;
};

// A start function for rpc::UnaryCall on `stub`'s callback `Method`.
#define MANTA_ASYNC(stub_member, Method)                                     \
  [stub = impl_->stub_member.get()](auto* ctx, auto* req, auto* reply, auto done) { \
    stub->async()->Method(ctx, req, reply, std::move(done));                \
  }

GcsClient::GcsClient(EventLoop* loop, const std::string& address, std::string token, absl::Duration timeout)
    : address_(address), impl_(std::make_unique<Impl>(loop, address, std::move(token), timeout)) {}

GcsClient::~GcsClient() = default;

void GcsClient::GetClusterId(Callback<rpc::GetClusterIdReply> cb) {
  impl_->Call<rpc::GetClusterIdReply>(MANTA_ASYNC(nodes, GetClusterId),
                                      rpc::GetClusterIdRequest(), impl_->timeout, std::move(cb));
}

void GcsClient::RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb) {
  impl_->Call<rpc::RegisterNodeReply>(
      MANTA_ASYNC(nodes, RegisterNode),
      request, impl_->timeout, std::move(cb));
}

void GcsClient::UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration timeout,
                               Callback<rpc::UnregisterNodeReply> cb) {
  impl_->RetryingCall<rpc::UnregisterNodeReply>(MANTA_ASYNC(nodes, UnregisterNode), request, timeout, std::move(cb));
}

void GcsClient::DrainNode(const rpc::DrainNodeRequest& request, absl::Duration timeout,
                          Callback<rpc::DrainNodeReply> cb) {
  impl_->RetryingCall<rpc::DrainNodeReply>(MANTA_ASYNC(nodes, DrainNode), request, timeout, std::move(cb));
}

void GcsClient::GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb) {
  impl_->Call<rpc::GetAllNodeInfoReply>(
      MANTA_ASYNC(nodes, GetAllNodeInfo), request,
      impl_->timeout, std::move(cb));
}

void GcsClient::ReportResources(const rpc::ReportResourcesRequest& request,
                                Callback<rpc::ReportResourcesReply> cb) {
  impl_->Call<rpc::ReportResourcesReply>(
      MANTA_ASYNC(resources, ReportResources), request,
      impl_->timeout, std::move(cb));
}

void GcsClient::GetClusterResources(Callback<rpc::GetClusterResourcesReply> cb) {
  impl_->Call<rpc::GetClusterResourcesReply>(
      MANTA_ASYNC(resources, GetClusterResources),
      rpc::GetClusterResourcesRequest(), impl_->timeout, std::move(cb));
}

void GcsClient::Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb) {
  impl_->Call<rpc::PollReply>(MANTA_ASYNC(pubsub, Poll),
                              request, impl_->timeout + absl::Milliseconds(request.max_wait_ms()), std::move(cb));
}

void GcsClient::KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb) {
  rpc::KvPutRequest req = request;
  if (req.request_id().empty()) req.set_request_id(rpc::NewRequestId());
  impl_->RetryingCall<rpc::KvPutReply>(MANTA_ASYNC(kv, Put), std::move(req), impl_->timeout, std::move(cb));
}

void GcsClient::KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb) {
  impl_->Call<rpc::KvGetReply>(MANTA_ASYNC(kv, Get),
                               request, impl_->timeout, std::move(cb));
}

void GcsClient::ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                    Callback<rpc::ReportWorkerFailureReply> cb) {
  impl_->RetryingCall<rpc::ReportWorkerFailureReply>(MANTA_ASYNC(actors, ReportWorkerFailure), request, impl_->timeout,
                                                     std::move(cb));
}

void GcsClient::PublishLogs(const rpc::PublishLogsRequest& request, Callback<rpc::PublishLogsReply> cb) {
  impl_->Call<rpc::PublishLogsReply>(MANTA_ASYNC(task_events, PublishLogs), request, impl_->timeout,
                                     std::move(cb));
}

void GcsClient::GetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                                  Callback<rpc::GetPlacementGroupReply> cb) {
  impl_->Call<rpc::GetPlacementGroupReply>(MANTA_ASYNC(placement_groups, GetPlacementGroup), request,
                                           impl_->timeout, std::move(cb));
}

#undef MANTA_ASYNC

}  // namespace manta::gcs
