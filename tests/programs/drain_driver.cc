// A driver for the drain and GCS restart integration tests
// (tests/drain_test.cc, tests/gcs_restart_test.cc). Each node
// of the test cluster has MANTA_TEST_NODE set to its name; the driver's
// local raylet is the head's.
//
//   drain_driver hold DIR
//     Runs a task that needs the "victim" resource (only the victim node has
//     it) until DIR/release exists, and prints "HELD" once it runs. When
//     DIR/drained exists it submits a plain CPU task and prints "RAN <node>"
//     (where it ran), then waits for the held task and prints
//     "HELD DONE <node>". Exits 0, or prints "FAIL ..." and exits 1.
//
//   drain_driver write_to_closed_pipe
//     Writes to a pipe whose reader is gone, inside a task and in the driver:
//     prints "EPIPE worker" and "EPIPE driver" (SIGPIPE would kill them).
//
//   drain_driver submit_after DIR
//     Prints "READY", waits until DIR/go exists, then submits a CPU task and
//     prints "RAN <node>" once it returns (or "FAIL ...").
//
//   drain_driver across_restart DIR
//     For the GCS restart tests. Before the restart: an actor holding a
//     count, a placement group of two one-CPU bundles, and a task held until
//     DIR/release exists; prints "READY" and waits for DIR/go (the test kills
//     and restarts the GCS in between). After: the same actor process
//     answers with its count kept; the group is still CREATED on the same
//     nodes and a task runs in each bundle; a new task and a new actor run;
//     the held task finishes once released. Prints "OK", or "FAIL ...".
#include <manta/api.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

bool WaitForPath(const std::string& path, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string NodeName() {
  const char* n = std::getenv("MANTA_TEST_NODE");
  return n ? n : "unknown";
}

// Marks that it runs, then holds its worker until DIR/release exists.
std::string HoldUntilReleased(std::string dir) {
  std::ofstream(dir + "/started") << NodeName();
  WaitForPath(dir + "/release", std::chrono::seconds(60));
  return NodeName();
}

MANTA_REMOTE(NodeName, HoldUntilReleased);

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  return 1;
}

int Hold(const std::string& dir) {
  auto held = manta::Task(HoldUntilReleased).SetResources({{"CPU", 1}, {"victim", 1}}).Remote(dir);
  if (!WaitForPath(dir + "/started", std::chrono::seconds(30))) return Fail("the held task never started");
  std::cout << "HELD" << std::endl;
  if (!WaitForPath(dir + "/drained", std::chrono::seconds(30))) return Fail("the node was never drained");
  auto where = manta::TryGet(manta::Task(NodeName).SetResources({{"CPU", 1}}).Remote(), absl::Seconds(30));
  if (!where.ok()) return Fail("the new task did not run: " + where.status().ToString());
  std::cout << "RAN " << **where << std::endl;
  auto done = manta::TryGet(held, absl::Seconds(60));
  if (!done.ok()) return Fail("the held task failed: " + done.status().ToString());
  std::cout << "HELD DONE " << **done << std::endl;
  return 0;
}

// "EPIPE" when writing to a pipe without a reader fails with EPIPE.
std::string WriteToClosedPipe() {
  int fds[2];
  if (pipe(fds) != 0) return "no pipe";
  close(fds[0]);
  ssize_t n = write(fds[1], "x", 1);
  int err = errno;
  close(fds[1]);
  return n < 0 && err == EPIPE ? "EPIPE" : "wrote";
}

MANTA_REMOTE(WriteToClosedPipe);

int ClosedPipe() {
  auto in_worker = manta::TryGet(manta::Task(WriteToClosedPipe).Remote(), absl::Seconds(60));
  if (!in_worker.ok()) return Fail("the task failed: " + in_worker.status().ToString());
  std::cout << **in_worker << " worker" << std::endl;
  std::cout << WriteToClosedPipe() << " driver" << std::endl;
  return 0;
}

int SubmitAfter(const std::string& dir) {
  std::cout << "READY" << std::endl;
  if (!WaitForPath(dir + "/go", std::chrono::seconds(60))) return Fail("never told to go");
  auto where = manta::TryGet(manta::Task(NodeName).SetResources({{"CPU", 1}}).Remote(), absl::Seconds(60));
  if (!where.ok()) return Fail("the task did not run: " + where.status().ToString());
  std::cout << "RAN " << **where << std::endl;
  return 0;
}

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Incr(int by) { return value_ += by; }
  int Pid() { return getpid(); }

 private:
  int value_;
};

