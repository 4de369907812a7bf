// Device-centric mode: 16 tasks of one chip each on a v6e-16 slice; each
// task sees only its chip through TPU_VISIBLE_CHIPS, and every chip id of
// every host is used once.
#include <manta/api.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Where the 16 tasks meet: each holds its chip until all 16 hold theirs, so
// every chip of every host is in use at once, however slowly workers start.
class Meeting {
 public:
  static Meeting* Create() { return new Meeting(); }
  int Arrive() { return ++arrived_; }
  int Arrived() { return arrived_; }

 private:
  int arrived_ = 0;
};
MANTA_REMOTE(Meeting::Create, &Meeting::Arrive, &Meeting::Arrived);

// Reports the chip it holds once all `expected` tasks hold theirs.
std::string OneChip(manta::ActorHandle<Meeting> meeting, int expected) {
  int arrived = *manta::Get(meeting.Task(&Meeting::Arrive).Remote());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (arrived < expected && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    arrived = *manta::Get(meeting.Task(&Meeting::Arrived).Remote());
  }
  return "worker=" + Env("TPU_WORKER_ID") + " TPU_VISIBLE_CHIPS=" + Env("TPU_VISIBLE_CHIPS") +
         " TPU_CHIPS_PER_HOST_BOUNDS=" + Env("TPU_CHIPS_PER_HOST_BOUNDS") +
         (arrived < expected ? " (not all chips were held at once)" : "");
}
MANTA_REMOTE(OneChip);

}  // namespace

int main(int argc, char** argv) {
  // No cluster (or a refused token) is one line and exit status 1.
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << argv[0] << ": " << s.message() << "\n";
    return 1;
  }
  auto meeting = manta::Actor(Meeting::Create).Remote();
  std::vector<manta::ObjectRef<std::string>> chips;
  for (int host = 0; host < 4; ++host) {
    for (int chip = 0; chip < 4; ++chip) {
      chips.push_back(manta::Task(OneChip)
                          .SetResources({{"TPU", 1}})
                          .SetLabelSelector({{"manta.io/tpu-worker-id", std::to_string(host)}})
                          .Remote(meeting, 16));
    }
  }
  for (auto& c : chips) std::cout << *manta::Get(c) + "\n" << std::flush;
  manta::Kill(meeting);
  manta::Shutdown();
  return 0;
}
