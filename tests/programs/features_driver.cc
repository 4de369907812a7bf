// A driver for the integration tests of task features a front end needs:
// the front end's error bytes, several returns, retried exceptions,
// get_if_exists, scheduling strategies. Each
// scenario prints "OK <what>" lines, or "FAIL <why>" and exits 1.
#include <manta/api.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <tuple>

namespace {

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  manta::Shutdown();
  return 1;
}

std::tuple<int, std::string, std::vector<int>> ThreeValues(int v) {
  return {v, "v=" + std::to_string(v), std::vector<int>(3, v)};
}

// Counts its runs in `path` and throws std::runtime_error until the count
// reaches `succeed_at`; returns the count and the attempt the worker gave.
std::pair<int, int> FlakyCounted(std::string path, int succeed_at) {
  int runs = 0;
  std::ifstream(path) >> runs;
  std::ofstream(path, std::ios::trunc) << ++runs;
  if (runs < succeed_at) throw std::runtime_error("flaky run " + std::to_string(runs));
  return {runs, manta::core::CurrentTaskContext()->attempt};
}

MANTA_REMOTE(ThreeValues, FlakyCounted);

// A front end's function failing with its own form of the error.
const int kRawRegistered = [] {
  static const char key = 0;
  manta::internal::FunctionRegistry::Instance().RegisterFunction(
      "raw:fail_with_bytes", &key,
      [](const manta::internal::ArgViews&) -> absl::StatusOr<manta::internal::ReturnValues> {
        return manta::core::MakeApplicationError("ValueError: no", std::string("pickle\0bytes", 12));
      });
  return 0;
}();

int ErrorBytes() {
  auto refs = manta::core::CoreWorker::Current()->SubmitTask("raw:fail_with_bytes", {}, {});
  if (!refs.ok() || refs->size() != 1) return Fail("submit");
  auto values = manta::core::CoreWorker::Current()->Get(*refs, absl::Seconds(30));
  if (values[0].ok()) return Fail("the task succeeded");
  if (manta::core::GetErrorType(values[0].status()) != manta::core::ErrorType::kApplicationError) {
    return Fail("type " + values[0].status().ToString());
  }
  if (manta::core::ErrorData(values[0].status()) != std::string("pickle\0bytes", 12)) return Fail("bytes differ");
  std::cout << "OK error bytes" << std::endl;
  return 0;
}

int ThreeReturns() {
  auto [a, b, c] = manta::Task(ThreeValues).RemoteSplit(5);
  if (*manta::Get(a) != 5 || *manta::Get(b) != "v=5" || *manta::Get(c) != std::vector<int>(3, 5)) {
    return Fail("three values");
  }
  std::cout << "OK three returns" << std::endl;
  return 0;
}

int RetriedExceptions(const std::string& dir) {
  const std::string path = dir + "/flaky-runs";
  auto [runs, attempt] = manta::Task(FlakyCounted).SetRetryExceptions().SetMaxRetries(3).RemoteSplit(path, 3);
  if (*manta::Get(runs) != 3 || *manta::Get(attempt) != 2) return Fail("retried runs");
  // Another type than the one named: not retried.
  const std::string other = dir + "/flaky-other";
  auto [r2, a2] =
      manta::Task(FlakyCounted).SetRetryExceptionTypes({"std::logic_error"}).SetMaxRetries(3).RemoteSplit(other, 3);
  try {
    manta::Get(r2);
    return Fail("a filtered-out exception was retried");
  } catch (const manta::ApplicationError& e) {
    if (std::string(e.what()).find("flaky run 1") == std::string::npos) return Fail(e.what());
  }
  std::cout << "OK retried exceptions runs=3" << std::endl;
  return 0;
}

class Keeper {
 public:
  static Keeper* Create() { return new Keeper(); }
  int Pid() { return getpid(); }
};
MANTA_REMOTE(Keeper::Create, &Keeper::Pid);

// Two threads race to create the same named actor with get_if_exists: both
// get one actor.
int GetIfExists() {
  manta::ActorId ids[2];
  std::thread racers[2];
  for (int i = 0; i < 2; ++i) {
    racers[i] = std::thread(
        [&ids, i] { ids[i] = manta::Actor(Keeper::Create).SetName("keeper").SetGetIfExists().Remote().ID(); });
  }
  for (auto& t : racers) t.join();
  if (ids[0] != ids[1]) return Fail("racing creators got two actors");
  auto again = manta::Actor(Keeper::Create).SetName("keeper").SetGetIfExists().Remote();
  if (again.ID() != ids[0] || *manta::Get(again.Task(&Keeper::Pid).Remote()) <= 0) return Fail("the named actor");
  std::cout << "OK get_if_exists one actor" << std::endl;
  return 0;
}

// Where it ran: "<MANTA_TEST_NODE> <node id hex>", after a pause so that
// tasks submitted together overlap.
std::string WhereAmI(int pause_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  const char* name = std::getenv("MANTA_TEST_NODE");
  return std::string(name ? name : "?") + " " + manta::core::CoreWorker::Current()->node_id().Hex();
}
MANTA_REMOTE(WhereAmI);

