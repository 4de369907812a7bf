#include "common/rpc/connection_gate.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/synchronization/notification.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/http2_test_frames.h"
#include "gtest/gtest.h"
#include "tests/raw_socket.h"

namespace manta::rpc {
namespace {

constexpr char kToken[] = "gate-test-token";

// A TCP connection to the gate that sends the HTTP/2 preface and nothing more.
int IdleConnection(int port) {
  int fd = manta::testing::ConnectLoopback(port);
  if (fd >= 0) (void)!write(fd, testing::kClientPreface.data(), testing::kClientPreface.size());
  return fd;
}

// Whether the server closed `fd` within `timeout` (reads until EOF or error).
bool ClosedByServer(int fd, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return true;
  }
  return false;
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

class GateTest : public ::testing::Test {
 protected:
  void StartServer(ConnectionGate::Options options) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    auto server = GatedServer::Start(&builder, "127.0.0.1:0", kToken, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A call to a method no service has (on `channel`, else a new one):
  // UNIMPLEMENTED when the token passes.
  grpc::Status Call(const std::string& token, std::shared_ptr<grpc::Channel> channel = nullptr) {
    if (!channel) channel = MakeChannel("127.0.0.1:" + std::to_string(server_->port()));
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    PrepareContext(&ctx, token, absl::Seconds(5));
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), reply;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&ctx, "/manta.Nothing/Here", grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
      status = s;
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

  // Calls with the token until the server answers it (UNIMPLEMENTED) or
  // `timeout` passes; the last status.
  grpc::Status CallUntilServed(absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    grpc::Status status;
    do {
      status = Call(kToken);
    } while (status.error_code() != grpc::StatusCode::UNIMPLEMENTED && absl::Now() < deadline);
    return status;
  }

  std::unique_ptr<GatedServer> server_;
};

TEST_F(GateTest, UnknownMethodsCheckTheTokenFirst) {
  StartServer({});
  grpc::Status missing = Call("");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(missing.error_message(), "missing cluster token");
  grpc::Status wrong = Call("wrong");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_message(), "wrong cluster token");
  EXPECT_EQ(Call(kToken).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// A connection whose first request lacks the token is answered by the gate
// itself: gRPC never reads the body, and the client's other calls on that
// connection are sent again on new ones and refused the same way.
TEST_F(GateTest, RequestsWithoutTheTokenAreRefusedBeforeGrpcReadsThem) {
  StartServer({});
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(server_->port()));
  grpc::GenericStub stub(channel);
  constexpr int kCalls = 8;
  grpc::Slice body(std::string(8 << 20, 'x'));
  grpc::ByteBuffer request(&body, 1);
  std::vector<grpc::ByteBuffer> replies(kCalls);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<absl::Notification> done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    PrepareContext(contexts.back().get(), i % 2 ? "wrong" : "", absl::Seconds(20));
    stub.UnaryCall(contexts.back().get(), "/manta.Nothing/Here", grpc::StubOptions(), &request, &replies[i],
                   [&, i](grpc::Status s) {
                     statuses[i] = s;
                     done[i].Notify();
                   });
  }
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::UNAUTHENTICATED) << i << ": " << statuses[i].error_message();
  }
  EXPECT_GE(server_->gate()->refused_connections(), 1);
  // The refused connections are closed; a caller with the token is served.
  EXPECT_TRUE(WaitFor([&] { return server_->gate()->open_connections() == 0; }, absl::Seconds(10)))
      << server_->gate()->open_connections() << " open";
  EXPECT_EQ(Call(kToken).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GateTest, IdleUnauthenticatedConnectionsAreClosedAndAuthenticatedOnesStay) {
  ConnectionGate::Options options;
  options.auth_deadline = absl::Milliseconds(300);
  StartServer(options);
  int idle = IdleConnection(server_->port());
  ASSERT_GE(idle, 0);
  EXPECT_TRUE(ClosedByServer(idle, absl::Seconds(10)));
  close(idle);
  // A channel whose call passed the token keeps its connection past the deadline.
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(server_->port()));
  EXPECT_EQ(Call(kToken, channel).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // A connection opened after it is closed: the channel's is past the deadline.
  int later = IdleConnection(server_->port());
  ASSERT_GE(later, 0);
  EXPECT_TRUE(ClosedByServer(later, absl::Seconds(10)));
  close(later);
  EXPECT_EQ(Call(kToken, channel).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // The closed ones leave the gate's table; the authenticated one stays.
  EXPECT_TRUE(WaitFor([&] { return server_->gate()->open_connections() == 1; }, absl::Seconds(5)))
      << server_->gate()->open_connections() << " open";
}

TEST_F(GateTest, PastTheCapNewConnectionsAreRefusedAndTheListenerStaysOpen) {
  ConnectionGate::Options options;
  options.max_connections = 8;
  StartServer(options);
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(IdleConnection(server_->port()));
  EXPECT_TRUE(WaitFor([&] { return server_->gate()->open_connections() == 8; }, absl::Seconds(5)));
  int extra = IdleConnection(server_->port());
  EXPECT_TRUE(ClosedByServer(extra, absl::Seconds(5))) << "a connection past the cap was kept";
  close(extra);
  for (int fd : held) close(fd);
  // Once they are gone, a real client is served again.
  grpc::Status status = CallUntilServed(absl::Seconds(10));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
}

TEST_F(GateTest, RunningOutOfDescriptorsDoesNotStopTheListener) {
  StartServer({});
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Fill the descriptor table up to a low limit with idle connections.
  std::vector<int> held;
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int i = 0; i < 400; ++i) {
    int fd = IdleConnection(server_->port());
    if (fd < 0) break;
    held.push_back(fd);
  }
  bool refused = WaitFor([&] { return server_->gate()->refused_connections() > 0; }, absl::Seconds(10));
  for (int fd : held) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_TRUE(refused) << "the flood never reached the limit";
  grpc::Status status = CallUntilServed(absl::Seconds(20));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
}

}  // namespace
}  // namespace manta::rpc
