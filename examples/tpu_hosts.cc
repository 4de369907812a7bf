// One task per host of a v6e-16 slice (4 hosts), each holding all 4 chips
// of its host: host-centric mode, as a JAX program runs one process per host.
//
//   manta start --head
//   for w in 0 1 2 3; do
//     TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=$w TPU_NAME=tpu-group-0 manta start --address=127.0.0.1:6379
//   done
//   build/bin/example_tpu_hosts [SLICE_NAME]    # default tpu-group-0
#include <manta/api.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// What a host-centric process sees: its slice, its worker id, its chips.
std::string DescribeHost() {
  std::string chips = Env("TPU_VISIBLE_CHIPS");
  return "slice=" + Env("TPU_NAME") + " worker=" + Env("TPU_WORKER_ID") + " chips=" + (chips.empty() ? "all" : chips) +
         " pid=" + std::to_string(getpid());
}
MANTA_REMOTE(DescribeHost);

}  // namespace

int main(int argc, char** argv) {
  // No cluster (or a refused token) is one line and exit status 1.
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << argv[0] << ": " << s.message() << "\n";
    return 1;
  }
  std::string slice = argc > 1 ? argv[1] : "tpu-group-0";
  std::vector<manta::ObjectRef<std::string>> hosts;
  for (int worker = 0; worker < 4; ++worker) {
    hosts.push_back(
        manta::Task(DescribeHost)
            .SetResources({{"TPU", 4}})
            .SetLabelSelector({{"manta.io/tpu-slice-name", slice}, {"manta.io/tpu-worker-id", std::to_string(worker)}})
            .Remote());
  }
  for (auto& h : hosts) std::cout << *manta::Get(h) + "\n" << std::flush;
  manta::Shutdown();
  return 0;
}
