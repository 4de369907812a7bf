#include "state/list_train_runs.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "state/test_times.h"

namespace manta::state {
namespace {

TrainWorkerView Worker(int rank, const std::string& ip, int pid, int slice_id, const std::string& slice_name) {
  TrainWorkerView w;
  w.world_rank = rank;
  w.local_rank = 0;
  w.node_rank = rank;
  w.node_id = "6b1f";
  w.node_ip = ip;
  w.pid = pid;
  w.actor_id = "a0" + std::to_string(rank);
  w.status = "ACTIVE";
  w.slice_id = slice_id;
  w.slice_name = slice_name;
  return w;
}

// A run on its second attempt after one failure, and a finished one.
std::vector<TrainRunView> Runs() {
  TrainRunView running;
  running.id = "0123456789abcdef0123456789abcdef";
  running.name = "llama";
  running.job_id = "00000001";
  running.controller_actor_id = "c0ffee";
  running.status = "RUNNING";
  running.status_detail = "worker 1 died\nTraceback: ...";
  running.start_time_ms = 1000;
  running.num_failures = 1;
  running.max_failures = -1;
  running.latest_checkpoint = "/ckpt/checkpoint_000010";
  TrainAttemptView first;
  first.attempt_id = "att0";
  first.status = "ERRORED";
  first.status_detail = "worker 1 died";
  first.num_workers = 2;
  first.start_time_ms = 1000;
  first.end_time_ms = 2000;
  TrainAttemptView second;
  second.attempt_id = "att1";
  second.status = "RUNNING";
  second.num_workers = 3;
  second.start_time_ms = 2100;
  second.workers = {Worker(0, "10.0.0.1", 101, 0, "tpu-group-0"), Worker(1, "10.0.0.2", 102, 1, "tpu-group-1"),
                    Worker(2, "10.0.0.3", 103, -1, "")};
  running.attempts = {first, second};

  TrainRunView done;
  done.id = "fedcba9876543210fedcba9876543210";
  done.name = "tiny";
  done.job_id = "00000002";
  done.status = "FINISHED";
  done.start_time_ms = 500;
  done.end_time_ms = 900;
  done.max_failures = 3;
  return {running, done};
}

TEST(ListTrainRunsTest, TableHasOneRowPerRun) {
  std::string out = FormatTrainRunList(Runs(), 100, /*detail=*/false, testing::RayExampleSecond(), absl::UTCTimeZone());
  EXPECT_NE(out.find("======== List: 2026-04-21 10:20:20"), std::string::npos) << out;
  EXPECT_NE(out.find("Total: 2\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Showing at most"), std::string::npos) << out;
  EXPECT_NE(out.find("    RUN_ID                            NAME   STATE     JOB_ID    ATTEMPTS  WORKERS  FAILURES  "
                     "STATUS_DETAIL  LATEST_CHECKPOINT\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" 0  0123456789abcdef0123456789abcdef  llama  RUNNING   00000001  2         3        1/inf     "
                     "worker 1 died  /ckpt/checkpoint_000010\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" 1  fedcba9876543210fedcba9876543210  tiny   FINISHED  00000002  0                  0/3\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;  // only the detail's first line
  EXPECT_NE(FormatTrainRunList(Runs(), 2, false, testing::RayExampleSecond(), absl::UTCTimeZone())
                .find("Showing at most 2 entries"),
            std::string::npos);
}

TEST(ListTrainRunsTest, DetailListsAttemptsAndLatestWorkers) {
  std::string out = FormatTrainRunList(Runs(), 100, /*detail=*/true, testing::RayExampleSecond(), absl::UTCTimeZone());
  // Cells of several lines: attempts, then the latest attempt's workers.
  EXPECT_NE(
      out.find("RUNNING   00000001  att0 ERRORED workers=2  0: 10.0.0.1 pid=101 slice=0/tpu-group-0 ACTIVE  1/inf"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("att1 RUNNING workers=3  1: 10.0.0.2 pid=102 slice=1/tpu-group-1 ACTIVE\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("2: 10.0.0.3 pid=103 ACTIVE\n"), std::string::npos) << out;  // no slice
  EXPECT_EQ(out.find("10.0.0.1 pid=101 slice=0/tpu-group-0 ACTIVE\n"), std::string::npos)
      << "FAILURES and the rest follow on the run's first line\n"
      << out;
}

TEST(ListTrainRunsTest, JsonHasRayTrainRunShape) {
  auto j = nlohmann::json::parse(FormatTrainRunListJson(Runs()));
  ASSERT_EQ(j.size(), 2u);
  const auto& r = j[0];
  EXPECT_EQ(r["id"], "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r["name"], "llama");
  EXPECT_EQ(r["job_id"], "00000001");
  EXPECT_EQ(r["controller_actor_id"], "c0ffee");
  EXPECT_EQ(r["status"], "RUNNING");
  EXPECT_EQ(r["status_detail"], "worker 1 died\nTraceback: ...");
  EXPECT_EQ(r["start_time_ms"], 1000);
  EXPECT_TRUE(r["end_time_ms"].is_null());
  EXPECT_EQ(r["num_failures"], 1);
  EXPECT_EQ(r["max_failures"], -1);
  EXPECT_EQ(r["latest_checkpoint"], "/ckpt/checkpoint_000010");
  ASSERT_EQ(r["attempts"].size(), 2u);
  EXPECT_EQ(r["attempts"][0]["attempt_id"], "att0");
  EXPECT_EQ(r["attempts"][0]["status"], "ERRORED");
  EXPECT_EQ(r["attempts"][0]["end_time_ms"], 2000);
  EXPECT_TRUE(r["attempts"][1]["status_detail"].is_null());
  const auto& w = r["attempts"][1]["workers"][1];
  EXPECT_EQ(w["world_rank"], 1);
  EXPECT_EQ(w["local_rank"], 0);
  EXPECT_EQ(w["node_rank"], 1);
  EXPECT_EQ(w["node_id"], "6b1f");
  EXPECT_EQ(w["node_ip"], "10.0.0.2");
  EXPECT_EQ(w["pid"], 102);
  EXPECT_EQ(w["actor_id"], "a01");
  EXPECT_EQ(w["status"], "ACTIVE");
  EXPECT_EQ(w["slice_id"], 1);
  EXPECT_EQ(w["slice_name"], "tpu-group-1");
  EXPECT_EQ(j[1]["end_time_ms"], 900);
  EXPECT_TRUE(j[1]["status_detail"].is_null());
  EXPECT_TRUE(j[1]["latest_checkpoint"].is_null());
  EXPECT_TRUE(j[1]["attempts"].empty());
  EXPECT_EQ(nlohmann::json::parse(FormatTrainRunListJson({})), nlohmann::json::array());
}

}  // namespace
}  // namespace manta::state
