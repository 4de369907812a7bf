// The GCS finishes a job whose driver is gone, also when the driver died
// between two polls and so dropped no held connection.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "absl/time/clock.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(5);

// A loopback port bound but not listening: a connection to it is refused,
// and no other process can take it while `fd` is open.
int BindWithoutListening(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (*fd < 0 || bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 0;
  socklen_t len = sizeof(a);
  if (getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

TEST(DriverWatchTest, AJobWhoseDriverIsGoneBetweenPollsIsFinishedWithinSeconds) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  int fd = -1;
  const int port = BindWithoutListening(&fd);
  ASSERT_GT(port, 0);
  auto channel = rpc::MakeChannel(cluster.gcs_address());
  auto jobs = rpc::JobGcsService::NewStub(channel);
  auto pubsub = rpc::PubSubGcsService::NewStub(channel);

  // The "driver" added its job, and one poll of it ended normally; then its
  // process was gone before it polled again.
  rpc::AddJobRequest add;
  add.mutable_job()->mutable_driver_address()->set_ip("127.0.0.1");
  add.mutable_job()->mutable_driver_address()->set_port(port);
  add.mutable_job()->mutable_driver_address()->set_worker_id(WorkerId::FromRandom().Binary());
  rpc::AddJobReply added;
  {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), kCallTimeout);
    ASSERT_TRUE(jobs->AddJob(&ctx, add, &added).ok());
  }
  {
    rpc::PollRequest poll;
    poll.set_subscriber_job_id(added.job_id());
    poll.set_max_wait_ms(1);
    rpc::PollReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), kCallTimeout);
    ASSERT_TRUE(pubsub->Poll(&ctx, poll, &reply).ok());
  }
  const absl::Time poll_ended = absl::Now();

  auto finished = [&] {
    rpc::GetAllJobInfoReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), kCallTimeout);
    if (!jobs->GetAllJobInfo(&ctx, rpc::GetAllJobInfoRequest(), &reply).ok()) return false;
    for (const auto& j : reply.jobs()) {
      if (j.job_id() == added.job_id()) return j.is_dead();
    }
    return false;
  };
  // Without a probe of the driver, the job would live for the whole poll gap
  // (30 s).
  EXPECT_TRUE(Cluster::WaitFor(finished, absl::Seconds(10)))
      << "still alive " << absl::FormatDuration(absl::Now() - poll_ended) << " after its last poll";
  close(fd);
}

}  // namespace
}  // namespace manta::testing
