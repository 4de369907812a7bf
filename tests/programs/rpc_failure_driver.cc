// A driver for the RPC fault injection test: run with MANTA_testing_rpc_failure
// set (inherited by the cluster it talks to), it submits tasks, actors and
// placement groups and checks every answer. Each task run and actor
// construction appends a line to a file under DIR, so the test can count
// how often each really ran. Prints "OK ..." lines and exits 0, or prints
// "FAIL ..." and exits 1.
//
//   rpc_failure_driver DIR
#include <manta/api.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  manta::Shutdown();
  return 1;
}

void Record(const std::string& path) { std::ofstream(path, std::ios::app) << getpid() << "\n"; }

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
  return n;
}

// Polls `done` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Runs once per attempt that really runs: the test counts the lines.
int Square(std::string dir, int x) {
  Record(dir + "/task-" + std::to_string(x));
  return x * x;
}
MANTA_REMOTE(Square);

class Counter {
 public:
  static Counter* Create(std::string dir, int tag) {
    Record(dir + "/actor-" + std::to_string(tag));
    return new Counter(tag);
  }
  explicit Counter(int tag) : tag_(tag) {}
  int Add(int x) {
    if (x != next_) in_order_ = false;
    ++next_;
    return tag_ * 1000 + x;
  }
  int Calls() { return in_order_ ? next_ : -1; }

 private:
  int tag_;
  int next_ = 0;
  bool in_order_ = true;
};
MANTA_REMOTE(Counter::Create, &Counter::Add, &Counter::Calls);

constexpr int kTasks = 40;
constexpr int kActors = 3;
constexpr int kCalls = 20;
constexpr int kGroups = 3;

int Tasks(const std::string& dir) {
  std::vector<manta::ObjectRef<int>> refs;
  for (int i = 0; i < kTasks; ++i) refs.push_back(manta::Task(Square).Remote(dir, i));
  for (int i = 0; i < kTasks; ++i) {
    auto v = manta::TryGet(refs[static_cast<size_t>(i)], absl::Seconds(120));
    if (!v.ok()) return Fail("task " + std::to_string(i) + ": " + v.status().ToString());
    if (**v != i * i) return Fail("task " + std::to_string(i) + " returned " + std::to_string(**v));
  }
  std::cout << "OK tasks " << kTasks << std::endl;
  return 0;
}

int Actors(const std::string& dir) {
  std::vector<manta::ActorHandle<Counter>> actors;
  for (int a = 0; a < kActors; ++a) actors.push_back(manta::Actor(Counter::Create).Remote(dir, a));
  for (int a = 0; a < kActors; ++a) {
    std::vector<manta::ObjectRef<int>> refs;
    for (int i = 0; i < kCalls; ++i) refs.push_back(actors[a].Task(&Counter::Add).Remote(i));
    for (int i = 0; i < kCalls; ++i) {
      auto v = manta::TryGet(refs[static_cast<size_t>(i)], absl::Seconds(120));
      if (!v.ok()) return Fail("actor call: " + v.status().ToString());
      if (**v != a * 1000 + i) return Fail("actor call returned " + std::to_string(**v));
    }
    auto calls = manta::TryGet(actors[a].Task(&Counter::Calls).Remote(), absl::Seconds(120));
    if (!calls.ok() || **calls != kCalls) return Fail("actor " + std::to_string(a) + " saw its calls wrongly");
  }
  for (auto& actor : actors) manta::Kill(actor);
  // One restart allowed, one kill with restart: it comes back exactly once.
  auto restartable = manta::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(-1).Remote(dir, kActors);
  if (*manta::Get(restartable.Task(&Counter::Add).Remote(0)) != kActors * 1000) return Fail("restartable");
  manta::Kill(restartable, /*no_restart=*/false);
  // Until the old incarnation is gone a call may still reach it: wait for
  // the constructor to run again instead (the test counts its runs and the
  // restarts the GCS made).
  const std::string constructed = dir + "/actor-" + std::to_string(kActors);
  if (!WaitFor([&] { return Lines(constructed) >= 2; }, std::chrono::seconds(120))) {
    return Fail("the actor was not constructed again after a kill with restart");
  }
  manta::Kill(restartable);
  std::cout << "OK actors " << kActors + 1 << std::endl;
  return 0;
}

int Groups(const std::string& dir) {
  for (int g = 0; g < kGroups; ++g) {
    manta::PlacementGroupOptions o;
    o.name = "rpc-failure-" + std::to_string(g);
    o.strategy = manta::PlacementStrategy::kSpread;
    o.bundles = {{{{"CPU", 0.5}}}, {{{"CPU", 0.5}}}};
    manta::PlacementGroup pg = manta::CreatePlacementGroup(o);
    if (!pg.Wait(absl::Seconds(120))) return Fail("group " + o.name + " not ready: " + pg.StateMessage());
    const int x = 100 + g;
    auto v = manta::TryGet(manta::Task(Square).SetResources({{"CPU", 0.5}}).SetPlacementGroup(pg, 1).Remote(dir, x),
                           absl::Seconds(120));
    if (!v.ok() || **v != x * x) return Fail("task in group " + o.name);
    manta::RemovePlacementGroup(pg);
  }
  std::cout << "OK groups " << kGroups << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  if (argc < 2) return Fail("usage: rpc_failure_driver DIR");
  const std::string dir = argv[1];
  if (int rc = Tasks(dir); rc != 0) return rc;
  if (int rc = Actors(dir); rc != 0) return rc;
  if (int rc = Groups(dir); rc != 0) return rc;
  manta::Shutdown();
  std::cout << "OK rpc failures" << std::endl;
  return 0;
}
