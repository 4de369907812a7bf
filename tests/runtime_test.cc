// Tasks, actors and objects on real clusters: the examples' results, ordered
// actor calls, large objects, retries after a worker dies, actor restarts,
// spillback, infeasible demands, typed errors; and nothing leaked after.
#include <signal.h>

#include <fstream>
#include <map>
#include <set>

#include "nlohmann/json.hpp"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (!l.empty()) out.emplace_back(l);
  }
  return out;
}

// Every node's available resources equal its totals: no lease leaked.
bool AllResourcesReturned(Cluster& cluster) {
  auto r = cluster.GetClusterResources();
  if (!r.ok()) return false;
  for (const auto& n : r->nodes()) {
    for (const auto& [name, total] : n.total()) {
      auto it = n.available().find(name);
      if (it == n.available().end() || it->second != total) return false;
    }
  }
  return true;
}

void ExpectClean(Cluster& cluster) {
  EXPECT_TRUE(Cluster::WaitFor([&] { return AllResourcesReturned(cluster); }, absl::Seconds(10)))
      << "resources were not all returned";
}

TEST(RuntimeExamplesTest, TpuSliceHostAndDeviceModesAndCounter) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  MANTA_ASSERT_OK(cluster.AddTpuSlice("tpu-group-0", "v6e-16", "4x4").status());

  CommandResult hosts = cluster.RunProgram("example_tpu_hosts", {});
  ASSERT_EQ(hosts.exit_code, 0) << hosts.out << hosts.err;
  std::set<std::string> workers;
  for (const auto& line : Lines(hosts.out)) {
    if (line.rfind("slice=", 0) != 0) continue;
    EXPECT_NE(line.find("slice=tpu-group-0"), std::string::npos) << line;
    EXPECT_NE(line.find("chips=all"), std::string::npos) << line;
    workers.insert(line.substr(line.find("worker="), 8));
  }
  EXPECT_EQ(workers.size(), 4u) << hosts.out;

  CommandResult devices = cluster.RunProgram("example_tpu_devices", {});
  ASSERT_EQ(devices.exit_code, 0) << devices.out << devices.err;
  std::map<std::string, std::multiset<std::string>> chips_by_worker;
  for (const auto& line : Lines(devices.out)) {
    if (line.rfind("worker=", 0) != 0) continue;
    std::string worker = line.substr(7, line.find(' ') - 7);
    auto pos = line.find("TPU_VISIBLE_CHIPS=") + 18;
    chips_by_worker[worker].insert(line.substr(pos, line.find(' ', pos) - pos));
    EXPECT_NE(line.find("TPU_CHIPS_PER_HOST_BOUNDS=1,1,1"), std::string::npos) << line;
  }
  ASSERT_EQ(chips_by_worker.size(), 4u) << devices.out;
  for (const auto& [worker, chips] : chips_by_worker) {
    EXPECT_EQ(chips, (std::multiset<std::string>{"0", "1", "2", "3"})) << "host " << worker;
  }

  CommandResult counter = cluster.RunProgram("example_counter", {});
  ASSERT_EQ(counter.exit_code, 0) << counter.out << counter.err;
  EXPECT_NE(counter.out.find("Add(1, 2) = 3"), std::string::npos) << counter.out;
  EXPECT_NE(counter.out.find("final value 25"), std::string::npos) << counter.out;
  // The actor's own output reaches the driver with Ray's prefix.
  EXPECT_TRUE(counter.out.find("pid=") != std::string::npos &&
              counter.out.find("counter is now 25") != std::string::npos)
      << counter.out;
  ExpectClean(cluster);
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.head.num_cpus = 2;
    options.head.env = {{"MANTA_TEST_NODE", "head"}};
    cluster_ = std::make_unique<Cluster>(options);
    MANTA_ASSERT_OK(cluster_->StartHead());
  }
  // Runs a runtime_driver scenario: it exits 0 and prints `ok`, and every
  // lease and resource it used is returned after.
  CommandResult RunScenario(const std::vector<std::string>& args, const std::string& ok) {
    CommandResult r = cluster_->RunProgram("runtime_driver", args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(ok), std::string::npos) << r.out;
    ExpectClean(*cluster_);
    return r;
  }
  // A runtime_driver scenario left running while the test watches the
  // cluster; stopped when this goes, however the test ends.
  struct Background {
    int pid = 0;
    std::string log;  // its output
    // Waits for its own exit; its exit code, or -1.
    int Wait(absl::Duration timeout) {
      if (!WaitForExit(pid, absl::Now() + timeout).ok()) return -1;
      int code = ExitStatusOf(pid).value_or(-1);
      pid = 0;  // reaped: nothing to stop
      return code;
    }
    ~Background() {
      if (pid > 0) TerminateProcess(pid, absl::Now() + absl::Seconds(5)).IgnoreError();
    }
  };
  std::unique_ptr<Background> StartScenario(const std::vector<std::string>& args) {
    SpawnOptions opts;
    opts.executable = Cluster::BinDir() + "/runtime_driver";
    opts.args = args;
    opts.env = cluster_->MantaEnv();
    opts.log_file = cluster_->temp_dir() + "/" + args.at(0) + ".out";
    auto pid = SpawnDaemon(opts);
    EXPECT_TRUE(pid.ok()) << pid.status();
    auto spawned = std::make_unique<Background>();
    spawned->pid = pid.ok() ? *pid : 0;
    spawned->log = opts.log_file;
    return spawned;
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(RuntimeTest, TenThousandActorCallsRunInOrder) {
  RunScenario({"ordered_calls"}, "OK 10000 calls in order, count=10000");
}

TEST_F(RuntimeTest, SixtyFourMiBObjectRoundTrip) { RunScenario({"big_object"}, "OK 64 MiB round trip"); }

TEST_F(RuntimeTest, ArgumentOutlivesTheCallersLastReference) {
  RunScenario({"dropped_argument"}, "OK dropped argument kept until used sum=3145728");
}

TEST_F(RuntimeTest, ActorCallsKeepTheirOrderAroundArgumentsStillComputed) {
  CommandResult r =
      RunScenario({"calls_waiting_on_arguments"}, "OK calls kept their order around arguments; failed one:");
  EXPECT_NE(r.out.find("x was 1"), std::string::npos) << r.out;  // the argument's own error
}

TEST_F(RuntimeTest, ByValueArgumentLargerThanAMessageArrives) {
  RunScenario({"huge_by_value"}, "OK 70 MiB by value sum=73400320");
}

TEST_F(RuntimeTest, CallsInFlightWhenTheActorDiesRunOnItsNextIncarnationInOrder) {
  RunScenario({"calls_across_restart"}, "OK 2000 calls across a restart, in order");
}

TEST_F(RuntimeTest, MoreCallsInFlightThanOneMessageHolds) {
  RunScenario({"many_inline_calls", cluster_->temp_dir() + "/slow-starter-marker"}, "OK 1600 calls of 96 KiB each way");
}

TEST_F(RuntimeTest, BorrowedValueLivesWhileABorrowerHoldsItsRef) {
  RunScenario({"borrowed_refs"}, "OK borrowed value kept, then freed sum=5242880");
}

TEST_F(RuntimeTest, RefsReturnedInsideAValueLiveAsLongAsItDoes) {
  RunScenario({"returned_refs"}, "OK returned refs kept, then freed");
}

TEST_F(RuntimeTest, ApplicationErrorsAreTypedAndCarryTheRemoteMessage) {
  CommandResult r = RunScenario({"typed_errors"}, "OK application error");
  EXPECT_NE(r.out.find("Throws"), std::string::npos) << r.out;
}

TEST_F(RuntimeTest, OutputWrittenBeforeTheLastResultIsAllPrintedBeforeTheDriverExits) {
  // 2 MB of lines, written just before the result: the raylet forwards them
  // in many batches, the last ones after the driver has begun to exit.
  CommandResult r = RunScenario({"late_output"}, "OK chatty returned 20000");
  int next = 0;
  for (const auto& line : Lines(r.out)) {
    auto at = line.find("chatty line ");
    if (at == std::string::npos) continue;
    ASSERT_EQ(line.rfind("(worker pid=", 0), 0u) << line;
    ASSERT_EQ(std::stoi(line.substr(at + 12)), next) << "lines missing or out of order";
    ++next;
  }
  EXPECT_EQ(next, 20000) << "lines printed: " << next;
}

TEST_F(RuntimeTest, WorkerKilledMidTaskIsRetriedWithTheRightAnswer) {
  std::string marker = cluster_->temp_dir() + "/die-once";
  RunScenario({"retry_after_worker_death", marker}, "OK retried after worker death value=70");
}

TEST_F(RuntimeTest, ActorRestartsWithItsConstructorRerunThenDies) {
  CommandResult r = RunScenario({"actor_restart"}, "OK restarted");
  EXPECT_NE(r.out.find("OK actor died after its restarts"), std::string::npos) << r.out;
}

TEST_F(RuntimeTest, ThreadedActorRunsCallsConcurrently) {
  RunScenario({"threaded_actor"}, "OK 4 calls met inside a threaded actor");
}

TEST_F(RuntimeTest, DetachedActorOutlivesItsJobAndOwnedOneDoesNot) {
  CommandResult created = cluster_->RunProgram("runtime_driver", {"detached_create"});
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  CommandResult used = cluster_->RunProgram("runtime_driver", {"detached_use"});
  EXPECT_EQ(used.exit_code, 0) << used.out << used.err;
  EXPECT_NE(used.out.find("OK detached actor outlived its job"), std::string::npos) << used.out;
  ExpectClean(*cluster_);
}

TEST_F(RuntimeTest, TasksSpillBackToTheNodeThatCanRunThem) {
  RayletOptions special;
  special.resources = R"({"special": 2})";
  special.env = {{"MANTA_TEST_NODE", "special"}};
  MANTA_ASSERT_OK(cluster_->AddRaylet(special).status());
  CommandResult r = cluster_->RunProgram("runtime_driver", {"spillback"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  int ran = 0;
  for (const auto& line : Lines(r.out)) {
    if (line.rfind("RAN ", 0) != 0) continue;
    ++ran;
    EXPECT_EQ(line, "RAN special");
  }
  EXPECT_EQ(ran, 4) << r.out;
  ExpectClean(*cluster_);
}

TEST_F(RuntimeTest, RayletKilledAndItsTasksRerunElsewhere) {
  RayletOptions a, b;
  a.resources = R"({"special": 1})";
  a.env = {{"MANTA_TEST_NODE", "a"}};
  b.resources = R"({"special": 1})";
  b.env = {{"MANTA_TEST_NODE", "b"}};
  auto ids = cluster_->AddRaylets({a, b});
  MANTA_ASSERT_OK(ids.status());
  auto driver = StartScenario({"rerun_elsewhere", cluster_->temp_dir()});
  ASSERT_GT(driver->pid, 0);
  // Kill the raylet of whichever node the task started on.
  std::string first;
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        if (PathExists(cluster_->temp_dir() + "/started-a")) first = "a";
        if (PathExists(cluster_->temp_dir() + "/started-b")) first = "b";
        return !first.empty();
      },
      absl::Seconds(20)));
  MANTA_ASSERT_OK(cluster_->KillRaylet(first == "a" ? (*ids)[0] : (*ids)[1], SIGKILL));
  const int code = driver->Wait(absl::Seconds(60));
  std::string out = TailFile(driver->log, 50);
  std::string other = first == "a" ? "b" : "a";
  EXPECT_NE(out.find("RAN " + other), std::string::npos) << out;
  EXPECT_EQ(code, 0) << out;
  ExpectClean(*cluster_);
}

