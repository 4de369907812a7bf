// `manta start --head` keeps the GCS's tables where --gcs-storage (or Ray's
// RAY_REDIS_ADDRESS) says, and a head whose Redis is missing or malformed
// refuses to start with a clear error. GCS restarts with each store are in
// gcs_restart_test.cc.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gcs/redis_server_process.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

class GcsStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gcs::RedisServerProcess::Installed()) GTEST_SKIP() << gcs::RedisServerProcess::kNotInstalled;
    MANTA_ASSERT_OK(redis_.Start());
    auto port = PickFreePort();
    MANTA_ASSERT_OK(port.status());
    port_ = *port;
    temp_ = cluster_.temp_dir() + "/cli";
  }

  CommandResult StartHead(std::vector<std::string> extra,
                          const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> args = {"start",
                                     "--head",
                                     absl::StrCat("--port=", port_),
                                     "--temp-dir=" + temp_,
                                     "--num-cpus=1",
                                     "--include-dashboard=false"};
    args.insert(args.end(), extra.begin(), extra.end());
    return cluster_.RunManta(args, env);
  }

  // The cluster id a head stored under `ns`, or empty.
  std::string StoredClusterId(const std::string& ns) {
    auto reply = redis_.Command({"HGET", ns + "@cluster", "cluster_id"});
    return reply.ok() ? reply->str : "";
  }

  gcs::RedisServerProcess redis_;
  Cluster cluster_;  // the temp dir, RunManta, and every daemon killed at the end
  int port_ = 0;
  std::string temp_;
};

TEST_F(GcsStorageTest, StartHeadKeepsTheTablesInRedis) {
  CommandResult head = StartHead({"--gcs-storage=" + redis_.url(), "--gcs-storage-namespace=team-a"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_EQ(StoredClusterId("team-a").size(), 16u);
  EXPECT_FALSE(PathExists(temp_ + "/session_latest/gcs_store.sqlite"));
  CommandResult status = cluster_.RunManta({"status", "--temp-dir=" + temp_});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  CommandResult stop = cluster_.RunManta({"stop", "--temp-dir=" + temp_});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;

  // Ray's variable alone selects Redis, in the default namespace.
  CommandResult from_env = StartHead({}, {{"RAY_REDIS_ADDRESS", absl::StrCat("127.0.0.1:", redis_.port())}});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(StoredClusterId("manta").size(), 16u);
  EXPECT_NE(StoredClusterId("manta"), StoredClusterId("team-a"));
  EXPECT_EQ(cluster_.RunManta({"stop", "--temp-dir=" + temp_}).exit_code, 0);
}

TEST_F(GcsStorageTest, AHeadWithoutItsRedisDoesNotStart) {
  auto closed = PickFreePort();  // nothing listens there
  MANTA_ASSERT_OK(closed.status());
  CommandResult unreachable = StartHead({absl::StrCat("--gcs-storage=redis://127.0.0.1:", *closed)});
  EXPECT_NE(unreachable.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(unreachable.err, absl::StrCat("cannot connect to Redis at 127.0.0.1:", *closed)))
      << unreachable.err;

  CommandResult malformed = StartHead({"--gcs-storage=redis://:hunter2@127.0.0.1:70000"});
  EXPECT_NE(malformed.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(malformed.err, "bad --storage URL")) << malformed.err;
  EXPECT_FALSE(absl::StrContains(malformed.err, "hunter2")) << malformed.err;

  CommandResult joined = cluster_.RunManta({"start", "--address=127.0.0.1:1", "--gcs-storage=" + redis_.url()});
  EXPECT_NE(joined.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(joined.err, "head (--head) only")) << joined.err;
  EXPECT_TRUE(ProcessesMentioning(temp_).empty());
}

}  // namespace
}  // namespace manta::testing
