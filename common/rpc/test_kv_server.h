// CountingKvServer: a real gRPC server on a free loopback port for the RPC
// plumbing's tests. Its InternalKvGcsService counts the Puts it handles and
// answers every Put OK; Get, Del and Keys are left unimplemented.
//
//   testing::CountingKvServer server;
//   ASSERT_TRUE(server.Start().ok());
//   auto stub = InternalKvGcsService::NewStub(MakeChannel(server.address()));
//   ... server.puts() ...
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::rpc::testing {

class CountingKvServer : public InternalKvGcsService::CallbackService {
 public:
  ~CountingKvServer() override {
    if (server_) server_->Shutdown();
  }

  absl::Status Start() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) return absl::InternalError("cannot start the test server");
    address_ = "127.0.0.1:" + std::to_string(port);
    return absl::OkStatus();
  }

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* ctx, const KvPutRequest*, KvPutReply* reply) override {
    reply->set_added(puts_.fetch_add(1) == 0);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  const std::string& address() const { return address_; }
  int puts() const { return puts_.load(); }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<int> puts_{0};
};

}  // namespace manta::rpc::testing