TEST_F(RuntimeTest, InfeasibleDemandIsShownInStatus) {
  auto driver = StartScenario({"infeasible"});
  ASSERT_GT(driver->pid, 0);
  std::string status;
  bool shown = Cluster::WaitFor(
      [&] {
        status = cluster_->RunManta({"status"}, cluster_->MantaEnv()).out;
        return status.find("{'CPU': 1000.0}") != std::string::npos || status.find("CPU: 1000") != std::string::npos;
      },
      absl::Seconds(15));
  EXPECT_TRUE(shown) << status << TailFile(driver->log, 20);
  EXPECT_NE(status.find("infeasible"), std::string::npos) << status;
  driver.reset();  // stopped: its demand goes with it
  ExpectClean(*cluster_);
}

// `manta list tasks --format=json`, keyed by name: every attempt listed.
std::multimap<std::string, nlohmann::json> ListTasks(Cluster& cluster) {
  std::multimap<std::string, nlohmann::json> out;
  CommandResult r = cluster.RunManta({"list", "tasks", "--format=json"}, cluster.MantaEnv());
  if (r.exit_code != 0) return out;
  auto tasks = nlohmann::json::parse(r.out, nullptr, false);
  if (!tasks.is_array()) return out;
  for (const auto& t : tasks) out.emplace(t.value("name", ""), t);
  return out;
}

