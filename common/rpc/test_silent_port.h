// Test helpers: a TCP port that accepts connections and never answers, and
// a call to it that waits until it is cancelled (or 60 s pass).
#pragma once

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

namespace manta::rpc {

// A TCP port that accepts connections (the kernel does) and never answers:
// a call to it waits until its deadline unless cancelled.
class SilentPort {
 public:
  SilentPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 16) == 0;
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPort() { close(fd_); }
  bool ok() const { return bound_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool bound_ = false;
};

// Starts a call that would wait 60 s; returns its status once it ends.
inline std::future<grpc::Status> StartSilentCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                                                 grpc::ByteBuffer* reply) {
  struct Call {
    std::promise<grpc::Status> done;
    grpc::Slice empty{std::string()};
    grpc::ByteBuffer request{&empty, 1};
  };
  auto call = std::make_shared<Call>();
  std::future<grpc::Status> result = call->done.get_future();
  ctx->set_wait_for_ready(true);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  stub->UnaryCall(ctx, "/manta.Nothing/Here", grpc::StubOptions(), &call->request, reply,
                  [call](grpc::Status s) { call->done.set_value(s); });
  return result;
}

}  // namespace manta::rpc
