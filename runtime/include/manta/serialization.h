// Values as bytes: msgpack (msgpack-cxx), the format of every task argument,
// return value and Put object.
//
//   struct Point {
//     double x, y;
//     MSGPACK_DEFINE(x, y);
//   };
//   absl::StatusOr<std::string> bytes = manta::Serialize(Point{1, 2});
//   absl::StatusOr<Point> p = manta::Deserialize<Point>(*bytes);
//
// Any type msgpack-cxx can pack works: integers, floats, bool, std::string,
// std::vector, std::map, std::tuple, std::optional, structs with
// MSGPACK_DEFINE, and manta::ObjectRef / manta::ActorHandle.
//
// Blobs: a top-level std::vector of a numeric type (float, double, int32_t,
// uint8_t, ...) is written as one msgpack bin of its raw little-endian bytes,
// and a top-level std::string as one str: a single copy each way, no
// per-element encoding. Deserialize of such a vector also accepts a msgpack
// array of numbers. Inside other values (a struct member) vectors use the
// ordinary msgpack encoding.
//
// Errors: Serialize fails (InvalidArgument) only for values msgpack cannot
// hold (a blob over 4 GiB); Deserialize returns InvalidArgument naming the
// expected type when the bytes are not a value of it. Neither throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <msgpack.hpp>

#include "absl/status/statusor.h"

namespace manta {

// The value of a void task: msgpack nil.
struct Nil {
  MSGPACK_DEFINE();
};

namespace internal {

// A readable (demangled) name of a type, for error messages.
std::string TypeName(const std::type_info& type);
template <typename T>
std::string TypeName() {
  return TypeName(typeid(T));
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "blob encoding assumes a little-endian host");

template <typename T>
struct IsBlobVector : std::false_type {};
template <typename E, typename A>
struct IsBlobVector<std::vector<E, A>> : std::bool_constant<std::is_arithmetic_v<E> && !std::is_same_v<E, bool>> {};

// msgpack output stream appending to a std::string.
class StringWriter {
 public:
  explicit StringWriter(std::string* out) : out_(out) {}
  void write(const char* data, size_t size) { out_->append(data, size); }

 private:
  std::string* out_;
};

// The body of a msgpack str or bin at the start of `data` that spans all of
// it; false when `data` is something else.
bool ParseRawBody(std::string_view data, bool allow_str, bool allow_bin, std::string_view* body);

absl::Status DeserializeError(const std::string& type, const std::string& detail);

}  // namespace internal

template <typename T>
absl::StatusOr<std::string> Serialize(const T& value) {
  std::string out;
  internal::StringWriter writer(&out);
  msgpack::packer<internal::StringWriter> packer(writer);
  try {
    if constexpr (internal::IsBlobVector<T>::value) {
      using E = typename T::value_type;
      const size_t bytes = value.size() * sizeof(E);
      if (bytes > 0xffffffffu) {
        return absl::InvalidArgumentError("a serialized value is limited to 4 GiB");
      }
      out.reserve(bytes + 5);
      packer.pack_bin(static_cast<uint32_t>(bytes));
      out.append(reinterpret_cast<const char*>(value.data()), bytes);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (value.size() > 0xffffffffu) {
        return absl::InvalidArgumentError("a serialized value is limited to 4 GiB");
      }
      out.reserve(value.size() + 5);
      packer.pack(value);
    } else {
      packer.pack(value);
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError("cannot serialize " + internal::TypeName<T>() + ": " + e.what());
  }
  return out;
}

template <typename T>
absl::StatusOr<T> Deserialize(std::string_view data) {
  if constexpr (internal::IsBlobVector<T>::value) {
    using E = typename T::value_type;
    std::string_view body;
    if (internal::ParseRawBody(data, /*allow_str=*/false, /*allow_bin=*/true, &body)) {
      if (body.size() % sizeof(E) != 0) {
        return internal::DeserializeError(internal::TypeName<T>(), "blob of " + std::to_string(body.size()) +
                                                                       " bytes is not a whole number of elements");
      }
      T value(body.size() / sizeof(E));
      if (!body.empty()) std::memcpy(value.data(), body.data(), body.size());
      return value;
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    std::string_view body;
    if (internal::ParseRawBody(data, /*allow_str=*/true, /*allow_bin=*/true, &body)) {
      return std::string(body);
    }
  }
  try {
    size_t offset = 0;
    // A zone sized to the value: msgpack's default first chunk is 8 KiB, and
    // allocating it was most of the cost of decoding a small value.
    msgpack::zone zone(std::clamp<size_t>(2 * data.size() + 64, 256, 8192));
    msgpack::object object = msgpack::unpack(zone, data.data(), data.size(), offset);
    if (offset != data.size()) {
      return internal::DeserializeError(internal::TypeName<T>(),
                                        std::to_string(data.size() - offset) + " trailing bytes");
    }
    return object.as<T>();
  } catch (const std::exception& e) {
    return internal::DeserializeError(internal::TypeName<T>(), e.what());
  }
}

}  // namespace manta
