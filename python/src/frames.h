// Values in the front end's frame (manta/_private/serialization.py): a
// 16-byte header (magic "MNT1", uint32 buffer count, uint64 pickle length,
// little-endian), the pickle, then any out-of-band buffers. The common
// cases, a value pickled in-band, are encoded and decoded here without a
// trip through Python code; every other frame goes to serialization.py.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "python/src/binding.h"

namespace manta::python {

// The frame of `value` pickled in-band (pickle protocol 5), as
// serialize_plain makes it.
std::string EncodePlain(const py::handle& value);

// A frame being written: its header's 16 bytes, to be filled by
// SetFrameLength once the in-band pickle that follows is appended.
std::string FrameHead(size_t capacity = 64);
void SetFrameLength(std::string* frame);

// The value of a frame with no out-of-band buffers; nullopt for any
// other bytes (a frame with buffers, another language's msgpack) or when
// unpickling raised an Exception (the Python path then raises it in its
// turn); any other error (KeyboardInterrupt) is thrown.
std::optional<py::object> DecodeInBand(std::string_view data);
inline std::optional<py::object> DecodeInBand(const std::shared_ptr<const std::string>& data) {
  return DecodeInBand(std::string_view(*data));
}

}  // namespace manta::python