TEST_F(RuntimeTest, ListTasksShowsRunningFinishedAndFailedTasks) {
  const std::string marker = cluster_->temp_dir() + "/listed-tasks-marker";
  auto driver = StartScenario({"listed_tasks", marker});
  ASSERT_GT(driver->pid, 0);

  // A task still running is listed as RUNNING, on a node, in a worker.
  std::multimap<std::string, nlohmann::json> tasks;
  auto state_of = [&](const std::string& name) {
    auto it = tasks.find(name);
    return it == tasks.end() ? std::string() : it->second.value("state", "");
  };
  bool running = Cluster::WaitFor(
      [&] {
        tasks = ListTasks(*cluster_);
        return state_of("UntilFileExists") == "RUNNING";
      },
      absl::Seconds(30));
  ASSERT_TRUE(running) << TailFile(driver->log, 20);
  const nlohmann::json& waiting = tasks.find("UntilFileExists")->second;
  EXPECT_EQ(waiting.value("node_id", "").size(), 56u) << waiting.dump();
  EXPECT_GT(waiting.value("worker_pid", 0), 0) << waiting.dump();
  { std::ofstream(marker) << "go"; }

  // Once done, each attempt ends FINISHED or FAILED, with where it ran.
  auto settled = [&] {
    tasks = ListTasks(*cluster_);
    int finished = 0;
    for (const auto& [name, t] : tasks) {
      if (t.value("state", "") == "FINISHED") ++finished;
    }
    // 3 squares, the actor's creation, 3 actor calls, the nested pair and
    // the waiter.
    return finished >= 10 && state_of("Throws") == "FAILED";
  };
  bool done = Cluster::WaitFor(settled, absl::Seconds(30));
  std::string listing;
  for (const auto& [name, t] : tasks) listing += t.dump() + "\n";
  ASSERT_TRUE(done) << listing << TailFile(driver->log, 20);
  EXPECT_EQ(tasks.count("Square"), 3u) << listing;
  for (auto [it, end] = tasks.equal_range("Square"); it != end; ++it) {
    const nlohmann::json& t = it->second;
    EXPECT_EQ(t.value("state", ""), "FINISHED") << t.dump();
    EXPECT_EQ(t.value("node_id", "").size(), 56u) << t.dump();
    EXPECT_GT(t.value("worker_pid", 0), 0) << t.dump();
    EXPECT_EQ(t["required_resources"].value("CPU", 0.0), 1.0) << t.dump();
  }
  int calls = 0;
  for (const auto& [name, t] : tasks) {
    if (t.value("type", "") != "ACTOR_TASK") continue;
    ++calls;
    EXPECT_EQ(t.value("state", ""), "FINISHED") << t.dump();
    EXPECT_FALSE(t.value("actor_id", "").empty()) << t.dump();
    EXPECT_GT(t.value("worker_pid", 0), 0) << t.dump();
  }
  EXPECT_EQ(calls, 3) << listing;
  // The actor's creation, which the GCS pushed, ran in the same worker.
  ASSERT_EQ(tasks.count("Recorder::Create"), 1u) << listing;
  const nlohmann::json& created = tasks.find("Recorder::Create")->second;
  const nlohmann::json& call = tasks.find("Recorder::Append")->second;
  EXPECT_EQ(created.value("type", ""), "ACTOR_CREATION_TASK") << created.dump();
  EXPECT_EQ(created.value("state", ""), "FINISHED") << created.dump();
  EXPECT_EQ(created.value("node_id", "").size(), 56u) << created.dump();
  EXPECT_EQ(created.value("actor_id", ""), call.value("actor_id", "x")) << created.dump();
  EXPECT_EQ(created.value("worker_pid", 0), call.value("worker_pid", -1)) << created.dump();
  const nlohmann::json& failed = tasks.find("Throws")->second;
  EXPECT_EQ(failed.value("error_type", ""), "APPLICATION_ERROR") << failed.dump();
  EXPECT_NE(failed.value("error_message", "").find("x was 1"), std::string::npos) << failed.dump();
  EXPECT_EQ(state_of("UntilFileExists"), "FINISHED") << listing;
  // A task a worker owned ran where it says, not in its owner's worker.
  const std::string out = ReadFile(driver->log).value_or("");
  const std::string kNested = "NESTED PID ";
  const size_t at = out.find(kNested);
  ASSERT_NE(at, std::string::npos) << out;
  const int nested = std::atoi(out.c_str() + at + kNested.size());
  ASSERT_EQ(tasks.count("Pid"), 1u) << listing;
  EXPECT_EQ(tasks.find("Pid")->second.value("worker_pid", 0), nested) << listing;
  EXPECT_NE(tasks.find("NestedPid")->second.value("worker_pid", 0), nested) << listing;
  ExpectClean(*cluster_);
}

}  // namespace
}  // namespace manta::testing
