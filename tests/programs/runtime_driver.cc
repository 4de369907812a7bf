// A driver for the runtime's integration tests: each scenario runs against a
// cluster given by MANTA_ADDRESS / MANTA_TOKEN, prints what the test checks
// ("OK ..." lines or values) and exits 0, or prints "FAIL ..." and exits 1.
//
//   runtime_driver ordered_calls | big_object | retry_after_worker_death |
//                  actor_restart | spillback | infeasible | typed_errors |
//                  listed_tasks MARKER | late_output | ...
#include <manta/api.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/process.h"

namespace {

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  manta::Shutdown();
  return 1;
}

// ---- remote functions

int Square(int x) { return x * x; }

std::vector<uint8_t> Echo(std::vector<uint8_t> data) { return data; }

int64_t SumBytes(std::vector<uint8_t> data) { return std::accumulate(data.begin(), data.end(), int64_t{0}); }

int Pid() { return getpid(); }

// The pid of the worker that ran a task this task submitted.
int NestedPid() { return *manta::Get(manta::Task(Pid).Remote()); }

// Dies the first time (a marker file records the attempt), succeeds after.
int DieOnce(std::string marker, int value) {
  if (access(marker.c_str(), F_OK) != 0) {
    std::ofstream(marker) << getpid();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(getpid(), SIGKILL);
  }
  return value * 10;
}

// The node a task ran on: tests give each raylet MANTA_TEST_NODE.
std::string NodeName() {
  const char* n = std::getenv("MANTA_TEST_NODE");
  return n ? n : "unknown";
}

// Announces where it runs (a file in `dir`), then works for a while.
std::string SlowNodeName(std::string dir) {
  std::ofstream(dir + "/started-" + NodeName()) << getpid();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  return NodeName();
}

int Throws(int x) {
  if (x > 0) throw std::runtime_error("x was " + std::to_string(x));
  return x;
}

// `v`, after `ms` milliseconds.
int Later(int v, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return v;
}

// Runs until `path` exists (a minute at most: then -1).
int UntilFileExists(std::string path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 1;
}

// Writes `n` numbered lines of about 100 bytes as fast as it can.
int Chatty(int n) {
  const std::string pad(80, '.');
  for (int i = 0; i < n; ++i) std::cout << "chatty line " << i << ' ' << pad << '\n';
  std::cout.flush();
  return n;
}

MANTA_REMOTE(Square, Echo, SumBytes, Pid, NestedPid, DieOnce, NodeName, SlowNodeName, Throws, Later, UntilFileExists,
             Chatty);

class Recorder {
 public:
  static Recorder* Create(int tag) { return new Recorder(tag); }
  explicit Recorder(int tag) : tag_(tag) {}
  int Append(int x) {
    if (!seen_.empty() && x != seen_.back() + 1) out_of_order_ = true;
    seen_.push_back(x);
    return x;
  }
  bool InOrder() { return !out_of_order_ && !seen_.empty(); }
  int Count() { return static_cast<int>(seen_.size()); }
  int Pid() { return getpid(); }
  int Tag() { return tag_; }
  std::vector<uint8_t> EchoBytes(std::vector<uint8_t> data) { return data; }
  // Runs until `path` is written (at most two minutes); whether it was.
  bool RunUntil(std::string path) { return manta::WaitForFile(path, absl::Now() + absl::Minutes(2)).ok(); }

 private:
  int tag_;
  std::vector<int> seen_;
  bool out_of_order_ = false;
};
MANTA_REMOTE(Recorder::Create, &Recorder::Append, &Recorder::InOrder, &Recorder::Count, &Recorder::Pid, &Recorder::Tag,
             &Recorder::EchoBytes, &Recorder::RunUntil);