int Pid() { return getpid(); }

MANTA_REMOTE(Counter::Create, &Counter::Incr, &Counter::Pid, Pid);

template <typename T>
absl::StatusOr<T> Value(const manta::ObjectRef<T>& ref) {
  auto v = manta::TryGet(ref, absl::Seconds(60));
  if (!v.ok()) return v.status();
  return **v;
}

std::vector<std::string> NodesOf(const manta::PlacementGroup& pg) {
  std::vector<std::string> nodes;
  for (const manta::BundleLocation& b : pg.Bundles()) nodes.push_back(b.node_id);
  return nodes;
}

// The checks after the restart; "" when all pass.
std::string CheckAfterRestart(manta::ActorHandle<Counter>& counter, int actor_pid, const manta::PlacementGroup& pg,
                              const std::vector<std::string>& nodes) {
  auto count = Value(counter.Task(&Counter::Incr).Remote(1));
  if (!count.ok()) return "the actor did not answer after the restart: " + count.status().ToString();
  if (*count != 12) return "the actor lost its count: " + std::to_string(*count);
  auto pid = Value(counter.Task(&Counter::Pid).Remote());
  if (!pid.ok() || *pid != actor_pid) return "the actor was restarted";
  if (pg.State() != manta::PlacementGroupState::kCreated) return "the group is not CREATED: " + pg.StateMessage();
  if (NodesOf(pg) != nodes) return "the group's bundles moved";
  for (int i = 0; i < 2; ++i) {
    auto in_bundle = Value(manta::Task(Pid).SetPlacementGroup(pg, i).Remote());
    if (!in_bundle.ok()) return "no task ran in bundle " + std::to_string(i) + ": " + in_bundle.status().ToString();
  }
  auto task = Value(manta::Task(Pid).Remote());
  if (!task.ok()) return "a new task did not run: " + task.status().ToString();
  auto fresh = manta::Actor(Counter::Create).Remote(100);
  auto fresh_count = Value(fresh.Task(&Counter::Incr).Remote(1));
  if (!fresh_count.ok() || *fresh_count != 101) return "a new actor did not answer";
  return "";
}

int AcrossRestart(const std::string& dir) {
  auto counter = manta::Actor(Counter::Create).Remote(10);
  auto first = Value(counter.Task(&Counter::Incr).Remote(1));
  auto actor_pid = Value(counter.Task(&Counter::Pid).Remote());
  if (!first.ok() || *first != 11 || !actor_pid.ok()) return Fail("the actor did not answer before the restart");
  manta::PlacementGroupOptions options;
  options.bundles = {{.resources = {{"CPU", 1}}}, {.resources = {{"CPU", 1}}}};
  manta::PlacementGroup pg = manta::CreatePlacementGroup(options);
  if (!pg.Wait(absl::Seconds(30))) return Fail("the group is not ready: " + pg.StateMessage());
  const std::vector<std::string> nodes = NodesOf(pg);
  auto held = manta::Task(HoldUntilReleased).Remote(dir);
  if (!WaitForPath(dir + "/started", std::chrono::seconds(60))) return Fail("the held task never started");
  std::cout << "READY" << std::endl;

  if (!WaitForPath(dir + "/go", std::chrono::seconds(120))) return Fail("never told to go");
  std::string failed = CheckAfterRestart(counter, *actor_pid, pg, nodes);
  if (!failed.empty()) return Fail(failed);
  std::ofstream(dir + "/release") << "go";
  auto released = Value(held);
  if (!released.ok()) return Fail("the held task failed: " + released.status().ToString());
  manta::RemovePlacementGroup(pg);
  std::cout << "OK" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  std::string scenario = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (scenario == "hold" && argc > 2) {
    rc = Hold(argv[2]);
  } else if (scenario == "write_to_closed_pipe") {
    rc = ClosedPipe();
  } else if (scenario == "submit_after" && argc > 2) {
    rc = SubmitAfter(argv[2]);
  } else if (scenario == "across_restart" && argc > 2) {
    try {
      rc = AcrossRestart(argv[2]);
    } catch (const manta::Error& e) {
      rc = Fail(e.what());
    }
  } else {
    std::cerr << "usage: drain_driver hold|submit_after|across_restart DIR" << std::endl;
  }
  manta::Shutdown();
  return rc;
}
