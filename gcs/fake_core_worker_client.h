// FakeCoreWorkerClientPool: records the GCS's calls to workers; a test
// answers pushes when it chooses. Kill and Exit succeed at once.
#pragma once

#include <deque>
#include <string>
#include <utility>

#include "gcs/core_worker_client.h"

namespace manta::gcs {

class FakeCoreWorkerClientPool : public CoreWorkerClientPool {
 public:
  struct Push {
    rpc::Address worker;
    rpc::PushTaskRequest request;
    Callback<rpc::PushTaskReply> cb;
  };

  void PushTask(const rpc::Address& worker, const rpc::PushTaskRequest& request, absl::Duration,
                Callback<rpc::PushTaskReply> cb) override {
    pushes.push_back({worker, request, std::move(cb)});
  }
  void KillActor(const rpc::Address& worker, const rpc::KillActorOnWorkerRequest& request,
                 Callback<rpc::KillActorOnWorkerReply> cb) override {
    kills.push_back(worker.worker_id());
    cb(absl::OkStatus(), {});
  }
  void Exit(const rpc::Address& worker, const rpc::ExitRequest& request, Callback<rpc::ExitReply> cb) override {
    exits.push_back(worker.worker_id());
    cb(absl::OkStatus(), {});
  }
  // Answered later, through `checks`.
  void CheckWorker(const rpc::Address& worker, Callback<rpc::CheckWorkerReply> cb) override {
    checks.push_back({worker, std::move(cb)});
  }
  void Forget(const std::string& worker_id) override { forgotten.push_back(worker_id); }

  struct Check {
    rpc::Address worker;
    Callback<rpc::CheckWorkerReply> cb;
  };
  std::deque<Check> checks;

  Push PopPush() {
    Push p = std::move(pushes.front());
    pushes.pop_front();
    return p;
  }

  std::deque<Push> pushes;
  std::deque<std::string> kills;
  std::deque<std::string> exits;
  std::deque<std::string> forgotten;
};

}  // namespace manta::gcs
