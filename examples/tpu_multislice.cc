// Multislice: reserve whole TPU slices and start one actor per host across
// them, as a JAX multislice job runs one process per host. Each actor gets
// the TPU_* and MEGASCALE_* variables JAX reads, and reports what it would
// see: with MEGASCALE_NUM_SLICES set, JAX's global device count spans every
// slice (2 x v6e-16 = 32 devices); on a single slice, that slice's (16).
//
//   manta start --head
//   for s in 0 1; do for w in 0 1 2 3; do
//     TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=$w TPU_NAME=tpu-group-$s manta start --address=127.0.0.1:6379
//   done; done
//   build/bin/example_tpu_multislice [--slices=N | N]    # default 2 slices
#include <manta/api.h>
#include <manta/tpu.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

int CountList(const std::string& list, char sep) {
  if (list.empty()) return 0;
  int n = 1;
  for (char c : list) n += c == sep;
  return n;
}

// One process per TPU host, as JAX runs.
class HostProcess {
 public:
  static HostProcess* Create() { return new HostProcess(); }

  // The devices JAX would report: this host's chips times the slice's hosts,
  // times the slices when MEGASCALE_NUM_SLICES says there are several.
  int GlobalDevices() {
    int chips_in_slice = 1;
    std::stringstream dims(Env("TPU_TOPOLOGY"));
    for (std::string d; std::getline(dims, d, 'x');) chips_in_slice *= std::atoi(d.c_str());
    int hosts = CountList(Env("TPU_WORKER_HOSTNAMES"), ',');
    int chips_per_host = hosts > 0 ? chips_in_slice / hosts : 0;
    int slices = Env("MEGASCALE_NUM_SLICES").empty() ? 1 : std::atoi(Env("MEGASCALE_NUM_SLICES").c_str());
    return chips_per_host * hosts * slices;
  }

  std::string Report() {
    std::string visible = Env("TPU_VISIBLE_CHIPS");
    std::string slice_id = Env("MEGASCALE_SLICE_ID").empty() ? "0" : Env("MEGASCALE_SLICE_ID");
    std::string line = "slice " + slice_id + " (" + Env("TPU_NAME") + ") worker " + Env("TPU_WORKER_ID") + ": chips " +
                       (visible.empty() ? "all" : visible) + ", sees " + std::to_string(GlobalDevices()) +
                       " devices, node " + Env("MANTA_NODE_ID").substr(0, 8) + " pid " + std::to_string(getpid());
    if (!Env("MEGASCALE_COORDINATOR_ADDRESS").empty()) {
      line += ", coordinator " + Env("MEGASCALE_COORDINATOR_ADDRESS") + ":" + Env("MEGASCALE_PORT");
    }
    return line;
  }
};
MANTA_REMOTE(HostProcess::Create, &HostProcess::GlobalDevices, &HostProcess::Report);

// One write per line: worker output is printed by another thread.
void Print(const std::string& line) { std::cout << line + "\n" << std::flush; }

int ParseSlices(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--slices=", 0) == 0) return std::atoi(a.c_str() + 9);
    if (!a.empty() && a[0] != '-') return std::atoi(a.c_str());
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // No cluster (or a refused token) is one line and exit status 1.
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << argv[0] << ": " << s.message() << "\n";
    return 1;
  }
  const int num_slices = ParseSlices(argc, argv);
  manta::tpu::SliceReservation slices;
  try {
    manta::tpu::SliceOptions options;
    options.topology = "4x4";
    options.accelerator_version = "v6e";
    options.num_slices = num_slices;
    slices = manta::tpu::ReserveSlices(options);
    Print("reserved " + std::to_string(slices.num_slices()) + " x " + slices.slices()[0].pod_type + ":");
    for (const auto& s : slices.slices()) Print("  " + s.name + " head " + s.head_ip);

    std::vector<manta::ActorHandle<HostProcess>> hosts = manta::tpu::ActorsOnSlices(slices, HostProcess::Create);
    std::vector<manta::ObjectRef<std::string>> reports;
    std::vector<manta::ObjectRef<int>> devices;
    for (auto& h : hosts) {
      reports.push_back(h.Task(&HostProcess::Report).Remote());
      devices.push_back(h.Task(&HostProcess::GlobalDevices).Remote());
    }
    for (auto& r : reports) Print(*manta::Get(r));
    int total = -1;
    for (auto& d : devices) {
      int n = *manta::Get(d);
      if (total >= 0 && n != total) throw manta::Error(absl::InternalError("hosts disagree on the device count"));
      total = n;
    }
    Print(std::to_string(total) + " devices across " + std::to_string(slices.num_slices()) +
          (slices.num_slices() == 1 ? " slice" : " slices"));
    slices.Release();  // the actors die with their bundles
  } catch (const manta::Error& e) {
    std::cerr << "example_tpu_multislice: " << e.what() << "\n";
    try {
      slices.Release();
    } catch (const manta::Error&) {
    }
    manta::Shutdown();
    return 1;
  }
  manta::Shutdown();
  return 0;
}
