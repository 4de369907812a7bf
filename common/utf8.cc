#include "common/utf8.h"

namespace manta {

std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  // Back up over continuation bytes (10xxxxxx) to the lead byte, and drop it.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

namespace {

// The length of the well-formed sequence at the start of `s`, or 0.
size_t SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t run = 0;  // start of the valid bytes not yet copied
  for (size_t i = 0; i < s.size();) {
    const size_t n = SequenceLength(s.substr(i));
    if (n > 0) {
      i += n;
      continue;
    }
    out.append(s.data() + run, i - run);
    out += "\xEF\xBF\xBD";  // U+FFFD
    run = ++i;
  }
  out.append(s.data() + run, s.size() - run);
  return out;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = SequenceLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string PrintableAscii(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace manta
