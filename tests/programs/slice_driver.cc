// A driver for the placement group and TPU slice integration tests. Runs
// against the cluster in MANTA_ADDRESS / MANTA_TOKEN, prints what the test
// checks and exits 0, or prints "FAIL ..." and exits 1.
//
//   slice_driver race ROUNDS     reserve and release one v6e-16 slice ROUNDS
//                                times; "HOLD <slice> <from_ns> <to_ns>" each
//   slice_driver reserve_one     reserve one slice, run a task per host:
//                                "SLICE <name>" and "HOST <worker> <chips> <megascale>"
//   slice_driver group_tasks     tasks and an actor in a group's bundles, then
//                                the group removed under the actor
#include <manta/api.h>
#include <manta/placement_group.h>
#include <manta/tpu.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <thread>
#include <string>
#include <vector>

namespace {

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  manta::Shutdown();
  return 1;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "-" : (*v == '\0' ? "-" : v);
}

// What a process on a TPU host sees.
std::string Describe() {
  return Env("TPU_WORKER_ID") + " " + Env("TPU_VISIBLE_CHIPS") + " " + Env("MEGASCALE_NUM_SLICES") + " " +
         Env("TPU_NAME");
}

class Holder {
 public:
  static Holder* Create() { return new Holder(); }
  std::string Chips() { return Env("TPU_VISIBLE_CHIPS"); }
};

MANTA_REMOTE(Describe, Holder::Create, &Holder::Chips);

manta::tpu::SliceOptions OneSlice() {
  manta::tpu::SliceOptions o;
  o.topology = "4x4";
  o.accelerator_version = "v6e";
  o.num_slices = 1;
  o.timeout = absl::Seconds(60);
  return o;
}

int Race(int rounds) {
  for (int i = 0; i < rounds; ++i) {
    manta::tpu::SliceReservation r = manta::tpu::ReserveSlices(OneSlice());
    // Used from when the reservation is ready until Release is called.
    int64_t from = MonotonicNs();
    std::string name = r.slices().at(0).name;
    std::string hosts;
    for (auto& ref : manta::tpu::RunOnSlices(r, Describe)) hosts += *manta::Get(ref) + ";";
    int64_t to = MonotonicNs();
    r.Release();
    std::cout << "HOLD " << name << " " << from << " " << to << " " << hosts << "\n";
  }
  std::cout << "OK race" << std::endl;
  return 0;
}

int ReserveOne() {
  manta::tpu::SliceReservation r = manta::tpu::ReserveSlices(OneSlice());
  std::cout << "SLICE " << r.slices().at(0).name << "\n";
  for (auto& ref : manta::tpu::RunOnSlices(r, Describe)) std::cout << "HOST " << *manta::Get(ref) << "\n";
  r.Release();
  std::cout << "OK reserve_one" << std::endl;
  return 0;
}

// Both slices held, and given back from another thread after `hold`: a
// reservation of one slice waits longer than one GCS call's timeout (10 s).
int WaitLong(absl::Duration hold) {
  manta::tpu::SliceOptions both = OneSlice();
  both.num_slices = 2;
  manta::tpu::SliceReservation held = manta::tpu::ReserveSlices(both);
  std::thread release([&] {
    absl::SleepFor(hold);  // the workload: a holder that keeps its slices this long
    held.Release();
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<manta::tpu::SliceReservation> r = manta::tpu::TryReserveSlices(OneSlice());
  const double waited = absl::ToDoubleSeconds(absl::Now() - start);
  release.join();
  if (!r.ok()) return Fail("the waiting reservation failed: " + r.status().ToString());
  std::cout << "WAITED " << waited << " " << r->slices().at(0).name << "\n";
  r->Release();
  std::cout << "OK wait_long" << std::endl;
  return 0;
}

int GroupTasks() {
  manta::PlacementGroupOptions o;
  o.strategy = manta::PlacementStrategy::kStrictSpread;
  for (int i = 0; i < 4; ++i) o.bundles.push_back({{{"TPU", 4}}, {{"manta.io/tpu-slice-name", "tpu-group-0"}}});
  manta::PlacementGroup pg = manta::CreatePlacementGroup(o);
  if (!pg.Wait(absl::Seconds(30))) return Fail("the group was not ready: " + pg.StateMessage());
  // One task per bundle, each holding its host's four chips.
  std::vector<manta::ObjectRef<std::string>> refs;
  for (int b = 0; b < 4; ++b) {
    refs.push_back(manta::Task(Describe).SetResources({{"TPU", 4}}).SetPlacementGroup(pg, b).Remote());
  }
  for (auto& r : refs) std::cout << "TASK " << *manta::Get(r) << "\n";
  // An actor holding two chips of bundle 1, then the group removed under it.
  auto actor = manta::Actor(Holder::Create).SetResources({{"TPU", 2}}).SetPlacementGroup(pg, 1).Remote();
  std::cout << "ACTOR " << *manta::Get(actor.Task(&Holder::Chips).Remote()) << "\n";
  manta::RemovePlacementGroup(pg);
  if (pg.State() != manta::PlacementGroupState::kRemoved) return Fail("the group is not REMOVED");
  try {
    manta::Get(actor.Task(&Holder::Chips).Remote());
    return Fail("the actor outlived its group");
  } catch (const manta::ActorDiedError& e) {
    std::cout << "OK actor died: " << e.what() << "\n";
  }
  // A task for the removed group fails with a clear error, not a hang.
  try {
    manta::Get(manta::Task(Describe).SetResources({{"TPU", 4}}).SetPlacementGroup(pg, 0).Remote());
    return Fail("a task ran in a removed group");
  } catch (const std::exception& e) {
    std::cout << "OK removed group: " << e.what() << "\n";
  }
  std::cout << "OK group_tasks" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  if (argc < 2) return Fail("usage: slice_driver race ROUNDS | reserve_one | wait_long | group_tasks");
  std::string mode = argv[1];
  int rc = 1;
  try {
    if (mode == "race" && argc > 2) {
      rc = Race(std::atoi(argv[2]));
    } else if (mode == "reserve_one") {
      rc = ReserveOne();
    } else if (mode == "wait_long") {
      rc = WaitLong(absl::Seconds(12));
    } else if (mode == "group_tasks") {
      rc = GroupTasks();
    } else {
      return Fail("unknown mode " + mode);
    }
  } catch (const std::exception& e) {
    return Fail(std::string("exception: ") + e.what());
  }
  manta::Shutdown();
  return rc;
}
