// TPU slices for manta.util.tpu, over the C++ implementation
// (manta/tpu.h): the shape of a slice, the slices the cluster has, and
// reservations of whole slices with each host's bundle and environment.
// Everything here returns plain dicts, lists and bytes (placement group
// ids); the Python package wraps them in Ray's names.
//
// Errors: InvalidArgument (an unknown version, a bad topology, num_slices
// < 1, a host out of range) raises ValueError naming the problem; the rest
// raise RuntimeError with the status's code and message.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tpu.h"
#include "manta/errors.h"
#include "manta/tpu.h"
#include "python/src/binding.h"

namespace manta::python {
namespace {

// Runs `f` without the GIL (the module is compiled as one unit: this name
// must not clash with the other files' helpers).
template <typename F>
auto WithoutGil(F f) {
  py::gil_scoped_release release;
  return f();
}

// Runs `f`, turning the manta::Error the C++ API throws into the Python
// exception for its status.
template <typename F>
auto TpuCall(F f) {
  try {
    return f();
  } catch (const Error& e) {
    Raise(e.status());
  }
}

py::dict SliceInfoDict(const tpu::SliceInfo& s) {
  py::dict d;
  d["name"] = s.name;
  d["pod_type"] = s.pod_type;
  d["topology"] = s.topology;
  d["num_hosts"] = s.num_hosts;
  d["expected_hosts"] = s.expected_hosts;
  d["chips_per_host"] = s.chips_per_host;
  d["head_ip"] = s.head_ip;
  d["head_free"] = s.head_free;
  d["chips_free"] = s.chips_free;
  return d;
}

py::dict EnvDict(const std::map<std::string, std::string>& env) {
  py::dict d;
  for (const auto& [k, v] : env) d[py::str(k)] = v;
  return d;
}

void DefineReservation(py::module_& m) {
  py::class_<tpu::SliceReservation>(m, "SliceReservation",
                                    "Whole TPU slices reserved by tpu_reserve_slices: their placement groups, "
                                    "hosts and each host's process environment.")
      .def_property_readonly("groups",
                             [](const tpu::SliceReservation& r) {
                               py::list out;
                               for (const PlacementGroup& g : r.groups()) out.append(Bytes(g.ID()));
                               return out;
                             })
      .def_property_readonly("slices",
                             [](const tpu::SliceReservation& r) {
                               py::list out;
                               for (const tpu::SliceInfo& s : r.slices()) out.append(SliceInfoDict(s));
                               return out;
                             })
      .def_property_readonly("num_slices", &tpu::SliceReservation::num_slices)
      .def_property_readonly("hosts_per_slice", &tpu::SliceReservation::hosts_per_slice)
      .def_property_readonly("bundle_resources",
                             [](const tpu::SliceReservation& r) { return ToDict(r.BundleResources()); })
      .def(
          "host_ips",
          [](const tpu::SliceReservation& r, int slice) { return TpuCall([&] { return r.host_ips(slice); }); },
          py::arg("slice"), "The addresses of the slice's hosts, by TPU_WORKER_ID.")
      .def(
          "bundle",
          [](const tpu::SliceReservation& r, int slice, int host) {
            auto [group, index] = TpuCall([&] { return r.Bundle(slice, host); });
            return py::make_tuple(Bytes(group.ID()), index);
          },
          py::arg("slice"), py::arg("host"), "(placement group id, bundle index) of that host's bundle.")
      .def(
          "process_env",
          [](const tpu::SliceReservation& r, int slice, int host) {
            return EnvDict(TpuCall([&] { return r.ProcessEnv(slice, host); }));
          },
          py::arg("slice"), py::arg("host"),
          "The environment of the process on that host; an empty value means the variable is removed.")
      .def(
          "release",
          [](tpu::SliceReservation& r) {
            Core();  // raises when manta is not initialized
            WithoutGil([&] {
              TpuCall([&] {
                r.Release();
                return 0;
              });
              return 0;
            });
          },
          "Removes the reservation's groups; idempotent. The groups it could not remove are kept.");
}

}  // namespace

void DefineTpu(py::module_& m) {
  m.def(
      "tpu_slice_shape",
      [](const std::string& accelerator_version, const std::string& topology) {
        tpu::SliceShape s = Take(tpu::TrySliceShapeOf(accelerator_version, topology));
        py::dict d;
        d["pod_type"] = s.pod_type;
        d["topology"] = s.topology;
        d["accelerator_type"] = s.accelerator_type;
        d["chips_per_host"] = s.chips_per_host;
        d["hosts_per_slice"] = s.hosts_per_slice;
        return d;
      },
      py::arg("accelerator_version"), py::arg("topology"));
  m.def(
      "tpu_generation",
      [](const std::string& version_or_type) {
        std::string generation = tpu::NormalizeGeneration(version_or_type);
        const std::vector<std::string>& known = tpu::KnownGenerations();
        if (std::find(known.begin(), known.end(), generation) == known.end()) {
          throw py::value_error(absl::StrCat("Invalid accelerator_type: '", version_or_type, "'. Must be one of ",
                                             absl::StrJoin(known, ", "), ", or 'TPU-' followed by one of them"));
        }
        return generation;
      },
      py::arg("version_or_type"), "'v6e' for 'TPU-V6E', 'tpu-v6e' or 'v6e'; ValueError for an unknown one.");
  m.def("tpu_known_generations", [] { return tpu::KnownGenerations(); });
  m.def("tpu_list_slices", [] {
    Core();
    auto slices = Take(WithoutGil([] { return tpu::TryListSlices(); }));
    py::dict out;
    for (const auto& [pod_type, list] : slices) {
      py::list l;
      for (const tpu::SliceInfo& s : list) l.append(SliceInfoDict(s));
      out[py::str(pod_type)] = l;
    }
    return out;
  });
  m.def(
      "tpu_reserve_slices",
      [](const std::string& topology, const std::string& accelerator_version, int num_slices,
         const std::map<std::string, double>& resources_per_bundle, const std::string& strategy, bool one_group,
         double timeout_s, int megascale_port) {
        tpu::SliceOptions o;
        o.topology = topology;
        o.accelerator_version = accelerator_version;
        o.num_slices = num_slices;
        o.resources_per_bundle = resources_per_bundle;
        if (!strategy.empty()) o.strategy = TpuCall([&] { return ParsePlacementStrategy(strategy); });
        o.one_group = one_group;
        o.timeout = timeout_s < 0 ? absl::InfiniteDuration() : absl::Seconds(timeout_s);
        o.megascale_port = megascale_port;
        Core();
        return Take(WithoutGil([&] { return tpu::TryReserveSlices(o); }));
      },
      py::arg("topology"), py::arg("accelerator_version"), py::arg("num_slices") = 1,
      py::arg("resources_per_bundle") = std::map<std::string, double>(), py::arg("strategy") = "",
      py::arg("one_group") = true, py::arg("timeout_s") = 60.0, py::arg("megascale_port") = 8081,
      "Reserves whole slices (blocking until they are, or timeout_s passes; < 0 waits for ever).");
  DefineReservation(m);
}

}  // namespace manta::python
