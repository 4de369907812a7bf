#include "common/utf8.h"

namespace manta {

std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  // Back up over continuation bytes (10xxxxxx) to the lead byte, and drop it.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace manta
