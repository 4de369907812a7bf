#include "python/src/frames.h"

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "python/src/large_values.h"
#include "python/src/scalars.h"

namespace manta::python {
namespace {

constexpr char kMagic[4] = {'M', 'N', 'T', '1'};
constexpr size_t kHeadSize = 16;

// pickle's functions, looked up once and kept for the process's life (a
// static py::object would be released after the interpreter is gone).
PyObject* PickleFunction(const char* name) {
  py::object f = py::module_::import("pickle").attr(name);
  return f.release().ptr();
}

}  // namespace

std::string FrameHead(size_t capacity) {
  std::string frame = LargeValues::Get().Take(std::max(capacity, kHeadSize));
  frame.resize(kHeadSize);
  return frame;
}

void SetFrameLength(std::string* frame) {
  const uint32_t count = 0;
  const uint64_t length = frame->size() - kHeadSize;
  char* head = frame->data();
  std::memcpy(head, kMagic, 4);
  std::memcpy(head + 4, &count, 4);  // x86-64 and arm64: little-endian
  std::memcpy(head + 8, &length, 8);
}

std::string EncodePlain(const py::handle& value) {
  static PyObject* const dumps = PickleFunction("dumps");
  static PyObject* const protocol = PyLong_FromLong(5);
  {
    std::string frame = FrameHead();
    if (PickleScalar(value.ptr(), &frame)) {
      SetFrameLength(&frame);
      return frame;
    }
  }
  py::object pickled =
      py::reinterpret_steal<py::object>(PyObject_CallFunctionObjArgs(dumps, value.ptr(), protocol, nullptr));
  if (!pickled) throw py::error_already_set();
  char* bytes = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(pickled.ptr(), &bytes, &size) != 0) throw py::error_already_set();
  std::string frame = FrameHead(kHeadSize + static_cast<size_t>(size));  // a pooled buffer when large
  frame.append(bytes, static_cast<size_t>(size));
  SetFrameLength(&frame);
  return frame;
}

std::optional<py::object> DecodeInBand(std::string_view data) {
  static PyObject* const loads = PickleFunction("loads");
  if (data.size() < kHeadSize || std::memcmp(data.data(), kMagic, 4) != 0) return std::nullopt;
  uint32_t count = 0;
  uint64_t length = 0;
  std::memcpy(&count, data.data() + 4, 4);
  std::memcpy(&length, data.data() + 8, 8);
  if (count != 0 || length > data.size() - kHeadSize) return std::nullopt;
  if (PyObject* scalar = UnpickleScalar(data.data() + kHeadSize, length)) {
    return py::reinterpret_steal<py::object>(scalar);
  }
  // A read-only view of the bytes, alive during the call: pickle copies
  // what it reads from an in-band pickle.
  py::object view = py::reinterpret_steal<py::object>(
      PyMemoryView_FromMemory(const_cast<char*>(data.data() + kHeadSize), static_cast<Py_ssize_t>(length), PyBUF_READ));
  if (!view) throw py::error_already_set();
  PyObject* value = PyObject_CallOneArg(loads, view.ptr());
  if (value == nullptr) {
    // The Python path raises an Exception again; anything else (Ctrl-C, a
    // cancel's KeyboardInterrupt) raises from here.
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw py::error_already_set();
    PyErr_Clear();
    return std::nullopt;
  }
  return py::reinterpret_steal<py::object>(value);
}

}  // namespace manta::python
