#include "state/list_actors.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "state/test_times.h"

namespace manta::state {
namespace {

TEST(ListActorsTest, TableLikeRayListActors) {
  ActorView alive;
  alive.actor_id = "9f1c";
  alive.class_name = "Counter";
  alive.state = "ALIVE";
  alive.job_id = "00000001";
  alive.name = "counter";
  alive.node_id = "6b1f";
  alive.pid = 4321;
  alive.num_restarts = 2;
  ActorView pending;
  pending.actor_id = "aa00";
  pending.class_name = "Trainer";
  pending.state = "PENDING_CREATION";
  pending.job_id = "00000001";
  std::string out = FormatActorList({alive, pending}, 100, testing::RayExampleSecond(), absl::UTCTimeZone());
  EXPECT_NE(out.find("======== List: 2026-04-21 10:20:20"), std::string::npos);
  EXPECT_NE(out.find("Total: 2\n"), std::string::npos);
  EXPECT_EQ(out.find("Showing at most"), std::string::npos);
  EXPECT_NE(out.find("    ACTOR_ID  CLASS_NAME  STATE             JOB_ID    NAME     NODE_ID  PID   RAY_NAMESPACE  "
                     "RESTARTS\n"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(" 0  9f1c      Counter     ALIVE             00000001  counter  6b1f     4321                 2\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(" 1  aa00      Trainer     PENDING_CREATION  00000001"), std::string::npos) << out;
  EXPECT_NE(
      FormatActorList({alive}, 1, testing::RayExampleSecond(), absl::UTCTimeZone()).find("Showing at most 1 entries"),
      std::string::npos);
}

TEST(ListActorsTest, JsonHasLowerCaseKeys) {
  ActorView a;
  a.actor_id = "9f1c";
  a.state = "DEAD";
  a.death_cause = "the node died";
  a.resources = {{"TPU", 4}};
  auto j = nlohmann::json::parse(FormatActorListJson({a}));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["actor_id"], "9f1c");
  EXPECT_EQ(j[0]["state"], "DEAD");
  EXPECT_EQ(j[0]["death_cause"], "the node died");
  EXPECT_EQ(j[0]["required_resources"]["TPU"], 4.0);
}

TEST(ListActorsTest, JsonReplacesBytesThatAreNotUtf8) {
  ActorView a;
  a.actor_id = "9f1c";
  a.name = "caf\xff";
  TaskView t;
  t.task_id = "t1";
  t.error_message = "output \xfe\xff";
  std::string actors, tasks;
  ASSERT_NO_THROW(actors = FormatActorListJson({a}));
  ASSERT_NO_THROW(tasks = FormatTaskListJson({t}));
  EXPECT_EQ(nlohmann::json::parse(actors)[0]["name"], "caf\xef\xbf\xbd");
  EXPECT_EQ(nlohmann::json::parse(tasks)[0]["error_message"], "output \xef\xbf\xbd\xef\xbf\xbd");
}

TEST(ListTasksTest, TableShowsResourcesAndDrops) {
  TaskView t;
  t.task_id = "t1";
  t.attempt = 1;
  t.name = "Add";
  t.state = "FAILED";
  t.job_id = "00000001";
  t.type = "NORMAL_TASK";
  t.worker_pid = 77;
  t.error_type = "WORKER_DIED";
  t.resources = {{"CPU", 1}, {"TPU", 4}};
  std::string out = FormatTaskList({t}, 5, 100, testing::RayExampleSecond(), absl::UTCTimeZone());
  EXPECT_NE(out.find("Dropped: 5"), std::string::npos) << out;
  EXPECT_LT(out.find("Dropped: 5"), out.find("Table:"));
  EXPECT_NE(out.find("TASK_ID  ATTEMPT_NUMBER  NAME  STATE   JOB_ID    ACTOR_ID  TYPE         NODE_ID  WORKER_PID  "
                     "ERROR_TYPE   REQUIRED_RESOURCES\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("WORKER_DIED  CPU: 1.0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("TPU: 4.0\n"), std::string::npos) << out;
  auto j = nlohmann::json::parse(FormatTaskListJson({t}));
  EXPECT_EQ(j[0]["attempt_number"], 1);
  EXPECT_EQ(j[0]["error_type"], "WORKER_DIED");
}

}  // namespace
}  // namespace manta::state
