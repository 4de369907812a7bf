// A driver for the drain integration tests (tests/drain_test.cc). Each node
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
  } else {
    std::cerr << "usage: drain_driver hold|submit_after DIR" << std::endl;
  }
  manta::Shutdown();
  return rc;
}
