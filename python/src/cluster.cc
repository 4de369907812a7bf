// Joining and leaving the cluster, who this process is, the node table,
// placement groups and the GCS's key-value store.
#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "manta/internal/cluster_state.h"
#include "python/src/binding.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta::python {
namespace {

py::dict NodeDict(const core::NodeData& n) {
  py::dict d;
  d["node_id"] = n.node_id.Hex();
  d["ip"] = n.ip;
  d["alive"] = n.alive;
  d["is_head"] = n.is_head;
  d["resources"] = ToDict(n.resources_total);
  d["labels"] = n.labels;
  d["draining"] = n.draining;
  d["death_reason"] = n.death_reason;
  return d;
}

py::dict GroupDict(const core::PlacementGroupData& g) {
  py::dict d;
  d["id"] = Bytes(g.id.Binary());
  d["name"] = g.name;
  d["namespace"] = g.ray_namespace;
  d["strategy"] = static_cast<int>(g.strategy);
  d["state"] = static_cast<int>(g.state);
  d["state_message"] = g.state_message;
  d["infeasible"] = g.infeasible;
  d["detached"] = g.detached;
  py::list bundles;
  for (const core::BundleData& b : g.bundles) {
    py::dict bd;
    bd["index"] = b.index;
    bd["resources"] = ToDict(b.resources);
    bd["label_selector"] = b.label_selector;
    bd["node_id"] = b.node_id.IsNil() ? std::string() : b.node_id.Hex();
    bundles.append(bd);
  }
  d["bundles"] = bundles;
  return d;
}

// Runs a blocking GCS call without the GIL.
template <typename F>
auto Released(F f) {
  py::gil_scoped_release release;
  return f();
}

void DefineGroups(py::module_& m) {
  m.def("create_placement_group", [](const py::bytes& id, const std::string& name, const std::string& ns, int strategy,
                                     const std::vector<std::map<std::string, double>>& bundles,
                                     const std::vector<std::map<std::string, std::string>>& selectors, bool detached) {
    core::PlacementGroupData spec;
    spec.id = Take(PlacementGroupId::FromBinary(std::string(id)));
    spec.name = name;
    spec.ray_namespace = ns;
    if (strategy < 0 || strategy > 3) throw py::value_error("unknown placement strategy");
    spec.strategy = static_cast<core::PlacementStrategy>(strategy);
    spec.detached = detached;
    for (size_t i = 0; i < bundles.size(); ++i) {
      core::BundleData b;
      b.index = static_cast<int>(i);
      b.resources = bundles[i];
      if (i < selectors.size()) b.label_selector = selectors[i];
      spec.bundles.push_back(std::move(b));
    }
    core::CoreWorker& core = Core();
    return GroupDict(Take(Released([&] { return core.CreatePlacementGroup(spec); })));
  });
  m.def("remove_placement_group", [](const py::bytes& id) {
    PlacementGroupId pg = Take(PlacementGroupId::FromBinary(std::string(id)));
    core::CoreWorker& core = Core();
    Check(Released([&] { return core.RemovePlacementGroup(pg); }));
  });
  m.def("get_placement_group", [](const py::bytes& id) {
    PlacementGroupId pg = Take(PlacementGroupId::FromBinary(std::string(id)));
    core::CoreWorker& core = Core();
    return GroupDict(Take(Released([&] { return core.GetPlacementGroup(pg); })));
  });
  m.def("get_named_placement_group", [](const std::string& name, const std::string& ns) {
    core::CoreWorker& core = Core();
    return GroupDict(Take(Released([&] { return core.GetNamedPlacementGroup(name, ns); })));
  });
  m.def("wait_placement_group_ready", [](const py::bytes& id, double timeout_s) {
    PlacementGroupId pg = Take(PlacementGroupId::FromBinary(std::string(id)));
    absl::Duration t = timeout_s < 0 ? absl::InfiniteDuration() : absl::Seconds(timeout_s);
    core::CoreWorker& core = Core();
    return GroupDict(Take(Released([&] { return core.WaitPlacementGroupReady(pg, t); })));
  });
}

uint64_t g_sessions = 0;  // init calls; read and written with the GIL held

}  // namespace

uint64_t Session() { return g_sessions; }

