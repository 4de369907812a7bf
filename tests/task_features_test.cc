// Task features a front end needs, on one real cluster shared by the tests:
// the front end's error bytes, several returns, retried exceptions,
// get_if_exists, scheduling strategies (three nodes).
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

class TaskFeaturesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.head.num_cpus = 2;
    options.head.env = {{"MANTA_TEST_NODE", "head"}};
    cluster_ = new Cluster(options);
    start_ = cluster_->StartHead();
    // Two more nodes, for the scheduling strategies.
    for (const char* name : {"n1", "n2"}) {
      if (!start_.ok()) return;
      RayletOptions raylet;
      raylet.num_cpus = 2;
      raylet.env = {{"MANTA_TEST_NODE", name}};
      start_ = cluster_->AddRaylet(raylet).status();
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { MANTA_ASSERT_OK(start_); }

  // Runs a features_driver scenario; it must exit 0.
  CommandResult Run(const std::vector<std::string>& args) {
    CommandResult r = cluster_->RunProgram("features_driver", args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r;
  }

  static Cluster* cluster_;
  static absl::Status start_;
};
Cluster* TaskFeaturesTest::cluster_ = nullptr;
absl::Status TaskFeaturesTest::start_;

TEST_F(TaskFeaturesTest, ErrorBytesReturnsRetriesAndGetIfExists) {
  CommandResult r = Run({"returns_and_errors", cluster_->temp_dir()});
  EXPECT_NE(r.out.find("OK error bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK three returns"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK retried exceptions runs=3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK get_if_exists one actor"), std::string::npos) << r.out;
}

TEST_F(TaskFeaturesTest, SpreadAndNodeAffinityPlaceTasks) {
  CommandResult r = Run({"placement"});
  EXPECT_NE(r.out.find("OK spread over 3 nodes, affinity to n"), std::string::npos) << r.out;
}

TEST_F(TaskFeaturesTest, CancelEndsRunningTasksWithinASecond) {
  CommandResult r = Run({"cancel", cluster_->temp_dir()});
  EXPECT_NE(r.out.find("OK cancel polite and forced within a second, CPUs free"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK cancel recursive, forced and alone, CPUs free"), std::string::npos) << r.out;
}

TEST_F(TaskFeaturesTest, TheChildrenOfAKilledParentEnd) {
  CommandResult r = Run({"orphans", cluster_->temp_dir()});
  EXPECT_NE(r.out.find("OK the children of a killed parent end, here and elsewhere"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace manta::testing