// SPREAD puts three tasks on the three nodes; a hard affinity puts every
// task on the named node; one to an unknown node fails clearly.
int Placement() {
  std::set<std::string> spread;
  std::string other;  // a node that is not the driver's
  // Until this node's raylet has heard of the other two (they just joined).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (spread.size() < 3) {
    if (std::chrono::steady_clock::now() > deadline) return Fail("SPREAD used " + std::to_string(spread.size()));
    std::vector<manta::ObjectRef<std::string>> refs;
    for (int i = 0; i < 3; ++i) {
      refs.push_back(manta::Task(WhereAmI).SetSchedulingStrategy(manta::SpreadStrategy()).Remote(300));
    }
    spread.clear();
    for (const auto& where : manta::Get(refs)) {
      spread.insert(*where);
      if (where->rfind("head ", 0) != 0) other = *where;
    }
  }
  auto node = manta::NodeId::FromHex(other.substr(other.find(' ') + 1));
  if (!node.ok()) return Fail("node id " + other);
  std::vector<manta::ObjectRef<std::string>> pinned;
  for (int i = 0; i < 4; ++i) {
    pinned.push_back(manta::Task(WhereAmI).SetSchedulingStrategy(manta::NodeAffinity(*node)).Remote(0));
  }
  for (const auto& where : manta::Get(pinned)) {
    if (*where != other) return Fail("affinity ran on " + *where + ", not " + other);
  }
  try {
    manta::Get(manta::Task(WhereAmI).SetSchedulingStrategy(manta::NodeAffinity(manta::NodeId::FromRandom())).Remote(0));
    return Fail("an affinity to an unknown node ran");
  } catch (const manta::InfeasibleError& e) {
    if (std::string(e.what()).find("unknown") == std::string::npos) return Fail(e.what());
  }
  std::cout << "OK spread over 3 nodes, affinity to " << other.substr(0, other.find(' ')) << std::endl;
  return 0;
}

bool Exists(const std::string& path) { return !std::ifstream(path).fail(); }