// Keeps refs it was given inside a value, past the call that gave them.
class Holder {
 public:
  using Refs = std::vector<manta::ObjectRef<std::vector<uint8_t>>>;
  static Holder* Create() { return new Holder(); }
  int Keep(Refs refs) {
    kept_ = std::move(refs);
    // The ref's wire form alone: it holds nothing.
    wire_ = *manta::Serialize(kept_.at(0));
    return static_cast<int>(kept_.size());
  }
  int64_t SumKept() {
    int64_t sum = 0;
    for (auto& r : kept_) {
      auto v = manta::Get(r);
      sum += std::accumulate(v->begin(), v->end(), int64_t{0});
    }
    return sum;
  }
  int Forget() {
    kept_.clear();
    return 0;
  }
  // Refs to `n` values this actor makes and owns, inside the return value.
  Refs Make(int n) {
    Refs out;
    for (int i = 0; i < n; ++i) out.push_back(manta::Put(std::vector<uint8_t>(1 << 20, 7)));
    return out;
  }
  // One ref to a value it makes, `n` times over.
  Refs MakeSame(int n) { return Refs(static_cast<size_t>(n), manta::Put(std::vector<uint8_t>(1 << 20, 7))); }
  // Whether the first kept value is gone from its owner.
  bool Freed() { return FreedWire(wire_); }
  // Whether the value of the ref whose wire form is `wire` is gone.
  static bool FreedWire(const std::string& wire) {
    auto ref = manta::Deserialize<manta::ObjectRef<std::vector<uint8_t>>>(wire);
    if (!ref.ok()) return false;
    auto v = manta::TryGet(*ref, absl::Seconds(5));
    return !v.ok() && v.status().message().find("freed") != std::string::npos;
  }

 private:
  Refs kept_;
  std::string wire_;
};
bool ValueFreed(std::string wire) { return Holder::FreedWire(wire); }
MANTA_REMOTE(Holder::Create, &Holder::Keep, &Holder::SumKept, &Holder::Forget, &Holder::Freed, &Holder::Make,
             &Holder::MakeSame, ValueFreed);

