// The calls a loop of small puts, gets and remote calls makes, bound with
// CPython's own calling convention rather than pybind11's dispatch: a put
// of a scalar, a get of a value this process owns and already holds, and a
// remote function's or actor method's call with scalar arguments. For
// anything else, or when manta is not initialized, each hands the call to
// the general path (manta/_private/api.py, remote_function.py, actor.py),
// which initializes, waits and raises as the case needs.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "python/src/binding.h"
#include "python/src/frames.h"
#include "python/src/large_values.h"
#include "python/src/scalars.h"

namespace manta::python {
namespace {

PyObject* g_miss = nullptr;

PyObject* Miss() { return Py_NewRef(g_miss); }

PyObject* PutScalar(PyObject*, PyObject* value) {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) Py_RETURN_NONE;
  std::string frame = FrameHead();
  if (!PickleScalar(value, &frame)) Py_RETURN_NONE;
  SetFrameLength(&frame);
  return Guarded([&]() -> PyObject* {
    absl::StatusOr<core::ObjectRefInfo> ref = core->PutWithRefs(LargeValues::Get().Share(std::move(frame)), {});
    if (!ref.ok()) Py_RETURN_NONE;  // the general path raises its error
    return NewRef(std::move(*ref), /*counted=*/true).release().ptr();
  });
}

PyObject* GetReady(PyObject*, PyObject* h) {
  const ObjectRef* ref = AsRef(h);
  core::CoreWorker* core = core::CoreWorker::Current();
  if (ref == nullptr || core == nullptr || !ref->info().owner_address.empty()) return Miss();
  return Guarded([&]() -> PyObject* {
    auto got = core->Get({ref->info()}, absl::ZeroDuration());
    if (!got[0].ok()) return Miss();  // not ready, or an error the general path raises
    std::optional<py::object> value = DecodeInBand(*got[0]);
    return value ? value->release().ptr() : Miss();
  });
}

// manta.put and manta.get themselves: the call above, else the general
// path (`self`, a Python function) with the same arguments.
PyObject* FrontPut(PyObject* general, PyObject* value) {
  PyObject* ref = PutScalar(nullptr, value);
  if (ref != Py_None) return ref;  // a ref, or an error raised
  Py_DECREF(ref);
  return PyObject_CallOneArg(general, value);
}

PyObject* FrontGet(PyObject* general, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (kwnames == nullptr && PyVectorcall_NARGS(nargsf) == 1) {  // no timeout
    PyObject* value = GetReady(nullptr, args[0]);
    if (value != g_miss) return value;  // a value, or an error raised
    Py_DECREF(value);
  }
  return PyObject_Vectorcall(general, args, nargsf, kwnames);
}

PyMethodDef kPut = {"put", FrontPut, METH_O,
                    "put(value)\n--\n\nStores `value` in this process (the owner) and returns its ref."};
PyMethodDef kGet = {"get", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrontGet)),
                    METH_FASTCALL | METH_KEYWORDS,
                    "get(object_refs, *, timeout=None)\n--\n\nThe values of the refs (a list for a list), raising "
                    "the first error."};

PyMethodDef kPutScalar = {"put_scalar", PutScalar, METH_O,
                          "put_scalar(value): the ref of `value` stored by this process when it is a "
                          "scalar (None, bool, int, float, short str or bytes); None otherwise."};
PyMethodDef kGetReady = {"get_ready", GetReady, METH_O,
                         "get_ready(ref): the value of `ref` when this process owns it, holds it and it "
                         "was pickled in-band; MISS otherwise."};

// A remote function's or actor method's call: `self` is (the general path,
// a capsule of Call). With no keywords and up to kMaxPickledArgs scalar
// arguments, the arguments are pickled here and submitted as
// RemoteFunction.remote and ActorMethod.remote submit them; any other call,
// or one in another session than the one the call was made for (a function
// is exported again to each cluster joined), goes to the general path.
struct Call {
  std::optional<ActorId> actor;  // else a task
  std::string name;              // the function's or method's
  core::TaskOptions options;     // a task's
  uint64_t session = 0;          // Session() when made
};
constexpr char kCallCapsule[] = "manta.Call";

