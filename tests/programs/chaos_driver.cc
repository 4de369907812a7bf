// The workload of the chaos run (tests/chaos_test.cc): tasks with unlimited
// retries and actors receiving numbered calls, while the test kills and
// replaces raylets under it. It checks every result itself and prints one
// line, "RESULT {json}", then exits 0 (or 2 for bad arguments).
//
//   chaos_driver TASKS ACTORS CALLS_PER_ACTOR TASK_MS CALL_MS
//
// Actors need the "chaos_actor" resource, which only the raylets the test
// kills have. Even-numbered actors retry their calls across restarts
// (max_task_retries -1): every call must succeed. Odd-numbered ones do not
// (0): a call may fail, but only with a typed error. On both, the calls that
// succeed must have run in order: within one incarnation of the actor each
// call saw the previous successful one as its predecessor, and a new
// incarnation starts from nothing.
#include <manta/api.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t ChaosTask(int64_t i, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return i * 7 + 3;
}
MANTA_REMOTE(ChaosTask);

// Remembers the last call it ran; a restart starts it afresh.
class Sequence {
 public:
  static Sequence* Create() { return new Sequence(); }
  // {pid, the sequence number of the call before this one (-1: none), seq}.
  std::vector<int64_t> Call(int64_t seq, int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::vector<int64_t> out{getpid(), last_, seq};
    last_ = seq;
    return out;
  }

 private:
  int64_t last_ = -1;
};
MANTA_REMOTE(Sequence::Create, &Sequence::Call);

std::string TypeName(manta::ErrorType t) {
  switch (t) {
    case manta::ErrorType::kApplicationError:
      return "ApplicationError";
    case manta::ErrorType::kWorkerDied:
      return "WorkerDiedError";
    case manta::ErrorType::kActorDied:
      return "ActorDiedError";
    case manta::ErrorType::kOwnerDied:
      return "OwnerDiedError";
    case manta::ErrorType::kInfeasible:
      return "InfeasibleError";
    case manta::ErrorType::kObjectLost:
      return "ObjectLostError";
    case manta::ErrorType::kTaskCancelled:
      return "TaskCancelledError";
    case manta::ErrorType::kNodeDied:
      return "NodeDiedError";
    case manta::ErrorType::kTimeout:
      return "GetTimeoutError";
    default:
      return "untyped";
  }
}

struct Counts {
  int64_t ok = 0, wrong = 0, lost = 0, out_of_order = 0;
  std::map<std::string, int64_t> errors;  // by type
  std::string Json() const {
    std::string e = "{";
    for (const auto& [k, v] : errors) e += (e.size() > 1 ? "," : "") + ("\"" + k + "\":" + std::to_string(v));
    e += "}";
    return "{\"ok\":" + std::to_string(ok) + ",\"wrong\":" + std::to_string(wrong) +
           ",\"lost\":" + std::to_string(lost) + ",\"out_of_order\":" + std::to_string(out_of_order) +
           ",\"errors\":" + e + "}";
  }
};

// A failed Get: a deadline is a lost result, anything else counts by type.
void CountFailure(const absl::Status& s, Counts* c) {
  manta::ErrorType t = manta::ErrorTypeOf(s);
  if (t == manta::ErrorType::kTimeout) {
    ++c->lost;
    return;
  }
  ++c->errors[TypeName(t)];
}

constexpr absl::Duration kResultDeadline = absl::Minutes(5);

Counts CollectTasks(const std::vector<manta::ObjectRef<int64_t>>& refs) {
  Counts c;
  for (size_t i = 0; i < refs.size(); ++i) {
    auto v = manta::TryGet(refs[i], kResultDeadline);
    if (!v.ok()) {
      CountFailure(v.status(), &c);
    } else if (**v != static_cast<int64_t>(i) * 7 + 3) {
      ++c.wrong;
    } else {
      ++c.ok;
    }
  }
  return c;
}

// One actor's calls, in submission order.
void CollectCalls(const std::vector<manta::ObjectRef<std::vector<int64_t>>>& refs, Counts* c) {
  int64_t pid = 0, prev = -1;
  for (size_t seq = 0; seq < refs.size(); ++seq) {
    auto v = manta::TryGet(refs[seq], kResultDeadline);
    if (!v.ok()) {
      CountFailure(v.status(), c);
      continue;
    }
    const std::vector<int64_t>& r = **v;
    if (r.size() != 3 || r[2] != static_cast<int64_t>(seq)) {
      ++c->wrong;
      continue;
    }
    // Same incarnation: its predecessor is the previous success. A new one:
    // nothing ran on it before.
    const int64_t expected_prev = r[0] == pid ? prev : -1;
    if (r[1] != expected_prev) ++c->out_of_order;
    pid = r[0];
    prev = r[2];
    ++c->ok;
  }
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  if (argc != 6) {
    std::cerr << "usage: chaos_driver TASKS ACTORS CALLS_PER_ACTOR TASK_MS CALL_MS" << std::endl;
    return 2;
  }
  const int tasks = std::atoi(argv[1]), actors = std::atoi(argv[2]), calls = std::atoi(argv[3]);
  const int task_ms = std::atoi(argv[4]), call_ms = std::atoi(argv[5]);
  if (tasks < 0 || actors < 0 || calls < 0 || task_ms < 0 || call_ms < 0) {
    std::cerr << "chaos_driver: counts must not be negative" << std::endl;
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<manta::ActorHandle<Sequence>> handles;
  for (int a = 0; a < actors; ++a) {
    handles.push_back(manta::Actor(Sequence::Create)
                          .SetResources({{"chaos_actor", 1}})
                          .SetMaxRestarts(-1)
                          .SetMaxTaskRetries(a % 2 == 0 ? -1 : 0)
                          .Remote());
  }
  std::cout << "READY" << std::endl;
  std::vector<manta::ObjectRef<int64_t>> task_refs;
  task_refs.reserve(tasks);
  std::vector<std::vector<manta::ObjectRef<std::vector<int64_t>>>> call_refs(actors);
  // Tasks and calls interleave, so both are in flight throughout the run.
  const int rounds = std::max(1, calls);
  for (int round = 0; round < rounds; ++round) {
    for (int i = tasks * round / rounds; i < tasks * (round + 1) / rounds; ++i) {
      task_refs.push_back(manta::Task(ChaosTask).SetMaxRetries(-1).Remote(static_cast<int64_t>(i), task_ms));
    }
    if (round >= calls) continue;
    for (int a = 0; a < actors; ++a) {
      call_refs[a].push_back(handles[a].Task(&Sequence::Call).Remote(static_cast<int64_t>(round), call_ms));
    }
  }
  Counts task_counts = CollectTasks(task_refs);
  Counts retried, unretried;
  for (int a = 0; a < actors; ++a) CollectCalls(call_refs[a], a % 2 == 0 ? &retried : &unretried);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "RESULT {\"tasks\":" << tasks << ",\"actors\":" << actors << ",\"calls_per_actor\":" << calls
            << ",\"seconds\":" << seconds << ",\"task_results\":" << task_counts.Json()
            << ",\"retried_actor_calls\":" << retried.Json() << ",\"unretried_actor_calls\":" << unretried.Json() << "}"
            << std::endl;
  // As every driver ends: the job finishes now, not when the GCS notices the
  // driver is gone, so what follows measures the cluster's recovery alone.
  manta::Shutdown();
  return 0;
}
