// The chaos run: tests/programs/chaos_driver runs tasks with retries and
// actors receiving numbered calls while a raylet that is not the head's is
// killed every few seconds and a new one started in its place. Every task
// result must arrive, correct; every actor call must succeed in order or
// fail with a typed error as its retry settings allow; afterwards the
// cluster's available resources must return to its totals.
//
// The suite runs a short version. scripts/chaos.sh runs the long one (the
// issue's 10,000 tasks and 100 actors) through the same test, sized by:
//   MANTA_CHAOS_TASKS, MANTA_CHAOS_ACTORS, MANTA_CHAOS_CALLS, MANTA_CHAOS_TASK_MS, MANTA_CHAOS_CALL_MS,
//   MANTA_CHAOS_KILLS (0: until the workload ends), MANTA_CHAOS_KILL_PERIOD_MS,
//   MANTA_CHAOS_JSON (a file for the report).
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) && out >= 0 ? out : fallback;
}

// The driver's "RESULT {...}" line, or null.
nlohmann::json ResultOf(const std::string& log) {
  auto text = ReadFile(log);
  if (!text.ok()) return nullptr;
  size_t at = text->rfind("RESULT ");
  if (at == std::string::npos) return nullptr;
  size_t end = text->find('\n', at);
  return nlohmann::json::parse(text->substr(at + 7, end == std::string::npos ? end : end - at - 7), nullptr, false);
}

// Reaps the driver when it has exited: true with its wait status.
bool Exited(pid_t pid, int* status) { return waitpid(pid, status, WNOHANG) == pid; }

TEST(ChaosTest, TasksAndActorsSurviveRayletsKilledEveryFewSeconds) {
  const int tasks = EnvInt("MANTA_CHAOS_TASKS", 2000);
  const int actors = EnvInt("MANTA_CHAOS_ACTORS", 8);
  const int calls = EnvInt("MANTA_CHAOS_CALLS", 30);
  const int task_ms = EnvInt("MANTA_CHAOS_TASK_MS", 25);
  // Calls take long enough that kills land while actors are busy.
  const int call_ms = EnvInt("MANTA_CHAOS_CALL_MS", 200);
  const int max_kills = EnvInt("MANTA_CHAOS_KILLS", 3);
  const absl::Duration period = absl::Milliseconds(EnvInt("MANTA_CHAOS_KILL_PERIOD_MS", 1500));
  constexpr int kVictims = 3;

  ClusterOptions options;
  options.head.num_cpus = 2;
  Cluster cluster(options);
  MANTA_ASSERT_OK(cluster.StartHead());
  RayletOptions victim;
  victim.num_cpus = 2;
  victim.resources = absl::StrCat(R"({"chaos_actor": )", std::max(actors, 1), "}");
  std::vector<int> alive;
  for (int i = 0; i < kVictims; ++i) {
    auto added = cluster.AddRaylet(victim);
    ASSERT_TRUE(added.ok()) << added.status();
    alive.push_back(*added);
  }

  const std::string log = cluster.temp_dir() + "/chaos_driver.out";
  auto driver = cluster.StartProgram("chaos_driver",
                                     {std::to_string(tasks), std::to_string(actors), std::to_string(calls),
                                      std::to_string(task_ms), std::to_string(call_ms)},
                                     log);
  MANTA_ASSERT_OK(driver.status());
  ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(TailFile(log, 5), "READY"); }, absl::Seconds(60)))
      << TailFile(log, 20);

  std::mt19937 rng(EnvInt("MANTA_CHAOS_SEED", 1));
  int kills = 0, wait_status = 0;
  bool exited = false;
  absl::Time last_kill = absl::Now();
  const absl::Time run_deadline = absl::Now() + absl::Minutes(30);
  while (!exited && absl::Now() < run_deadline) {
    // The pause between kills ends early when the workload does.
    exited = Cluster::WaitFor([&] { return Exited(*driver, &wait_status); }, period);
    if (exited || (max_kills > 0 && kills >= max_kills)) continue;
    size_t pick = std::uniform_int_distribution<size_t>(0, alive.size() - 1)(rng);
    MANTA_ASSERT_OK(cluster.KillRaylet(alive[pick], SIGKILL));
    last_kill = absl::Now();
    ++kills;
    auto replacement = cluster.AddRaylet(victim);
    ASSERT_TRUE(replacement.ok()) << replacement.status();
    alive[pick] = *replacement;
  }
  ASSERT_TRUE(exited) << "the workload did not finish: " << TailFile(log, 20);
  const absl::Time workload_done = absl::Now();
  std::string why;
  const bool full = Cluster::WaitFor([&] { return cluster.ResourcesFull(&why); }, absl::Seconds(60));
  const absl::Time settled = absl::Now();

  nlohmann::json result = ResultOf(log);
  ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << TailFile(log, 30);
  ASSERT_TRUE(result.is_object()) << TailFile(log, 30);
  result["kills"] = kills;
  result["raylets_alive"] = kVictims;
  result["resources_settled_after_last_kill_s"] = absl::ToDoubleSeconds(settled - last_kill);
  result["resources_settled_after_workload_s"] = absl::ToDoubleSeconds(settled - workload_done);
  result["resources_full"] = full;
  std::cout << "chaos report: " << result.dump() << std::endl;
  if (const char* path = std::getenv("MANTA_CHAOS_JSON")) std::ofstream(path) << result.dump(2) << "\n";

  EXPECT_GE(kills, std::min(max_kills, 1)) << "the workload ended before any raylet was killed";
  const auto& t = result["task_results"];
  EXPECT_EQ(t["ok"], tasks) << t.dump();
  EXPECT_EQ(t["lost"], 0);
  EXPECT_EQ(t["wrong"], 0);
  EXPECT_TRUE(t["errors"].empty()) << "tasks retried without limit failed: " << t.dump();
  const auto& retried = result["retried_actor_calls"];
  EXPECT_EQ(retried["ok"], ((actors + 1) / 2) * calls) << retried.dump();
  EXPECT_EQ(retried["out_of_order"], 0);
  EXPECT_EQ(retried["lost"], 0);
  EXPECT_TRUE(retried["errors"].empty()) << retried.dump();
  const auto& unretried = result["unretried_actor_calls"];
  EXPECT_EQ(unretried["out_of_order"], 0) << unretried.dump();
  EXPECT_EQ(unretried["lost"], 0);
  EXPECT_EQ(unretried["wrong"], 0);
  int64_t failed = 0;
  for (const auto& [type, n] : unretried["errors"].items()) {
    EXPECT_TRUE(type == "ActorDiedError") << "an unretried call failed with " << type;
    failed += n.get<int64_t>();
  }
  EXPECT_EQ(unretried["ok"].get<int64_t>() + failed, (actors / 2) * calls) << unretried.dump();
  EXPECT_TRUE(full) << "resources did not return to their totals: " << why;
}

}  // namespace
}  // namespace manta::testing
