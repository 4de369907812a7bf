// GrpcPeers: other processes and the io loop as the reference counter
// (BorrowPeers) and the object service (OwnerClient) reach them, over the
// core worker's stubs. Internal header.
#pragma once

#include <string>

#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {

class GrpcPeers final : public BorrowPeers, public OwnerClient {
 public:
  // `fetches` streams large values in for Watch (used only once started).
  GrpcPeers(ClientPool* pool, EventLoop* loop, std::string token, FetchPool* fetches)
      : pool_(pool), loop_(loop), token_(std::move(token)), fetches_(fetches) {}

  // BorrowPeers
  bool AddBorrower(const std::string& owner, const ObjectId& id, const rpc::Address& borrower) override;
  void RemoveBorrower(const std::string& owner, const ObjectId& id, const std::string& borrower_worker_id,
                      int count) override;
  void CheckWorker(const rpc::Address& at, const std::string& worker_id,
                   std::function<void(const absl::Status&, bool)> done) override;
  // OwnerClient
  absl::StatusOr<Value> Fetch(const std::string& owner, const ObjectId& id, absl::Duration wait) override;
  // A GetObjectStatus call on the loop; a large value is then streamed on
  // a fetch thread.
  void Watch(const std::string& owner, const ObjectId& id, absl::Duration wait, bool fetch, Watched done) override;
  // Both: a timer held by the loop.
  void RunAfter(absl::Duration delay, std::function<void()> fn) override;

 private:
  ClientPool* const pool_;
  EventLoop* const loop_;
  const std::string token_;
  FetchPool* const fetches_;
};

}  // namespace manta::core