// Calls meet inside the actor: each waits until `n` calls are in at once.
// Only an actor that runs calls concurrently lets them all in.
class Meeting {
 public:
  static Meeting* Create() { return new Meeting(); }
  bool Rendezvous(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    ++inside_;
    cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return inside_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
};
MANTA_REMOTE(Meeting::Create, &Meeting::Rendezvous);

// ---- scenarios

int OrderedCalls() {
  auto r = manta::Actor(Recorder::Create).Remote(1);
  std::vector<manta::ObjectRef<int>> refs;
  refs.reserve(10000);
  for (int i = 0; i < 10000; ++i) refs.push_back(r.Task(&Recorder::Append).Remote(i));
  auto values = manta::Get(refs);
  for (int i = 0; i < 10000; ++i) {
    if (*values[static_cast<size_t>(i)] != i) return Fail("call " + std::to_string(i) + " returned wrong value");
  }
  if (!*manta::Get(r.Task(&Recorder::InOrder).Remote())) return Fail("calls ran out of order");
  std::cout << "OK 10000 calls in order, count=" << *manta::Get(r.Task(&Recorder::Count).Remote()) << std::endl;
  return 0;
}

int BigObject() {
  std::vector<uint8_t> data(64 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  int64_t expected = std::accumulate(data.begin(), data.end(), int64_t{0});
  auto ref = manta::Put(data);
  int64_t remote_sum = *manta::Get(manta::Task(SumBytes).Remote(ref));
  if (remote_sum != expected) return Fail("the worker saw different bytes");
  auto back = manta::Get(manta::Task(Echo).Remote(ref));
  if (*back != data) return Fail("the 64 MiB round trip changed the bytes");
  std::cout << "OK 64 MiB round trip sum=" << remote_sum << std::endl;
  return 0;
}

// The caller drops its only reference right after submitting: the value
// must live until the tasks that take it have run (1 MiB, so it is fetched
// from this process, not inlined).
int DroppedArgument() {
  std::vector<uint8_t> data(1 << 20, 3);
  const int64_t expected = int64_t{3} << 20;
  manta::ObjectRef<int64_t> task_sum;
  manta::ObjectRef<std::vector<uint8_t>> echoed;
  {
    auto ref = manta::Put(data);
    task_sum = manta::Task(SumBytes).Remote(ref);
    auto a = manta::Actor(Recorder::Create).Remote(0);
    echoed = a.Task(&Recorder::EchoBytes).Remote(ref);
  }
  auto sum = manta::TryGet(task_sum);
  if (!sum.ok()) return Fail("task lost its argument: " + sum.status().ToString());
  if (**sum != expected) return Fail("task saw different bytes");
  auto back = manta::TryGet(echoed);
  if (!back.ok()) return Fail("actor call lost its argument: " + back.status().ToString());
  if (**back != data) return Fail("actor call saw different bytes");
  std::cout << "OK dropped argument kept until used sum=" << **sum << std::endl;
  return 0;
}

// A value passed by value that is larger than any one message may be
// (64 MiB) still reaches the task and the actor: it travels as an object.
int HugeByValueArgument() {
  std::vector<uint8_t> data(70 << 20, 1);
  auto sum = manta::TryGet(manta::Task(SumBytes).Remote(data), absl::Seconds(60));
  if (!sum.ok()) return Fail("task: " + sum.status().ToString());
  if (**sum != int64_t{70} << 20) return Fail("task saw different bytes");
  auto a = manta::Actor(Recorder::Create).Remote(0);
  auto back = manta::TryGet(a.Task(&Recorder::EchoBytes).Remote(data), absl::Seconds(60));
  if (!back.ok()) return Fail("actor call: " + back.status().ToString());
  if ((*back)->size() != data.size()) return Fail("actor call saw different bytes");
  std::cout << "OK 70 MiB by value sum=" << **sum << std::endl;
  return 0;
}

// Calls in flight when the actor's process dies are pushed again to its next
// incarnation, in order, and every call returns its own answer.
int CallsAcrossRestart() {
  auto r = manta::Actor(Recorder::Create).SetMaxRestarts(1).SetMaxTaskRetries(-1).Remote(5);
  const int pid = *manta::Get(r.Task(&Recorder::Pid).Remote());
  const int kCalls = 2000;
  std::vector<manta::ObjectRef<int>> refs;
  for (int i = 0; i < kCalls; ++i) {
    refs.push_back(r.Task(&Recorder::Append).Remote(i));
    if (i == kCalls / 2) kill(pid, SIGKILL);
  }
  for (int i = 0; i < kCalls; ++i) {
    auto v = manta::TryGet(refs[i], absl::Seconds(60));
    if (!v.ok()) return Fail("call " + std::to_string(i) + ": " + v.status().ToString());
    if (**v != i) return Fail("call " + std::to_string(i) + " answered " + std::to_string(**v));
  }
  if (*manta::Get(r.Task(&Recorder::Pid).Remote()) == pid) return Fail("the actor did not restart");
  if (!*manta::Get(r.Task(&Recorder::InOrder).Remote())) return Fail("the new incarnation ran calls out of order");
  const int rerun = *manta::Get(r.Task(&Recorder::Count).Remote());
  std::cout << "OK " << kCalls << " calls across a restart, in order; the new incarnation ran " << rerun << std::endl;
  return 0;
}

// An actor that starts once `marker` exists: calls made before wait in the
// caller and go out together once it is alive.
class SlowStarter {
 public:
  static SlowStarter* Create(std::string marker) {
    if (UntilFileExists(marker) != 1) throw std::runtime_error("the marker never came");
    return new SlowStarter();
  }
  std::vector<uint8_t> Echo(std::vector<uint8_t> data) { return data; }
};
MANTA_REMOTE(SlowStarter::Create, &SlowStarter::Echo);

// More actor calls waiting at once than one gRPC message can carry (each
// with an inline argument and result just under the inline limit): all come
// back, each with its own bytes.
int ManyInlineCalls(const std::string& marker) {
  auto a = manta::Actor(SlowStarter::Create).Remote(marker);
  const int kCalls = 1600;
  const size_t kBytes = 96 << 10;  // 150 MiB each way
  std::vector<manta::ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < kCalls; ++i) {
    refs.push_back(a.Task(&SlowStarter::Echo).Remote(std::vector<uint8_t>(kBytes, static_cast<uint8_t>(i))));
  }
  std::ofstream(marker) << "start";  // every call is queued: let the actor start
  for (int i = 0; i < kCalls; ++i) {
    auto back = manta::TryGet(refs[i], absl::Seconds(60));
    if (!back.ok()) return Fail("call " + std::to_string(i) + ": " + back.status().ToString());
    if ((*back)->size() != kBytes || (**back)[kBytes - 1] != static_cast<uint8_t>(i)) {
      return Fail("call " + std::to_string(i) + " came back with other bytes");
    }
  }
  std::cout << "OK " << kCalls << " calls of 96 KiB each way" << std::endl;
  return 0;
}

// Actor calls whose arguments are still being computed keep their place:
// the first call to a fresh actor waits on a slow task, and the calls made
// after it run after it. A call whose argument failed fails alone, and the
// calls after it still run.
int CallsWaitingOnArguments() {
  auto a = manta::Actor(Recorder::Create).Remote(0);
  std::vector<manta::ObjectRef<int>> refs;
  refs.push_back(a.Task(&Recorder::Append).Remote(manta::Task(Later).Remote(0, 500)));
  for (int i = 1; i < 5; ++i) refs.push_back(a.Task(&Recorder::Append).Remote(i));
  for (int i = 0; i < 5; ++i) {
    auto v = manta::TryGet(refs[static_cast<size_t>(i)], absl::Seconds(30));
    if (!v.ok()) return Fail("call " + std::to_string(i) + ": " + v.status().ToString());
    if (**v != i) return Fail("call " + std::to_string(i) + " returned " + std::to_string(**v));
  }
  if (!*manta::Get(a.Task(&Recorder::InOrder).Remote())) return Fail("calls ran before the call they followed");
  auto failed = a.Task(&Recorder::Append).Remote(manta::Task(Throws).Remote(1));
  auto after = a.Task(&Recorder::Append).Remote(5);
  auto f = manta::TryGet(failed, absl::Seconds(30));
  if (f.ok()) return Fail("a call with a failed argument succeeded");
  auto v = manta::TryGet(after, absl::Seconds(30));
  if (!v.ok()) return Fail("the call after a failed one: " + v.status().ToString());
  if (**v != 5) return Fail("the call after a failed one returned " + std::to_string(**v));
  std::cout << "OK calls kept their order around arguments; failed one: " << f.status().message() << std::endl;
  return 0;
}

// Whether `cond` holds before `timeout` passes (checked every 100 ms).
bool Eventually(const std::function<bool()>& cond, absl::Duration timeout) {
  for (auto deadline = absl::Now() + timeout;;) {
    if (cond()) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Whether the value of the ref whose wire form is `wire` is freed at its
// owner before `timeout` passes (asked from a task, which borrows it).
bool FreedWithin(const std::string& wire, absl::Duration timeout) {
  return Eventually([&] { return *manta::Get(manta::Task(ValueFreed).Remote(wire)); }, timeout);
}

// A value whose ref went inside an argument to an actor that keeps it
// lives while the actor does, after the caller dropped every ref of its
// own, and goes once the actor lets go.
int BorrowedRefs() {
  auto h = manta::Actor(Holder::Create).Remote();
  {
    auto ref = manta::Put(std::vector<uint8_t>(1 << 20, 5));
    if (*manta::Get(h.Task(&Holder::Keep).Remote(Holder::Refs{ref})) != 1) return Fail("Keep");
  }
  auto sum = manta::TryGet(h.Task(&Holder::SumKept).Remote(), absl::Seconds(30));
  if (!sum.ok()) return Fail("the borrowed value was freed: " + sum.status().ToString());
  if (**sum != int64_t{5} << 20) return Fail("the borrowed value changed");
  if (*manta::Get(h.Task(&Holder::Freed).Remote())) return Fail("freed while borrowed");
  manta::Get(h.Task(&Holder::Forget).Remote());
  if (!Eventually([&] { return *manta::Get(h.Task(&Holder::Freed).Remote()); }, absl::Seconds(20))) {
    return Fail("the value outlived its last borrower");
  }

  // A borrower that dies lets go too (its owner checks on it).
  auto h2 = manta::Actor(Holder::Create).Remote();
  std::string wire;
  {
    auto ref = manta::Put(std::vector<uint8_t>(1 << 20, 6));
    wire = *manta::Serialize(ref);
    if (*manta::Get(h2.Task(&Holder::Keep).Remote(Holder::Refs{ref})) != 1) return Fail("Keep 2");
  }
  if (*manta::Get(manta::Task(ValueFreed).Remote(wire))) return Fail("freed while borrowed by a live actor");
  manta::Kill(h2);
  if (!FreedWithin(wire, absl::Seconds(30))) return Fail("the value outlived its dead borrower");
  std::cout << "OK borrowed value kept, then freed sum=" << **sum << std::endl;
  return 0;
}

// Refs an actor returns inside a value, to values it owns, stay good while
// the caller holds the returned object (or refs from it), and go after.
int ReturnedRefs() {
  auto h = manta::Actor(Holder::Create).Remote();
  auto outer = h.Task(&Holder::Make).Remote(2);
  std::string wire;
  {
    auto refs = manta::TryGet(outer, absl::Seconds(30));
    if (!refs.ok() || (*refs)->size() != 2) return Fail("Make");
    for (auto& r : **refs) {
      auto v = manta::TryGet(r, absl::Seconds(30));
      if (!v.ok()) return Fail("a returned ref: " + v.status().ToString());
      if (std::accumulate((*v)->begin(), (*v)->end(), int64_t{0}) != int64_t{7} << 20) return Fail("bytes");
    }
    wire = *manta::Serialize((**refs)[0]);
  }
  // Only the returned object holds them now.
  if (*manta::Get(manta::Task(ValueFreed).Remote(wire))) return Fail("freed while the outer object lives");
  outer = manta::ObjectRef<Holder::Refs>();
  if (!FreedWithin(wire, absl::Seconds(20))) return Fail("returned values outlived every ref");

  // The same ref returned three times is held three times, and let go.
  auto same = h.Task(&Holder::MakeSame).Remote(3);
  {
    auto refs = manta::TryGet(same, absl::Seconds(30));
    if (!refs.ok() || (*refs)->size() != 3) return Fail("MakeSame");
    wire = *manta::Serialize((**refs)[0]);
  }
  same = manta::ObjectRef<Holder::Refs>();
  if (!FreedWithin(wire, absl::Seconds(20))) return Fail("a ref returned several times outlived every ref");

  // A value stored with Put holds the refs inside it.
  auto inner = manta::Put(std::vector<uint8_t>(1 << 20, 9));
  wire = *manta::Serialize(inner);
  auto outer_put = manta::Put(Holder::Refs{inner});
  inner = manta::ObjectRef<std::vector<uint8_t>>();
  if (*manta::Get(manta::Task(ValueFreed).Remote(wire))) return Fail("freed while a put value holds it");
  outer_put = manta::ObjectRef<Holder::Refs>();
  if (!FreedWithin(wire, absl::Seconds(20))) return Fail("a value inside a put value outlived it");
  std::cout << "OK returned refs kept, then freed" << std::endl;
  return 0;
}

int RetryAfterWorkerDeath(const std::string& marker) {
  int v = *manta::Get(manta::Task(DieOnce).Remote(marker, 7));
  if (v != 70) return Fail("wrong value after retry: " + std::to_string(v));
  std::cout << "OK retried after worker death value=" << v << std::endl;
  return 0;
}

int ActorRestart() {
  auto r = manta::Actor(Recorder::Create).SetMaxRestarts(1).SetMaxTaskRetries(-1).Remote(42);
  int pid = *manta::Get(r.Task(&Recorder::Pid).Remote());
  std::cout << "PID " << pid << std::endl;
  kill(pid, SIGKILL);
  // The constructor reruns in a new process: the tag is back, the state is new.
  int tag = *manta::Get(r.Task(&Recorder::Tag).Remote());
  int new_pid = *manta::Get(r.Task(&Recorder::Pid).Remote());
  if (tag != 42 || new_pid == pid) return Fail("the actor did not come back in a new process");
  std::cout << "OK restarted pid=" << new_pid << std::endl;
  int new_new = new_pid;
  kill(new_new, SIGKILL);
  try {
    manta::Get(r.Task(&Recorder::Pid).Remote());
    return Fail("a call succeeded on an actor out of restarts");
  } catch (const manta::ActorDiedError& e) {
    std::cout << "OK actor died after its restarts: " << e.what() << std::endl;
  }
  return 0;
}

int Spillback() {
  // Only another node has "special": the local raylet must send us there.
  std::vector<manta::ObjectRef<std::string>> refs;
  for (int i = 0; i < 4; ++i) {
    refs.push_back(manta::Task(NodeName).SetResources({{"CPU", 1}, {"special", 1}}).Remote());
  }
  for (auto& r : refs) std::cout << "RAN " << *manta::Get(r) << std::endl;
  return 0;
}

int RerunElsewhere(const std::string& dir) {
  auto ref = manta::Task(SlowNodeName).SetResources({{"CPU", 1}, {"special", 1}}).Remote(dir);
  std::cout << "RAN " << *manta::Get(ref) << std::endl;
  return 0;
}

int ThreadedActor() {
  auto m = manta::Actor(Meeting::Create).SetMaxConcurrency(4).Remote();
  std::vector<manta::ObjectRef<bool>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(m.Task(&Meeting::Rendezvous).Remote(4));
  for (auto& r : refs) {
    if (!*manta::Get(r)) return Fail("calls did not run concurrently");
  }
  std::cout << "OK 4 calls met inside a threaded actor" << std::endl;
  return 0;
}

// Creates a named detached actor and exits; a later driver finds it.
int DetachedCreate() {
  auto r = manta::Actor(Recorder::Create).SetName("keeper").SetNamespace("tests").SetDetached().Remote(7);
  manta::Get(r.Task(&Recorder::Append).Remote(1));
  auto owned = manta::Actor(Recorder::Create).SetName("owned").SetNamespace("tests").Remote(8);
  manta::Get(owned.Task(&Recorder::Append).Remote(1));
  std::cout << "OK created" << std::endl;
  return 0;
}

int DetachedUse() {
  auto keeper = manta::GetActor<Recorder>("keeper", "tests");
  if (!keeper) return Fail("the detached actor is gone with its job");
  int tag = *manta::Get(keeper->Task(&Recorder::Tag).Remote());
  if (tag != 7) return Fail("wrong detached actor");
  // The job that owned "owned" has finished: its name is freed once the
  // GCS has killed it (polled with a deadline).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (manta::GetActor<Recorder>("owned", "tests")) {
    if (std::chrono::steady_clock::now() > deadline) return Fail("a non-detached actor outlived its job");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  manta::Kill(*keeper);
  std::cout << "OK detached actor outlived its job; the owned one did not" << std::endl;
  return 0;
}

int Infeasible() {
  auto ref = manta::Task(Square).SetResources({{"CPU", 1000}}).Remote(3);
  auto v = manta::TryGet(ref, absl::Seconds(2));
  if (v.ok()) return Fail("an infeasible task ran");
  std::cout << "OK pending: " << v.status().message() << std::endl;
  // Keep the demand visible while the test reads `manta status`; the test
  // kills this driver.
  std::cout << "WAITING" << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}

int TypedErrors() {
  try {
    manta::Get(manta::Task(Throws).Remote(5));
    return Fail("no error raised");
  } catch (const manta::ApplicationError& e) {
    std::string what = e.what();
    if (what.find("x was 5") == std::string::npos) return Fail("message lost: " + what);
    std::cout << "OK application error: " << what << std::endl;
  }
  if (*manta::Get(manta::Task(Throws).Remote(0)) != 0) return Fail("the worker is broken after an error");
  return 0;
}

// What `manta list tasks` shows: tasks and actor calls that finished, one
// that failed, and one still running until the test creates `marker`.
int ListedTasks(const std::string& marker) {
  for (int i = 1; i <= 3; ++i) {
    if (*manta::Get(manta::Task(Square).Remote(i)) != i * i) return Fail("wrong square");
  }
  auto recorder = manta::Actor(Recorder::Create).Remote(7);
  for (int i = 0; i < 3; ++i) manta::Get(recorder.Task(&Recorder::Append).Remote(i));
  // A task owned by a worker, not by this driver.
  std::cout << "NESTED PID " << *manta::Get(manta::Task(NestedPid).Remote()) << std::endl;
  try {
    manta::Get(manta::Task(Throws).Remote(1));
    return Fail("no error raised");
  } catch (const manta::ApplicationError&) {
  }
  if (*manta::Get(manta::Task(UntilFileExists).Remote(marker)) != 1) return Fail("the marker never came");
  std::cout << "OK listed tasks ran" << std::endl;
  return 0;
}

// A task's output, written just before its result, is all printed by the
// driver even though the driver exits as soon as it has the result.
int LateOutput() {
  const int n = *manta::Get(manta::Task(Chatty).Remote(20000));
  // One write: worker lines are still being printed from another thread.
  std::cout << ("OK chatty returned " + std::to_string(n) + "\n") << std::flush;
  return 0;
}

// Holds `n` actors alive until `marker` exists (at most two minutes), so a
// test can count them from outside; prints "READY <n>" once all answer.
int HeldActors(int n, const std::string& marker) {
  std::vector<manta::ActorHandle<Recorder>> held;
  for (int i = 0; i < n; ++i) held.push_back(manta::Actor(Recorder::Create).Remote(i));
  for (auto& actor : held) manta::Get(actor.Task(&Recorder::Pid).Remote());
  // Each actor runs a call until told to end: tasks RUNNING the whole time.
  std::vector<manta::ObjectRef<bool>> running;
  for (auto& actor : held) running.push_back(actor.Task(&Recorder::RunUntil).Remote(marker));
  std::cout << "READY " << n << std::endl;
  for (auto& r : running) {
    if (!manta::Get(r)) return Fail("never told to end");
  }
  std::cout << "OK held actors" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  std::string scenario = argc > 1 ? argv[1] : "";
  const std::map<std::string, std::function<int()>> scenarios = {
      {"ordered_calls", OrderedCalls},
      {"big_object", BigObject},
      {"calls_waiting_on_arguments", CallsWaitingOnArguments},
      {"huge_by_value", HugeByValueArgument},
      {"many_inline_calls", [&] { return ManyInlineCalls(argc > 2 ? argv[2] : "/tmp/manta-slow-starter"); }},
      {"calls_across_restart", CallsAcrossRestart},
      {"borrowed_refs", BorrowedRefs},
      {"returned_refs", ReturnedRefs},
      {"dropped_argument", DroppedArgument},
      {"retry_after_worker_death", [&] { return RetryAfterWorkerDeath(argc > 2 ? argv[2] : "/tmp/manta-die-once"); }},
      {"actor_restart", ActorRestart},
      {"spillback", Spillback},
      {"rerun_elsewhere", [&] { return RerunElsewhere(argc > 2 ? argv[2] : "/tmp"); }},
      {"threaded_actor", ThreadedActor},
      {"detached_create", DetachedCreate},
      {"detached_use", DetachedUse},
      {"infeasible", Infeasible},
      {"typed_errors", TypedErrors},
      {"late_output", LateOutput},
      {"held_actors", [&] { return HeldActors(argc > 2 ? std::atoi(argv[2]) : 1, argc > 3 ? argv[3] : "/tmp/go"); }},
      {"listed_tasks", [&] { return ListedTasks(argc > 2 ? argv[2] : "/tmp/manta-listed-tasks"); }},
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
