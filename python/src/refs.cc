// ObjectRef and the zero-copy view of a value the core worker holds.
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/escaping.h"
#include "python/src/binding.h"

namespace manta::python {
namespace {

// The owner address a ref carries on the wire: its own, or this process's.
std::string WireOwner(const core::ObjectRefInfo& info) {
  if (!info.owner_address.empty()) return info.owner_address;
  core::CoreWorker* core = core::CoreWorker::Current();
  return core == nullptr ? std::string() : core->address();
}

// Pickling: the ref is listed in the thread's collector (the submit or put
// that pickles the value keeps it alive for the receiver), and unpickles
// through manta._private.refs.unpickle_ref (a Python function: pickle names
// it by reference, which it cannot do for a function of this module).
py::tuple Reduce(const ObjectRef& ref, const py::object& unpickle) {
  core::ObjectRefInfo wire{ref.info().id, WireOwner(ref.info())};
  if (core::RefCollector* c = core::ContainedRefs()) {
    c->refs.push_back(wire);
    if (c->hold) Core().AddLocalReference(wire.id);
  }
  return py::make_tuple(unpickle, py::make_tuple(Bytes(wire.id.Binary()), Bytes(wire.owner_address)));
}

// A ref that arrived inside a value: borrowed from its owner (which may
// block on the owner, so without the GIL).
py::object Unpickle(const py::bytes& id, const py::bytes& owner) {
  absl::StatusOr<ObjectId> parsed = ObjectId::FromBinary(std::string(id));
  if (!parsed.ok()) throw py::value_error("not an object id: " + parsed.status().ToString());
  core::ObjectRefInfo info{*parsed, std::string(owner)};
  core::CoreWorker& core = Core();
  if (info.owner_address == core.address()) info.owner_address.clear();
  {
    py::gil_scoped_release release;
    core.AddBorrowedReference(info);
  }
  return NewRef(std::move(info), /*counted=*/false);
}

// ObjectRef is a type of CPython's own, the ObjectRef held inside the
// Python object: making and dropping a ref (every put and every submit's
// returns) allocates once and registers nothing, which pybind11's classes
// cannot do. It cannot be made from Python or subclassed.
struct RefObject {
  PyObject_HEAD ObjectRef ref;
};

PyTypeObject* g_ref_type = nullptr;

const ObjectRef& Self(PyObject* self) { return reinterpret_cast<RefObject*>(self)->ref; }

void Dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  reinterpret_cast<RefObject*>(self)->ref.~ObjectRef();
  type->tp_free(self);
  Py_DECREF(type);  // each instance of a heap type holds its type
}

PyObject* Repr(PyObject* self) {
  return PyUnicode_FromString(("ObjectRef(" + Self(self).info().id.Hex() + ")").c_str());
}

Py_hash_t Hash(PyObject* self) {
  const auto h = static_cast<Py_hash_t>(absl::HashOf(Self(self).info().id));
  return h == -1 ? -2 : h;  // -1 means an error
}

PyObject* Compare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(b) != g_ref_type) Py_RETURN_NOTIMPLEMENTED;
  const bool equal = Self(a).info().id == Self(b).info().id;
  return PyBool_FromLong(equal == (op == Py_EQ));
}

PyObject* Binary(PyObject* self, PyObject*) {
  return Guarded([&] { return py::object(Bytes(Self(self).info().id.Binary())); });
}

PyObject* Hex(PyObject* self, PyObject*) {
  return Guarded([&] { return py::object(py::str(Self(self).info().id.Hex())); });
}

PyObject* OwnerAddress(PyObject* self, PyObject*) {
  return Guarded([&] { return py::object(Bytes(WireOwner(Self(self).info()))); });
}

PyObject* ReduceRef(PyObject* self, PyObject*) {
  return Guarded([&] {
    static PyObject* const unpickle =
        py::object(py::module_::import("manta._private.refs").attr("unpickle_ref")).release().ptr();
    return py::object(Reduce(Self(self), py::reinterpret_borrow<py::object>(unpickle)));
  });
}

PyMethodDef kRefMethods[] = {
    {"binary", Binary, METH_NOARGS, "The id's bytes."},
    {"hex", Hex, METH_NOARGS, "The id in hexadecimal."},
    {"owner_address", OwnerAddress, METH_NOARGS, "The address of the process that owns the value."},
    {"__reduce__", ReduceRef, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot kRefSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(Dealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(Repr)},
    {Py_tp_hash, reinterpret_cast<void*>(Hash)},
    {Py_tp_richcompare, reinterpret_cast<void*>(Compare)},
    {Py_tp_methods, kRefMethods},
    {Py_tp_doc, const_cast<char*>("A reference to a value in the cluster (Ray's ObjectRef).")},
    {0, nullptr},
};

PyType_Spec kRefSpec = {"manta._core.ObjectRef", sizeof(RefObject), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE, kRefSlots};

}  // namespace

ObjectRef::ObjectRef(core::ObjectRefInfo info, bool counted) : info_(std::move(info)) {
  if (counted && !info_.id.IsNil()) {
    if (core::CoreWorker* core = core::CoreWorker::Current()) core->AddLocalReference(info_.id);
  }
}

const ObjectRef* AsRef(PyObject* h) {
  return Py_TYPE(h) == g_ref_type ? &reinterpret_cast<RefObject*>(h)->ref : nullptr;
}

const ObjectRef* RefOf(py::handle h) {
  if (const ObjectRef* ref = AsRef(h.ptr())) return ref;
  throw py::type_error("expected an ObjectRef, got " + std::string(Py_TYPE(h.ptr())->tp_name));
}

py::object NewRef(core::ObjectRefInfo info, bool counted) {
  PyObject* made = g_ref_type->tp_alloc(g_ref_type, 0);
  if (made == nullptr) throw py::error_already_set();
  new (&reinterpret_cast<RefObject*>(made)->ref) ObjectRef(std::move(info), counted);
  return py::reinterpret_steal<py::object>(made);
}

ObjectRef::~ObjectRef() {
  if (info_.id.IsNil()) return;
  if (core::CoreWorker* core = core::CoreWorker::Current()) core->RemoveLocalReference(info_.id);
}

void RefCollection::Enter() {
  if (scope_) throw py::value_error("this RefCollection is already entered");
  collector_.refs.clear();
  scope_ = std::make_unique<core::CollectRefs>(&collector_);
}

void RefCollection::Exit() { scope_.reset(); }

void DefineRefs(py::module_& m) {
  py::class_<RefCollection>(m, "RefCollection")
      .def(py::init<>())
      .def(
          "__enter__",
          [](RefCollection& c) -> RefCollection& {
            c.Enter();
            return c;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](RefCollection& c, const py::args&) { c.Exit(); })
      .def("__len__", [](const RefCollection& c) { return c.refs().size(); });

  py::class_<HeldBytes>(m, "HeldBytes", py::buffer_protocol())
      .def_buffer([](HeldBytes& h) {
        return py::buffer_info(const_cast<char*>(h.data->data()), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(h.data->size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", [](const HeldBytes& h) { return h.data->size(); });

  // Kept for the process's life: refs may outlive the module's dict.
  g_ref_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kRefSpec));
  if (g_ref_type == nullptr) throw py::error_already_set();
  m.attr("ObjectRef") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(g_ref_type));
  m.def("_unpickle_ref", &Unpickle);
}

}  // namespace manta::python
