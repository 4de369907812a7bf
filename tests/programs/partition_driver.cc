// A driver for the network partition tests (tests/partition_test.cc). The
// hosts that may hold the partition's work have the "part" resource.
//
//   partition_driver place NAME
//     A detached placement group "NAME-pg" of one bundle {part: 1} and, in
//     it, a detached actor NAME (unlimited restarts) holding that bundle.
//     Prints "PLACED <bundle node id> <actor node id> <actor pid>".
//
//   partition_driver where NAME
//     Asks actor NAME where it runs and where the group's bundle is; prints
//     "AT <bundle node id> <actor node id> <actor pid>".
//
//   partition_driver remove NAME
//     Kills actor NAME and removes its group; prints "REMOVED".
//
//   partition_driver tasks N [RESOURCE]
//     Runs N short tasks at once, each needing one RESOURCE if given (so
//     they run only on the hosts that have it); prints "DONE <node id>=<count>
//     ..." once every result has arrived.
//
// Exits 0, or prints "FAIL ..." and exits 1.
#include <manta/api.h>
#include <manta/state.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

class Holder {
 public:
  static Holder* Create() { return new Holder(); }
  std::string Where() { return manta::GetRuntimeContext().node_id + " " + std::to_string(getpid()); }
};

std::string NodeOf(int i) {
  usleep(static_cast<useconds_t>(1000 * (i % 5)));
  return manta::GetRuntimeContext().node_id;
}

MANTA_REMOTE(Holder::Create, &Holder::Where, NodeOf);

constexpr absl::Duration kCallTimeout = absl::Seconds(60);
// Each run is a new job: the names live in one shared namespace.
constexpr char kNamespace[] = "partition";

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  return 1;
}

std::string GroupName(const std::string& name) { return name + "-pg"; }

// "<bundle node> <actor node> <actor pid>", or an error.
absl::StatusOr<std::string> Locate(const std::string& name) {
  auto actor = manta::GetActor<Holder>(name, kNamespace);
  if (!actor) return absl::NotFoundError("no actor " + name);
  auto pg = manta::TryGetPlacementGroup(GroupName(name), kNamespace);
  if (!pg.ok()) return pg.status();
  if (!pg->Wait(kCallTimeout)) return absl::DeadlineExceededError("group not created: " + pg->StateMessage());
  auto where = manta::TryGet(actor->Task(&Holder::Where).Remote(), kCallTimeout);
  if (!where.ok()) return where.status();
  std::vector<manta::BundleLocation> bundles = pg->Bundles();
  if (bundles.size() != 1) return absl::InternalError("the group has " + std::to_string(bundles.size()) + " bundles");
  return bundles[0].node_id + " " + **where;
}

int Place(const std::string& name) {
  manta::PlacementGroupOptions options;
  options.bundles = {{.resources = {{"part", 1}}}};
  options.name = GroupName(name);
  options.ray_namespace = kNamespace;
  options.detached = true;
  manta::PlacementGroup pg = manta::CreatePlacementGroup(options);
  if (!pg.Wait(kCallTimeout)) return Fail("the group is not created: " + pg.StateMessage());
  manta::Actor(Holder::Create)
      .SetName(name)
      .SetNamespace(kNamespace)
      .SetDetached()
      .SetMaxRestarts(-1)
      .SetPlacementGroup(pg, 0)
      .SetResources({{"part", 1}})
      .Remote();
  auto at = Locate(name);
  if (!at.ok()) return Fail(at.status().ToString());
  std::cout << "PLACED " << *at << std::endl;
  return 0;
}

int Where(const std::string& name) {
  auto at = Locate(name);
  if (!at.ok()) return Fail(at.status().ToString());
  std::cout << "AT " << *at << std::endl;
  return 0;
}

int Remove(const std::string& name) {
  if (auto actor = manta::GetActor<Holder>(name, kNamespace)) manta::Kill(*actor);
  auto pg = manta::TryGetPlacementGroup(GroupName(name), kNamespace);
  if (pg.ok()) manta::RemovePlacementGroup(*pg);
  std::cout << "REMOVED" << std::endl;
  return 0;
}

int Tasks(int n, const std::string& resource) {
  std::vector<manta::ObjectRef<std::string>> refs;
  for (int i = 0; i < n; ++i) {
    auto task = manta::Task(NodeOf).SetMaxRetries(3);
    if (!resource.empty()) task.SetResources({{resource, 1}});
    refs.push_back(task.Remote(i));
  }
  std::map<std::string, int> per_node;
  for (int i = 0; i < n; ++i) {
    auto node = manta::TryGet(refs[static_cast<size_t>(i)], absl::Seconds(90));
    if (!node.ok()) return Fail("task " + std::to_string(i) + ": " + node.status().ToString());
    ++per_node[**node];
  }
  std::cout << "DONE";
  for (const auto& [node, count] : per_node) std::cout << " " << node << "=" << count;
  std::cout << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  manta::Init(argc, argv);
  std::string scenario = argc > 1 ? argv[1] : "";
  std::string arg = argc > 2 ? argv[2] : "";
  int rc = 2;
  try {
    if (scenario == "place" && !arg.empty()) {
      rc = Place(arg);
    } else if (scenario == "where" && !arg.empty()) {
      rc = Where(arg);
    } else if (scenario == "remove" && !arg.empty()) {
      rc = Remove(arg);
    } else if (scenario == "tasks" && !arg.empty()) {
      rc = Tasks(std::atoi(arg.c_str()), argc > 3 ? argv[3] : "");
    } else {
      std::cerr << "usage: partition_driver place|where|remove NAME | tasks N [RESOURCE]" << std::endl;
    }
  } catch (const manta::Error& e) {
    rc = Fail(e.what());
  }
  manta::Shutdown();
  return rc;
}
