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
std::unique_ptr<ObjectRef> Unpickle(const py::bytes& id, const py::bytes& owner) {
  absl::StatusOr<ObjectId> parsed = ObjectId::FromBinary(std::string(id));
  if (!parsed.ok()) throw py::value_error("not an object id: " + parsed.status().ToString());
  core::ObjectRefInfo info{*parsed, std::string(owner)};
  core::CoreWorker& core = Core();
  if (info.owner_address == core.address()) info.owner_address.clear();
  {
    py::gil_scoped_release release;
    core.AddBorrowedReference(info);
  }
  return std::make_unique<ObjectRef>(std::move(info), /*counted=*/false);
}

}  // namespace

ObjectRef::ObjectRef(core::ObjectRefInfo info, bool counted) : info_(std::move(info)) {
  if (counted && !info_.id.IsNil()) {
    if (core::CoreWorker* core = core::CoreWorker::Current()) core->AddLocalReference(info_.id);
  }
}

const ObjectRef* RefOf(py::handle h) {
  static py::detail::type_info* const type = py::detail::get_type_info(typeid(ObjectRef));
  if (type != nullptr && Py_TYPE(h.ptr()) == type->type) {
    return reinterpret_cast<py::detail::instance*>(h.ptr())->get_value_and_holder(type).value_ptr<ObjectRef>();
  }
  if (!py::isinstance<ObjectRef>(h)) {
    throw py::type_error("expected an ObjectRef, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
  }
  return h.cast<const ObjectRef*>();
}

py::object NewRef(core::ObjectRefInfo info, bool counted) {
  static const py::detail::type_info* const type = py::detail::get_type_info(typeid(ObjectRef));
  auto ref = std::make_unique<ObjectRef>(std::move(info), counted);
  // The instance takes the holder over (moved from `ref`).
  py::handle made = py::detail::type_caster_generic::cast(ref.get(), py::return_value_policy::take_ownership, {}, type,
                                                          nullptr, nullptr, &ref);
  if (!made) throw py::error_already_set();
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

  py::class_<ObjectRef>(m, "ObjectRef", "A reference to a value in the cluster (Ray's ObjectRef).")
      .def("binary", [](const ObjectRef& r) { return Bytes(r.info().id.Binary()); })
      .def("hex", [](const ObjectRef& r) { return r.info().id.Hex(); })
      .def("owner_address", [](const ObjectRef& r) { return Bytes(WireOwner(r.info())); })
      .def("__eq__",
           [](const ObjectRef& a, const py::object& b) {
             return py::isinstance<ObjectRef>(b) && a.info().id == b.cast<const ObjectRef&>().info().id;
           })
      .def("__hash__", [](const ObjectRef& r) { return static_cast<py::ssize_t>(absl::HashOf(r.info().id)); })
      .def("__repr__", [](const ObjectRef& r) { return "ObjectRef(" + r.info().id.Hex() + ")"; })
      .def("__reduce__", [](const ObjectRef& r) {
        return Reduce(r, py::module_::import("manta._private.refs").attr("unpickle_ref"));
      });
  m.def("_unpickle_ref", &Unpickle);
}

}  // namespace manta::python