PyObject* FrontCall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* general = PyTuple_GET_ITEM(self, 0);
  const auto* call = static_cast<const Call*>(PyCapsule_GetPointer(PyTuple_GET_ITEM(self, 1), kCallCapsule));
  core::CoreWorker* core = core::CoreWorker::Current();
  const size_t n = PyVectorcall_NARGS(nargsf);
  std::string frame = FrameHead();
  if (call == nullptr || core == nullptr || kwnames != nullptr || Session() != call->session ||
      !PickleArgs(args, n, &frame)) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, nargsf, kwnames);
  }
  SetFrameLength(&frame);
  return Guarded([&]() -> PyObject* {
    std::vector<core::Arg> value;
    value.push_back(core::Arg::Value(std::move(frame)));
    std::vector<core::ObjectRefInfo> refs =
        call->actor ? Take(core->SubmitActorTask(*call->actor, call->name, std::move(value), core::ActorTaskOptions()))
                    : Take(core->SubmitTask(call->name, std::move(value), call->options));
    return NewRef(std::move(refs.at(0)), /*counted=*/true).release().ptr();
  });
}

PyMethodDef kCall = {"remote", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FrontCall)),
                     METH_FASTCALL | METH_KEYWORDS,
                     "remote(*args, **kwargs)\n--\n\nSubmits the call; returns the ref of its result."};

// A builtin function of `def` bound to `self`, in module manta.
py::object Bind(PyMethodDef* def, const py::handle& self) {
  static PyObject* const module = PyUnicode_InternFromString("manta");
  PyObject* f = PyCFunction_NewEx(def, self.ptr(), module);
  if (f == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

}  // namespace

void DefineFastPaths(py::module_& m) {
  g_miss = PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  if (g_miss == nullptr) throw py::error_already_set();
  m.attr("MISS") = py::reinterpret_borrow<py::object>(g_miss);
  // The codec alone, for its tests: bytes or None, a value or MISS.
  m.def("pickle_scalar", [](const py::handle& value) -> py::object {
    std::string out;
    if (!PickleScalar(value.ptr(), &out)) return py::none();
    return py::bytes(out);
  });
  m.def("unpickle_scalar", [](const py::bytes& data) -> py::object {
    const std::string_view bytes = data;
    PyObject* value = UnpickleScalar(bytes.data(), bytes.size());
    return value ? py::reinterpret_steal<py::object>(value) : py::reinterpret_borrow<py::object>(g_miss);
  });
  // front_put(general) and front_get(general): manta.put and manta.get.
  m.def("front_put", [](const py::function& general) { return Bind(&kPut, general); });
  m.def("front_get", [](const py::function& general) { return Bind(&kGet, general); });
  // front_call(general, actor id or None, name, task options or None): the
  // `remote` of a remote function or actor method with one return and the
  // options given, for this session; None when manta is not initialized.
  m.def("front_call",
        [](const py::function& general, const py::object& actor, const std::string& name,
           const py::object& options) -> py::object {
          if (core::CoreWorker::Current() == nullptr) return py::none();
          auto call = std::make_unique<Call>();
          if (!actor.is_none()) call->actor = Take(ActorId::FromBinary(std::string(actor.cast<py::bytes>())));
          if (!options.is_none()) call->options = options.cast<const core::TaskOptions&>();
          if (call->options.num_returns != 1) throw py::value_error("front_call takes calls with one return");
          call->name = name;
          call->session = Session();
          PyObject* capsule = PyCapsule_New(call.get(), kCallCapsule, [](PyObject* c) {
            delete static_cast<Call*>(PyCapsule_GetPointer(c, kCallCapsule));
          });
          if (capsule == nullptr) throw py::error_already_set();
          call.release();
          return Bind(&kCall, py::make_tuple(general, py::reinterpret_steal<py::object>(capsule)));
        });
  m.def("pickle_args", [](const py::args& args) -> py::object {
    std::string out;
    if (!PickleArgs(reinterpret_cast<PyTupleObject*>(args.ptr())->ob_item, args.size(), &out)) return py::none();
    return py::bytes(out);
  });
  for (PyMethodDef* def : {&kPutScalar, &kGetReady}) {
    py::object f = py::reinterpret_steal<py::object>(PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr()));
    if (!f) throw py::error_already_set();
    m.attr(def->ml_name) = f;
  }
}

}  // namespace manta::python
