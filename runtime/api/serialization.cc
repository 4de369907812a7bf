#include "manta/serialization.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace manta::internal {

std::string TypeName(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                   std::free);
  if (status != 0 || demangled == nullptr) return type.name();
  std::string name = demangled.get();
  // Spell the standard strings as users write them.
  constexpr std::string_view kLongString =
      "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
  for (size_t at = name.find(kLongString); at != std::string::npos; at = name.find(kLongString)) {
    name.replace(at, kLongString.size(), "std::string");
  }
  return name;
}

namespace {

uint32_t ReadBigEndian(const unsigned char* p, int bytes) {
  uint32_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | p[i];
  return value;
}

}  // namespace

bool ParseRawBody(std::string_view data, bool allow_str, bool allow_bin, std::string_view* body) {
  if (data.empty()) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t header = 0;
  size_t length = 0;
  const unsigned char tag = p[0];
  if (allow_str && tag >= 0xa0 && tag <= 0xbf) {
    header = 1;
    length = tag & 0x1f;
  } else if ((allow_str && tag == 0xd9) || (allow_bin && tag == 0xc4)) {
    header = 2;
  } else if ((allow_str && tag == 0xda) || (allow_bin && tag == 0xc5)) {
    header = 3;
  } else if ((allow_str && tag == 0xdb) || (allow_bin && tag == 0xc6)) {
    header = 5;
  } else {
    return false;
  }
  if (data.size() < header) return false;
  if (header > 1) length = ReadBigEndian(p + 1, static_cast<int>(header - 1));
  if (data.size() != header + length) return false;
  *body = data.substr(header);
  return true;
}

absl::Status DeserializeError(const std::string& type, const std::string& detail) {
  return absl::InvalidArgumentError("cannot deserialize a value of type " + type + ": " + detail);
}

}  // namespace manta::internal
