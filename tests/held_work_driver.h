// HeldWorkDriver: `drain_driver across_restart` on a cluster with room for
// its work (a head of 4 CPUs and a second raylet of 2). Before Go() the
// driver holds an actor, a placement group and a running task; after it, it
// checks they all still work and exits 0 printing "OK". The GCS restart and
// hostile-connection tests do their damage in between.
//
//   Cluster cluster(HeldWorkDriver::Options());
//   HeldWorkDriver driver(&cluster, "restart_driver");
//   ASSERT_TRUE(driver.StartAndWaitReady());
//   ... kill the head, flood the driver's port ...
//   EXPECT_TRUE(driver.GoAndExitOk());
#pragma once

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {

class HeldWorkDriver {
 public:
  static ClusterOptions Options(ClusterOptions options = {}) {
    options.head.num_cpus = 4;
    return options;
  }
  static bool Built() { return PathExists(Cluster::BinDir() + "/drain_driver"); }

  // `cluster` is started with Options(); `name` names the output file.
  HeldWorkDriver(Cluster* cluster, const std::string& name)
      : cluster_(cluster), dir_(cluster->temp_dir()), log_(dir_ + "/" + name + ".out") {}

  // Starts the head and the second raylet, then the driver, and waits until
  // it holds its work.
  ::testing::AssertionResult StartAndWaitReady() {
    if (auto s = cluster_->StartHead(); !s.ok()) return ::testing::AssertionFailure() << s;
    RayletOptions second;
    second.num_cpus = 2;
    if (auto s = cluster_->AddRaylet(second); !s.ok()) return ::testing::AssertionFailure() << s.status();
    auto pid = cluster_->StartProgram("drain_driver", {"across_restart", dir_}, log_);
    if (!pid.ok()) return ::testing::AssertionFailure() << pid.status();
    pid_ = *pid;
    if (!Cluster::WaitFor([&] { return absl::StrContains(Output(), "READY"); }, absl::Seconds(60))) {
      return ::testing::AssertionFailure() << "never READY: " << Output();
    }
    return ::testing::AssertionSuccess();
  }

  // Lets the driver go on; success when it exits 0 having printed "OK".
  ::testing::AssertionResult GoAndExitOk() {
    { std::ofstream(dir_ + "/go") << "go"; }
    if (!Cluster::WaitFor([&] { return !IsAlive(pid_); }, absl::Seconds(120))) {
      return ::testing::AssertionFailure() << "still running: " << Output();
    }
    auto status = ExitStatusOf(pid_);
    if (!status.has_value()) return ::testing::AssertionFailure() << "no exit status";
    if (DescribeWaitStatus(*status) != DescribeWaitStatus(0) || !absl::StrContains(Output(), "OK")) {
      return ::testing::AssertionFailure() << DescribeWaitStatus(*status) << ": " << Output();
    }
    return ::testing::AssertionSuccess();
  }

  pid_t pid() const { return pid_; }
  std::string Output() const { return TailFile(log_, 20); }

 private:
  Cluster* const cluster_;
  const std::string dir_;
  const std::string log_;
  pid_t pid_ = -1;
};

}  // namespace manta::testing
