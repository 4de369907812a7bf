// Pickles of single scalars (None, bool, int within 64 bits, float, and str
// or bytes under 256 bytes) written and read without calling into pickle:
// the bytes are the ones pickle.dumps(value, protocol=5) makes (a test holds
// them to it), so either side may be pickle itself. Every other value goes
// through pickle.
#pragma once

#include <Python.h>

#include <cstddef>
#include <string>

namespace manta::python {

// Appends the pickle of `value` to `out` and returns true when `value` is
// one of the scalars above (exact types, not subclasses); false, with `out`
// unchanged and no Python error set, otherwise.
bool PickleScalar(PyObject* value, std::string* out);

// The most arguments PickleArgs takes.
inline constexpr size_t kMaxPickledArgs = 8;

// Appends the pickle of `(list(args), {})`, a call's positional arguments
// as manta/_private/remote_function.py's pack_args pickles them, and
// returns true when there are at most kMaxPickledArgs and each is a scalar
// PickleScalar takes; false, with `out` unchanged, otherwise. The bytes are
// pickle.dumps's when no str or bytes object appears twice (pickle refers
// back to the first; here it is written again: the same values either way).
bool PickleArgs(PyObject* const* args, size_t count, std::string* out);

// The value of `pickle` when it is a scalar's pickle as PickleScalar or
// pickle.dumps writes it (protocol 4 or 5, or from 2 for None, bool, int
// and float); nullptr, with no Python error set, for anything else.
PyObject* UnpickleScalar(const char* pickle, size_t size);

}  // namespace manta::python
