#include "raylet/rejoin.h"

#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

TEST(RejoinArgsTest, AddsTheClusterAndTheConnectTimeout) {
  std::vector<std::string> argv = {"raylet", "--gcs_address=10.0.0.1:6379", "--num_cpus=2"};
  EXPECT_EQ(RejoinArgs(argv, "abcd", 60),
            (std::vector<std::string>{"raylet", "--gcs_address=10.0.0.1:6379", "--num_cpus=2", "--cluster_id=abcd",
                                      "--gcs_connect_timeout_s=60"}));
}

TEST(RejoinArgsTest, RejoiningAgainReplacesTheFlagsInsteadOfGrowing) {
  std::vector<std::string> argv = {"raylet", "--gcs_connect_timeout_s=5", "--port=0"};
  std::vector<std::string> once = RejoinArgs(argv, "abcd", 60);
  EXPECT_EQ(RejoinArgs(once, "abcd", 60), once);
  EXPECT_EQ(once, (std::vector<std::string>{"raylet", "--port=0", "--cluster_id=abcd", "--gcs_connect_timeout_s=60"}));
}

TEST(RejoinArgsTest, AnUnknownClusterIsNotPassed) {
  EXPECT_EQ(RejoinArgs({"raylet"}, "", 7), (std::vector<std::string>{"raylet", "--gcs_connect_timeout_s=7"}));
}

}  // namespace
}  // namespace manta::raylet
