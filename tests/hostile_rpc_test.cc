// Floods without a token: connections that idle after the HTTP/2 preface,
// and large bodies to every kind of method. The GCS keeps accepting, answers
// UNAUTHENTICATED, and does not keep the memory.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <memory>
#include <vector>

#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"
#include "tests/raw_socket.h"

namespace manta::testing {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

int PrefaceOnly(int port) {
  int fd = ConnectLoopback(port);
  if (fd >= 0) (void)!write(fd, kPreface, sizeof(kPreface) - 1);
  return fd;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

class HostileRpcTest : public ::testing::Test {
 protected:
  void SetUp() override { MANTA_ASSERT_OK(cluster_.StartHead()); }

  // Sends `body` to `method` 32 times at once, half with no token and half
  // with a wrong one; expects every call refused UNAUTHENTICATED.
  void FloodWithoutToken(const std::string& method, const std::string& body) {
    auto channel = UnlimitedChannel(cluster_.gcs_address());
    grpc::GenericStub generic(channel);
    constexpr int kCalls = 32;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<grpc::ByteBuffer> replies(kCalls);
    std::vector<std::promise<grpc::Status>> done(kCalls);
    grpc::Slice slice(body);
    grpc::ByteBuffer request(&slice, 1);
    for (int i = 0; i < kCalls; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      rpc::PrepareContext(contexts.back().get(), i % 2 == 0 ? "wrong-token" : "", absl::Seconds(60));
      generic.UnaryCall(contexts.back().get(), method, grpc::StubOptions(), &request, &replies[i],
                        [&done, i](grpc::Status s) { done[i].set_value(std::move(s)); });
    }
    for (int i = 0; i < kCalls; ++i) {
      grpc::Status s = done[i].get_future().get();
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << i << ": " << s.error_message();
    }
  }

  // The GCS's RSS comes back within `slack` of `before`.
  void ExpectRssReturns(int64_t before, int64_t slack, absl::Duration timeout) {
    int64_t after = 0;
    bool returned = Cluster::WaitFor(
        [&] {
          after = RssBytes(cluster_.gcs().pid);
          return after - before < slack;
        },
        timeout);
    EXPECT_TRUE(returned) << "GCS RSS went from " << before / (1 << 20) << " MiB to " << after / (1 << 20)
                          << " MiB";
  }

  // The GCS serves a call with the token within `timeout`.
  bool ServesWithin(absl::Duration timeout) {
    return Cluster::WaitFor([&] { return cluster_.GetClusterId().ok(); }, timeout);
  }

  Cluster cluster_;
};

TEST_F(HostileRpcTest, RunningOutOfDescriptorsDoesNotStopTheGcsAccepting) {
  const pid_t gcs = cluster_.gcs().pid;
  rlimit saved{};
  ASSERT_EQ(prlimit(gcs, RLIMIT_NOFILE, nullptr, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 300;
  ASSERT_EQ(prlimit(gcs, RLIMIT_NOFILE, &low, nullptr), 0);
  std::vector<int> held;
  for (int i = 0; i < 600; ++i) {
    int fd = PrefaceOnly(cluster_.gcs_port());
    if (fd >= 0) held.push_back(fd);
  }
  // Past the limit, new connections are dropped (closed), not queued for ever.
  bool dropped = Cluster::WaitFor(
      [&] {
        for (int fd : held) {
          pollfd p{fd, POLLIN, 0};
          char byte;
          if (poll(&p, 1, 0) > 0 && recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return true;
        }
        return false;
      },
      absl::Seconds(10));
  for (int fd : held) close(fd);
  EXPECT_TRUE(dropped) << "no connection past the descriptor limit was dropped";
  ASSERT_EQ(prlimit(gcs, RLIMIT_NOFILE, &saved, nullptr), 0);
  EXPECT_TRUE(ServesWithin(absl::Seconds(20))) << "the GCS stopped accepting connections";
  EXPECT_EQ(cluster_.CountNodes(rpc::NodeInfo::ALIVE), 1);
}

// Bodies to a method no service has are refused from the headers alone:
// UNAUTHENTICATED (it was UNIMPLEMENTED), and the GCS never holds them.
TEST_F(HostileRpcTest, LargeBodiesWithoutATokenAreRefusedUnreadAndTheMemoryIsReturned) {
  const int64_t before = RssBytes(cluster_.gcs().pid);
  ASSERT_GT(before, 0);
  FloodWithoutToken("/manta.rpc.NoSuchService/Call", std::string(48 << 20, 'x'));
  ExpectRssReturns(before, 96 << 20, absl::Seconds(30));
  EXPECT_TRUE(ServesWithin(absl::Seconds(5)));
}

// A real method's body without a token is refused with UNAUTHENTICATED and
// stores nothing.
TEST_F(HostileRpcTest, ARealMethodWithoutATokenStoresNothing) {
  auto channel = UnlimitedChannel(cluster_.gcs_address());
  auto kv = rpc::InternalKvGcsService::NewStub(channel);
  for (const char* token : {"", "wrong-token"}) {
    rpc::KvPutRequest put;
    put.set_ns("flood");
    put.set_key("k");
    put.set_value(std::string(8 << 20, 'x'));
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token, absl::Seconds(30));
    rpc::KvPutReply reply;
    grpc::Status s = kv->Put(&ctx, put, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  auto stored = cluster_.KvGet("flood", "k");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_FALSE(stored->has_value());
}

// A real method reads its body before the token check (gRPC reads a unary
// request whole first); what the refused bodies took is given back.
TEST_F(HostileRpcTest, LargeBodiesToARealMethodWithoutATokenAreNotKept) {
  const int64_t before = RssBytes(cluster_.gcs().pid);
  ASSERT_GT(before, 0);
  rpc::KvPutRequest put;
  put.set_ns("flood");
  put.set_key("k");
  put.set_value(std::string(48 << 20, 'x'));
  FloodWithoutToken("/manta.rpc.InternalKvGcsService/Put", put.SerializeAsString());
  ExpectRssReturns(before, 128 << 20, absl::Seconds(30));
}

}  // namespace
}  // namespace manta::testing