// Marks `marker` and spins until cancelled (unless it ignores that; marked
// `marker`.cancelled) or told to stop (by `marker`.stop; marked
// `marker`.finished), for at most a minute.
int Spin(std::string marker, bool ignore_cancel) {
  std::ofstream(marker) << "started";
  auto end = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < end) {
    if (!ignore_cancel && manta::TaskCancelled()) {
      std::ofstream(marker + ".cancelled") << "cancelled";
      return 1;
    }
    if (Exists(marker + ".stop")) {
      std::ofstream(marker + ".finished") << "finished";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}
int PlusOne(int v) { return v + 1; }
// Submits a Spin marking `child_marker` and waits for it, until cancelled.
int SpinParent(std::string child_marker) {
  auto child = manta::Task(Spin).Remote(child_marker, false);
  while (!manta::TaskCancelled()) {
    if (!manta::Wait(std::vector<manta::ObjectRef<int>>{child}, 1, absl::Milliseconds(20)).ready.empty()) {
      return *manta::Get(child);
    }
  }
  return -1;
}
// Submits a Spin ignoring cancels on `node` (hex), marking `child_marker`,
// and waits for it (a minute at most).
int PinnedParent(std::string node, std::string child_marker) {
  auto child = manta::Task(Spin)
                   .SetSchedulingStrategy(manta::NodeAffinity(*manta::NodeId::FromHex(node)))
                   .Remote(child_marker, true);
  return manta::Wait(std::vector<manta::ObjectRef<int>>{child}, 1, absl::Minutes(1)).ready.empty() ? -1 : 0;
}
MANTA_REMOTE(Spin, PlusOne, SpinParent, PinnedParent);

bool WaitForFile(const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Cancels `ref` of a running task; its Get must raise TaskCancelledError.
// Returns the milliseconds that took, or -1.
int64_t CancelRunning(const manta::ObjectRef<int>& ref, bool force) {
  auto start = std::chrono::steady_clock::now();
  manta::Cancel(ref, force);
  try {
    manta::Get(ref, absl::Seconds(10));
    return -1;
  } catch (const manta::TaskCancelledError&) {
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

bool AllCpusFree() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto nodes = manta::core::CoreWorker::Current()->GetClusterResources();
    bool free = nodes.ok();
    for (const auto& n : nodes.ok() ? *nodes : std::vector<manta::core::NodeResourcesData>{}) {
      free = free && n.available.count("CPU") > 0 && n.available.at("CPU") == n.total.at("CPU");
    }
    if (free) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A parent waiting for its child: cancelled recursively (the default), the
// child is cancelled too; forced, both workers are killed; not recursively,
// the child runs on to its own end. Every CPU is free after.
int CancelParents(const std::string& dir) {
  const std::string recursive = dir + "/child-recursive";
  auto parent = manta::Task(SpinParent).Remote(recursive);
  if (!WaitForFile(recursive)) return Fail("the child never started");
  if (CancelRunning(parent, false) < 0) return Fail("the recursively cancelled parent was not cancelled");
  if (!WaitForFile(recursive + ".cancelled")) return Fail("the child was not cancelled with its parent");

  const std::string forced = dir + "/child-forced";
  parent = manta::Task(SpinParent).Remote(forced);
  if (!WaitForFile(forced)) return Fail("the forced parent's child never started");
  if (CancelRunning(parent, true) < 0) return Fail("the forced parent was not cancelled");
  if (!AllCpusFree()) return Fail("the forced parent's child kept its CPU");

  const std::string alone = dir + "/child-alone";
  parent = manta::Task(SpinParent).Remote(alone);
  if (!WaitForFile(alone)) return Fail("the lone child never started");
  manta::Cancel(parent, /*force=*/false, /*recursive=*/false);
  try {
    manta::Get(parent, absl::Seconds(10));
    return Fail("the parent was not cancelled");
  } catch (const manta::TaskCancelledError&) {
  }
  std::ofstream(alone + ".stop") << "stop";
  if (!WaitForFile(alone + ".finished")) return Fail("the child of a parent cancelled alone did not run on");
  if (Exists(alone + ".cancelled")) return Fail("the child of a parent cancelled alone was cancelled");
  if (!AllCpusFree()) return Fail("a parent's or child's CPU was not given back");
  std::cout << "OK cancel recursive, forced and alone, CPUs free" << std::endl;
  return 0;
}

// A running task polling TaskCancelled ends within a second of Cancel; one
// ignoring it is killed (force) as fast, its CPU given back; a task
// waiting for an argument is dropped.
int CancelTasks(const std::string& dir) {
  auto polite = manta::Task(Spin).SetMaxRetries(3).Remote(dir + "/spin-polite", false);
  if (!WaitForFile(dir + "/spin-polite")) return Fail("the polite task never started");
  auto waiting = manta::Task(PlusOne).Remote(polite);  // waits for its argument
  manta::Cancel(waiting);
  try {
    manta::Get(waiting, absl::Seconds(5));
    return Fail("the waiting task ran");
  } catch (const manta::TaskCancelledError&) {
  }
  int64_t polite_ms = CancelRunning(polite, false);
  if (polite_ms < 0 || polite_ms > 1000) return Fail("polite cancel took " + std::to_string(polite_ms) + " ms");
  auto stubborn = manta::Task(Spin).SetMaxRetries(3).Remote(dir + "/spin-stubborn", true);
  if (!WaitForFile(dir + "/spin-stubborn")) return Fail("the stubborn task never started");
  int64_t force_ms = CancelRunning(stubborn, true);
  if (force_ms < 0 || force_ms > 1000) return Fail("force cancel took " + std::to_string(force_ms) + " ms");
  if (!AllCpusFree()) return Fail("a CPU was not given back");
  std::cout << "OK cancel polite and forced within a second, CPUs free" << std::endl;
  return CancelParents(dir);
}

// A task's callee goes with it: a parent killed (forced, not recursive)
// while its child runs, on the parent's node or another, leaves no worker
// of that child holding a CPU.
int OrphanedChildren(const std::string& dir) {
  auto* cw = manta::core::CoreWorker::Current();
  const manta::NodeId here = cw->node_id();
  std::string elsewhere;
  for (const auto& n : cw->GetClusterResources().value_or(std::vector<manta::core::NodeResourcesData>{})) {
    if (n.node_id != here) elsewhere = n.node_id.Hex();
  }
  if (elsewhere.empty()) return Fail("no other node");
  for (const auto& [where, node] : std::map<std::string, std::string>{{"here", here.Hex()}, {"elsewhere", elsewhere}}) {
    const std::string marker = dir + "/orphan-" + where;
    auto parent = manta::Task(PinnedParent).SetSchedulingStrategy(manta::NodeAffinity(here)).Remote(node, marker);
    if (!WaitForFile(marker)) return Fail("the child " + where + " never started");
    manta::Cancel(parent, /*force=*/true, /*recursive=*/false);
    try {
      manta::Get(parent, absl::Seconds(10));
      return Fail("the parent was not cancelled");
    } catch (const manta::TaskCancelledError&) {
    }
    if (!AllCpusFree()) return Fail("the child " + where + " of a killed parent kept its CPU");
    std::ofstream(marker + ".stop") << "stop";
  }
  std::cout << "OK the children of a killed parent end, here and elsewhere" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  std::string scenario = argc > 1 ? argv[1] : "";
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  const std::map<std::string, std::function<int()>> scenarios = {
      {"placement", Placement},
      {"cancel", [&] { return CancelTasks(dir); }},
      {"orphans", [&] { return OrphanedChildren(dir); }},
      {"returns_and_errors",
       [&] {
         for (const auto& step : std::vector<std::function<int()>>{
                  ErrorBytes, ThreeReturns, [&] { return RetriedExceptions(dir); }, GetIfExists}) {
           if (int rc = step(); rc != 0) return rc;
         }
         return 0;
       }},
  };
  auto it = scenarios.find(scenario);
  if (it == scenarios.end()) {
    std::cerr << "unknown scenario '" << scenario << "'" << std::endl;
    return 2;
  }
  const int rc = it->second();
  if (rc == 0) manta::Shutdown();
  return rc;
}
