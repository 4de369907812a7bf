// manta._core: the Python binding of the core worker's seam
// (manta/internal/core_worker.h) and the ClusterState above it. The Python
// package (python/manta/) adds pickling, decorators and Ray's names; nothing
// of ownership, leases or scheduling is written in Python.
#include "common/package_name.h"
#include "common/version.h"
#include "python/src/binding.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "Manta's core worker, bound for the manta package";
  m.attr("VERSION") = manta::kVersion;
  m.attr("CLUSTER_KV_NAMESPACE") = manta::kClusterKvNamespace;
  m.attr("VERSION_KEY") = manta::kVersionKey;
  m.attr("FUNCTION_KV_NAMESPACE") = manta::kFunctionKvNamespace;
  manta::python::DefineRefs(m);
  manta::python::DefineCalls(m);
  manta::python::DefineFastPaths(m);
  manta::python::DefineCluster(m);
  manta::python::DefineWorker(m);
  manta::python::DefineTpu(m);
  manta::python::DefineTrain(m);
}
