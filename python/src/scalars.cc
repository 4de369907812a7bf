#include "python/src/scalars.h"

#include <cstdint>
#include <cstring>

namespace manta::python {
namespace {

// pickle's opcodes (Lib/pickletools.py).
constexpr unsigned char kProto = 0x80, kFrame = 0x95, kStop = '.', kNone = 'N', kTrue = 0x88, kFalse = 0x89,
                        kBinInt1 = 'K', kBinInt2 = 'M', kBinInt = 'J', kLong1 = 0x8a, kBinFloat = 'G',
                        kShortUnicode = 0x8c, kShortBytes = 'C', kMemoize = 0x94, kEmptyList = ']', kEmptyDict = '}',
                        kMark = '(', kAppend = 'a', kAppends = 'e', kTuple2 = 0x86;

void PutLe(unsigned char* at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) at[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t GetLe(const unsigned char* at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return v;
}

// An int's opcode and argument as pickle's save_long writes them: the
// BININT forms within 32 bits, else LONG1 with the fewest bytes that hold
// the two's complement.
size_t PickleInt(long long x, unsigned char* body) {
  if (x >= 0 && x <= 0xff) {
    body[0] = kBinInt1;
    body[1] = static_cast<unsigned char>(x);
    return 2;
  }
  if (x >= 0 && x <= 0xffff) {
    body[0] = kBinInt2;
    PutLe(body + 1, static_cast<uint64_t>(x), 2);
    return 3;
  }
  if (x >= INT32_MIN && x <= INT32_MAX) {
    body[0] = kBinInt;
    PutLe(body + 1, static_cast<uint64_t>(x), 4);
    return 5;
  }
  const uint64_t magnitude = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const int bits = 64 - __builtin_clzll(magnitude);
  int n = bits / 8 + 1;  // at most 9
  unsigned char bytes[9];
  PutLe(bytes, static_cast<uint64_t>(x), 8);
  bytes[8] = x < 0 ? 0xff : 0x00;
  if (x < 0 && n > 1 && bytes[n - 1] == 0xff && (bytes[n - 2] & 0x80) != 0) --n;
  body[0] = kLong1;
  body[1] = static_cast<unsigned char>(n);
  std::memcpy(body + 2, bytes, n);
  return 2 + n;
}

// The body of a short str or bytes: opcode, length, data, MEMOIZE.
size_t PickleShort(unsigned char op, const char* data, Py_ssize_t size, unsigned char* body) {
  body[0] = op;
  body[1] = static_cast<unsigned char>(size);
  std::memcpy(body + 2, data, size);
  body[2 + size] = kMemoize;
  return 3 + size;
}

// The opcodes of one scalar (with MEMOIZE after a str or bytes, as pickle
// writes them) into `body` (kMaxScalarBody bytes); 0 for any other value.
constexpr size_t kMaxScalarBody = 2 + 255 + 1;  // opcode, length, 255 bytes, MEMOIZE
size_t ScalarBody(PyObject* value, unsigned char* body) {
  if (value == Py_None) {
    body[0] = kNone;
    return 1;
  }
  if (value == Py_True || value == Py_False) {
    body[0] = value == Py_True ? kTrue : kFalse;
    return 1;
  }
  if (PyLong_CheckExact(value)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    return overflow != 0 ? 0 : PickleInt(x, body);
  }
  if (PyFloat_CheckExact(value)) {
    body[0] = kBinFloat;
    if (PyFloat_Pack8(PyFloat_AS_DOUBLE(value), reinterpret_cast<char*>(body + 1), /*le=*/0) != 0) {
      PyErr_Clear();
      return 0;
    }
    return 9;
  }
  if (PyUnicode_CheckExact(value)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(value, &size);
    if (utf8 == nullptr) {  // lone surrogates: pickle's own path encodes them
      PyErr_Clear();
      return 0;
    }
    return size > 255 ? 0 : PickleShort(kShortUnicode, utf8, size, body);
  }
  if (PyBytes_CheckExact(value)) {
    const Py_ssize_t size = PyBytes_GET_SIZE(value);
    return size > 255 ? 0 : PickleShort(kShortBytes, PyBytes_AS_STRING(value), size, body);
  }
  return 0;
}

// Appends PROTO 5, the FRAME of `body` (pickle frames what it writes once
// a frame holds 4 bytes), then `body`.
void AppendFramed(const unsigned char* body, size_t n, std::string* out) {
  const unsigned char head[2] = {kProto, 5};
  out->append(reinterpret_cast<const char*>(head), 2);
  if (n >= 4) {
    unsigned char frame[9] = {kFrame};
    PutLe(frame + 1, n, 8);
    out->append(reinterpret_cast<const char*>(frame), 9);
  }
  out->append(reinterpret_cast<const char*>(body), n);
}

}  // namespace

bool PickleScalar(PyObject* value, std::string* out) {
  unsigned char body[kMaxScalarBody + 1];  // and STOP
  size_t n = ScalarBody(value, body);
  if (n == 0) return false;
  body[n++] = kStop;
  AppendFramed(body, n, out);
  return true;
}

bool PickleArgs(PyObject* const* args, size_t count, std::string* out) {
  if (count > kMaxPickledArgs) return false;
  unsigned char body[kMaxPickledArgs * kMaxScalarBody + 16];
  size_t n = 0;
  body[n++] = kEmptyList;
  body[n++] = kMemoize;
  if (count > 1) body[n++] = kMark;
  for (size_t i = 0; i < count; ++i) {
    const size_t k = ScalarBody(args[i], body + n);
    if (k == 0) return false;
    n += k;
  }
  if (count == 1) body[n++] = kAppend;
  if (count > 1) body[n++] = kAppends;
  for (unsigned char op : {kEmptyDict, kMemoize, kTuple2, kMemoize, kStop}) body[n++] = op;
  AppendFramed(body, n, out);
  return true;
}

PyObject* UnpickleScalar(const char* pickle, size_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(pickle);
  const unsigned char* const end = p + size;
  if (size < 3 || p[0] != kProto || p[1] < 2 || p[1] > 5) return nullptr;
  p += 2;
  if (*p == kFrame) {
    if (end - p < 10) return nullptr;
    p += 9;
  }
  const unsigned char op = *p++;
  // Bytes the opcode's argument takes, then the value.
  auto has = [&](size_t k) { return static_cast<size_t>(end - p) >= k; };
  PyObject* value = nullptr;
  switch (op) {
    case kNone:
      value = Py_NewRef(Py_None);
      break;
    case kTrue:
      value = Py_NewRef(Py_True);
      break;
    case kFalse:
      value = Py_NewRef(Py_False);
      break;
    case kBinInt1:
      if (!has(1)) return nullptr;
      value = PyLong_FromLong(p[0]);
      p += 1;
      break;
    case kBinInt2:
      if (!has(2)) return nullptr;
      value = PyLong_FromLong(static_cast<long>(GetLe(p, 2)));
      p += 2;
      break;
    case kBinInt:
      if (!has(4)) return nullptr;
      value = PyLong_FromLong(static_cast<int32_t>(GetLe(p, 4)));
      p += 4;
      break;
    case kLong1: {
      if (!has(1) || p[0] > 8 || !has(1 + p[0])) return nullptr;
      const int n = p[0];
      uint64_t v = GetLe(p + 1, n);
      if (n > 0 && n < 8 && (p[n] & 0x80) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
      value = PyLong_FromLongLong(static_cast<long long>(v));
      p += 1 + n;
      break;
    }
    case kBinFloat: {
      if (!has(8)) return nullptr;
      const double d = PyFloat_Unpack8(reinterpret_cast<const char*>(p), /*le=*/0);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return nullptr;
      }
      value = PyFloat_FromDouble(d);
      p += 8;
      break;
    }
    case kShortUnicode:
    case kShortBytes: {
      if (!has(1) || !has(1 + p[0])) return nullptr;
      const char* data = reinterpret_cast<const char*>(p + 1);
      value =
          op == kShortBytes ? PyBytes_FromStringAndSize(data, p[0]) : PyUnicode_DecodeUTF8(data, p[0], "surrogatepass");
      p += 1 + p[0];
      if (p < end && *p == kMemoize) ++p;
      break;
    }
    default:
      return nullptr;
  }
  if (value == nullptr) {  // out of memory, or bytes that are not UTF-8
    PyErr_Clear();
    return nullptr;
  }
  if (end - p != 1 || *p != kStop) {
    Py_DECREF(value);
    return nullptr;
  }
  return value;
}

}  // namespace manta::python
