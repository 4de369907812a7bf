// A placement group: N bundles of one CPU each, one per node
// (STRICT_SPREAD), a task in each bundle printing where it runs, then the
// group removed.
//
//   manta start --head && manta start --address=127.0.0.1:6379   # two nodes
//   build/bin/example_placement_group [BUNDLES]                   # default 2
#include <manta/api.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Where the task runs: its raylet (one per node) and process.
std::string WhereAmI(int bundle) {
  return "bundle " + std::to_string(bundle) + " runs on node " + Env("MANTA_RAYLET_ADDRESS") + " (pid " +
         std::to_string(getpid()) + ")";
}
MANTA_REMOTE(WhereAmI);

void Print(const std::string& line) { std::cout << line + "\n" << std::flush; }

}  // namespace

int main(int argc, char** argv) {
  // No cluster (or a refused token) is one line and exit status 1.
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << argv[0] << ": " << s.message() << "\n";
    return 1;
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  manta::PlacementGroupOptions options;
  options.strategy = manta::PlacementStrategy::kStrictSpread;
  for (int i = 0; i < n; ++i) {
    manta::BundleSpec bundle;
    bundle.resources = {{"CPU", 1}};
    options.bundles.push_back(bundle);
  }
  manta::PlacementGroup pg = manta::CreatePlacementGroup(options);
  if (!pg.Wait(absl::Seconds(30))) {
    std::cerr << "the group is not ready after 30 s: " << pg.StateMessage() << "\n";
    manta::RemovePlacementGroup(pg);
    manta::Shutdown();
    return 1;
  }
  for (const manta::BundleLocation& b : pg.Bundles()) {
    Print("bundle " + std::to_string(b.index) + " reserved on node " + b.node_id.substr(0, 8) + " (" + b.node_ip + ")");
  }
  std::vector<manta::ObjectRef<std::string>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(manta::Task(WhereAmI).SetPlacementGroup(pg, i).Remote(i));
  for (auto& r : refs) Print(*manta::Get(r));
  manta::RemovePlacementGroup(pg);
  Print("removed the group");
  manta::Shutdown();
  return 0;
}
