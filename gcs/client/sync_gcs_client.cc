#include "gcs/client/sync_gcs_client.h"

namespace manta::gcs {

SyncGcsClient::SyncGcsClient(EventLoop* loop, GcsClient* client, absl::Duration wait)
    : loop_(loop), client_(client), wait_(wait) {}

SyncGcsClient::SyncGcsClient(std::unique_ptr<EventLoop> loop, absl::Duration wait)
    : owned_loop_(std::move(loop)), loop_(owned_loop_.get()), client_(nullptr), wait_(wait) {}

std::unique_ptr<SyncGcsClient> SyncGcsClient::Connect(const std::string& address, std::string token,
                                                      absl::Duration timeout) {
  // A reply comes by the call's deadline; the slack covers the loop's hop.
  std::unique_ptr<SyncGcsClient> sync(new SyncGcsClient(std::make_unique<EventLoop>(), timeout + absl::Seconds(5)));
  sync->owned_client_ = MakeGrpcGcsClient(sync->loop_, address, std::move(token), timeout);
  sync->client_ = sync->owned_client_.get();
  sync->address_ = address;
  sync->loop_thread_ = std::thread([loop = sync->loop_] { loop->Run(); });
  return sync;
}

SyncGcsClient::~SyncGcsClient() {
  if (!owned_loop_) return;
  owned_loop_->Stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  // Replies still in flight find the loop gone and are dropped.
  owned_client_.reset();
  owned_loop_.reset();
}

}  // namespace manta::gcs
