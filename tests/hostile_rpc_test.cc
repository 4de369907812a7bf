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

#include <atomic>
#include <fstream>
#include <functional>
#include <thread>
#include <future>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/process.h"
#include "common/rpc/grpc_util.h"
#include "core_worker.grpc.pb.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/http_attacks.h"
#include "tests/cluster_fixture.h"
#include "tests/held_work_driver.h"
#include "tests/raw_socket.h"

namespace manta::testing {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

int PrefaceOnly(int port) {
  int fd = ConnectLoopback(port);
  if (fd >= 0) (void)!write(fd, kPreface, sizeof(kPreface) - 1);
  return fd;
}

// Preface-only connections to `port` until some are dropped for want of
// descriptors (the process's limit lowered to 300 meanwhile); true when one was.
bool FloodUntilDropped(pid_t pid, int port) {
  rlimit saved{};
  if (prlimit(pid, RLIMIT_NOFILE, nullptr, &saved) != 0) return false;
  rlimit low = saved;
  low.rlim_cur = 300;
  if (prlimit(pid, RLIMIT_NOFILE, &low, nullptr) != 0) return false;
  std::vector<int> held;
  for (int i = 0; i < 600; ++i) {
    int fd = PrefaceOnly(port);
    if (fd >= 0) held.push_back(fd);
  }
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
  prlimit(pid, RLIMIT_NOFILE, &saved, nullptr);
  return dropped;
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

  // The GCS serves a call with the token within `timeout`.
  bool ServesWithin(absl::Duration timeout) {
    return Cluster::WaitFor([&] { return cluster_.GetClusterId().ok(); }, timeout);
  }

  Cluster cluster_;
};

TEST_F(HostileRpcTest, RunningOutOfDescriptorsDoesNotStopTheGcsAccepting) {
  // Past the limit, new connections are dropped (closed), not queued for ever.
  EXPECT_TRUE(FloodUntilDropped(cluster_.gcs().pid, cluster_.gcs_port()))
      << "no connection past the descriptor limit was dropped";
  EXPECT_TRUE(ServesWithin(absl::Seconds(20))) << "the GCS stopped accepting connections";
  EXPECT_EQ(cluster_.CountNodes(rpc::NodeInfo::ALIVE), 1);
}

// A driver's core worker is behind the same gate: out of descriptors, it
// drops connections instead of ending its accepting, answers a call with the
// token, and its program's work (actors, a group, tasks) goes on.
TEST(HostileCoreWorkerTest, RunningOutOfDescriptorsDoesNotStopADriverAccepting) {
  if (!HeldWorkDriver::Built()) GTEST_SKIP() << "drain_driver was not built";
  Cluster cluster(HeldWorkDriver::Options());
  HeldWorkDriver driver(&cluster, "flooded_driver");
  ASSERT_TRUE(driver.StartAndWaitReady());

  // The driver's address, from the job table.
  auto channel = rpc::MakeChannel(cluster.gcs_address());
  auto jobs = rpc::JobGcsService::NewStub(channel);
  rpc::GetAllJobInfoReply all;
  {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(5));
    ASSERT_TRUE(jobs->GetAllJobInfo(&ctx, rpc::GetAllJobInfoRequest(), &all).ok());
  }
  rpc::Address address;
  for (const auto& j : all.jobs()) {
    if (j.driver_pid() == driver.pid()) address = j.driver_address();
  }
  ASSERT_GT(address.port(), 0) << "no job of driver pid " << driver.pid();

  EXPECT_TRUE(FloodUntilDropped(driver.pid(), address.port())) << "no connection past the descriptor limit was dropped";
  auto worker = rpc::CoreWorkerService::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(address.port())));
  bool answered = Cluster::WaitFor(
      [&] {
        rpc::CheckWorkerRequest req;
        req.set_worker_id(address.worker_id());
        rpc::CheckWorkerReply reply;
        grpc::ClientContext ctx;
        rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(2));
        return worker->CheckWorker(&ctx, req, &reply).ok() && reply.same();
      },
      absl::Seconds(20));
  EXPECT_TRUE(answered) << "the driver stopped accepting connections";

  EXPECT_TRUE(driver.GoAndExitOk());
}

// Bodies without the token are refused from the first request's headers,
// by the connection gate, before gRPC reads any of them: the GCS's memory
// never grows with them (32 bodies of 48 MiB would be 1.5 GiB). Unknown
// methods are refused UNAUTHENTICATED (they were UNIMPLEMENTED).
TEST_F(HostileRpcTest, LargeBodiesWithoutATokenAreRefusedUnread) {
  for (const char* method : {"/manta.rpc.NoSuchService/Call", "/manta.rpc.InternalKvGcsService/Put"}) {
    SCOPED_TRACE(method);
    const int64_t before = RssOf(cluster_.gcs().pid);
    ASSERT_GT(before, 0);
    rpc::KvPutRequest put;
    put.set_ns("flood");
    put.set_key("k");
    put.set_value(std::string(48 << 20, 'x'));
    const int64_t peak = PeakRssWhile(cluster_.gcs().pid, [&] { FloodWithoutToken(method, put.SerializeAsString()); });
    EXPECT_LT(peak - before, 32 << 20) << "GCS RSS went from " << before / (1 << 20) << " MiB to a peak of "
                                       << peak / (1 << 20) << " MiB";
    EXPECT_TRUE(ServesWithin(absl::Seconds(5)));
  }
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

}  // namespace
}  // namespace manta::testing