core::CoreWorker& Core() {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) throw py::value_error("manta is not initialized: call manta.init() first");
  return *core;
}

core::ClusterState& Cluster() {
  core::ClusterState* state = core::ClusterState::Current();
  if (state == nullptr) throw py::value_error("manta is not initialized: call manta.init() first");
  return *state;
}

[[noreturn]] void Raise(const absl::Status& status) {
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:  // a taken name, as Ray's ValueError
      throw py::value_error(message);
    case absl::StatusCode::kNotFound:
      throw py::key_error(message);
    default:
      throw std::runtime_error(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

py::bytes Bytes(const std::string& s) { return py::bytes(s.data(), s.size()); }

py::dict ToDict(const std::map<std::string, double>& m) {
  py::dict d;
  for (const auto& [k, v] : m) d[py::str(k)] = v;
  return d;
}

void DefineCluster(py::module_& m) {
  // The job's runtime env: a working directory every worker of the job runs
  // in (a local directory, packed and uploaded by content hash) and
  // variables every worker gets.
  m.def(
      "init",
      [](const std::string& address, const std::string& temp_dir, const std::string& executable,
         const std::vector<std::string>& args, const std::string& working_dir,
         const std::map<std::string, std::string>& env_vars) {
        InitOptions o;
        o.address = address;
        o.temp_dir = temp_dir;
        o.worker_executable = executable;
        o.worker_args = args;
        o.runtime_env_working_dir = working_dir;
        o.runtime_env_env_vars = env_vars;
        Check(Released([&] { return TryInit(o); }));
        ++g_sessions;
      },
      py::arg("address"), py::arg("temp_dir"), py::arg("executable"), py::arg("args"), py::arg("working_dir") = "",
      py::arg("env_vars") = std::map<std::string, std::string>());
  // In-process, for the package's unit tests: the fake core worker runs each
  // task on the submitting thread through the same resolver a worker uses.
  m.def("_init_fake", [] {
    InitOptions o;
    o.core_worker_factory = core::FakeCoreWorker::Factory();
    o.address = "127.0.0.1:1";  // resolved but never dialed
    Check(Released([&] { return TryInit(o); }));
    ++g_sessions;
  });
  m.def("shutdown", [] {
    Released([] {
      Shutdown();
      return 0;
    });
  });
  m.def("is_initialized", [] { return core::CoreWorker::Current() != nullptr; });
  m.def("is_worker_process", [] { return core::CoreWorker::IsWorkerProcess(); });
  m.def("job_id", [] { return Core().job_id().Hex(); });
  m.def("node_id", [] { return Core().node_id().Hex(); });
  m.def("node_ip", [] { return Core().node_ip(); });
  m.def("worker_id", [] { return Core().worker_id().Hex(); });
  m.def("address", [] { return Bytes(Core().address()); });
  m.def("nodes", [] {
    core::CoreWorker& core = Core();
    std::vector<core::NodeData> nodes = Take(Released([&] { return core.GetAllNodes(); }));
    py::list out;
    for (const core::NodeData& n : nodes) out.append(NodeDict(n));
    return out;
  });
  m.def("cluster_resources", [] {
    core::CoreWorker& core = Core();
    auto nodes = Take(Released([&] { return core.GetClusterResources(); }));
    py::list out;
    for (const core::NodeResourcesData& n : nodes) {
      py::dict d;
      d["node_id"] = n.node_id.Hex();
      d["total"] = ToDict(n.total);
      d["available"] = ToDict(n.available);
      out.append(d);
    }
    return out;
  });
  m.def("kv_put", [](const std::string& ns, const py::bytes& key, const py::bytes& value, bool overwrite) {
    std::string k(key), v(value);
    core::ClusterState& cluster = Cluster();
    return Take(Released([&] { return cluster.KvPut(ns, k, v, overwrite); }));
  });
  m.def("kv_get", [](const std::string& ns, const py::bytes& key) -> py::object {
    std::string k(key);
    core::ClusterState& cluster = Cluster();
    std::optional<std::string> v = Take(Released([&] { return cluster.KvGet(ns, k); }));
    if (!v.has_value()) return py::none();
    return Bytes(*v);
  });
  DefineGroups(m);
}

}  // namespace manta::python
