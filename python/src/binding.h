// The pieces of the _core module (python/src/): each file defines one group
// of the module's functions over the core worker's seam
// (manta/internal/core_worker.h) and the ClusterState above it; module.cc
// calls them in order.
//
// The GIL: every call that may block (get, wait, a borrow that asks the
// owner, GCS calls, init and shutdown) runs with it released; the task
// invokers a worker's core worker calls from its own threads take it.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "manta/internal/cluster_state.h"
#include "manta/internal/core_worker.h"

namespace manta::python {

namespace py = pybind11;

// A reference to an object: counts itself with the core worker while it
// lives, lists itself in the thread's ref collector when pickled, and is
// borrowed again (a blocking call to the owner) when unpickled elsewhere.
class ObjectRef {
 public:
  // `counted`: take a local reference now (false: the reference was taken
  // for this object by the call that made it).
  ObjectRef(core::ObjectRefInfo info, bool counted);
  ~ObjectRef();
  ObjectRef(const ObjectRef&) = delete;
  ObjectRef& operator=(const ObjectRef&) = delete;

  const core::ObjectRefInfo& info() const { return info_; }

 private:
  core::ObjectRefInfo info_;
};

// The ObjectRef a Python object is (_core.ObjectRef, refs.cc: a CPython
// type holding the ObjectRef): nullptr, or a TypeError from RefOf, for
// anything else.
const ObjectRef* AsRef(PyObject* h);
const ObjectRef* RefOf(py::handle h);
// A new Python ObjectRef (the arguments as ObjectRef's constructor's).
py::object NewRef(core::ObjectRefInfo info, bool counted);

// While entered (a `with` block), every ObjectRef pickled on this thread is
// listed here; a put or submit given it keeps those refs alive for whoever
// unpickles the value.
class RefCollection {
 public:
  void Enter();
  void Exit();
  std::vector<core::ObjectRefInfo> refs() const { return collector_.refs; }

 private:
  core::RefCollector collector_;
  std::unique_ptr<core::CollectRefs> scope_;
};

// Bytes the core worker holds (a Get's value): exposed to Python as a
// read-only buffer without a copy, alive while any view of it is.
struct HeldBytes {
  std::shared_ptr<const std::string> data;
};

// How many times this process joined a cluster (init): what one session
// made (a function exported to its cluster) may not hold in the next.
uint64_t Session();

// The core worker, or a Python RuntimeError when manta is not initialized.
core::CoreWorker& Core();
core::ClusterState& Cluster();
// Raises the Python exception for a non-OK status (ValueError for
// InvalidArgument and AlreadyExists, KeyError for NotFound, RuntimeError
// otherwise, each with the status's message).
[[noreturn]] void Raise(const absl::Status& status);
void Check(const absl::Status& status);
template <typename T>
T Take(absl::StatusOr<T> s) {
  if (!s.ok()) Raise(s.status());
  return std::move(*s);
}

// For functions bound with CPython's own convention: calls `f` (returning
// a py::object, or a new reference) and turns a C++ exception into the
// Python one (nullptr returned, the error set).
template <typename F>
PyObject* Guarded(F&& f) {
  try {
    if constexpr (std::is_same_v<decltype(f()), PyObject*>) {
      return f();
    } else {
      return f().release().ptr();
    }
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

py::bytes Bytes(const std::string& s);
// A value's parts (buffers: a frame's header, pickle and out-of-band
// buffers) joined in one copy.
std::string Join(const py::list& parts);
py::dict ToDict(const std::map<std::string, double>& m);
// With the GIL held, in a worker: whether the task the calling thread runs
// was cancelled, the caller then raising KeyboardInterrupt itself (a call
// blocked in C++ runs no bytecode to raise the one a cancel injects, which
// is then withdrawn, or never injected).
bool TakeTaskInterrupt();

void DefineRefs(py::module_& m);       // refs.cc: ObjectRef, HeldBytes
void DefineCalls(py::module_& m);      // calls.cc: tasks, actors, objects
void DefineFastPaths(py::module_& m);  // fast.cc: put_scalar, get_ready
void DefineCluster(py::module_& m);    // cluster.cc: init, identity, nodes, groups, kv
void DefineWorker(py::module_& m);     // worker.cc: the resolver and the task loop
void DefineTpu(py::module_& m);        // tpu.cc: TPU slice shapes, listing and reservations
void DefineTrain(py::module_& m);      // train.cc: JaxTrainer.fit and the in-loop calls

}  // namespace manta::python
