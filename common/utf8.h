// UTF-8 helpers for text that goes into protobuf `string` fields, which must
// be valid UTF-8 (a peer refuses the whole message otherwise).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace manta {

// The longest prefix of `s` of at most `max` bytes that does not split a
// UTF-8 character.
std::string_view Utf8Prefix(std::string_view s, size_t max);

// `s` with every byte that does not belong to a well-formed UTF-8 sequence
// (stray or missing continuation bytes, overlong forms, surrogates, values
// past U+10FFFF) replaced by U+FFFD. Valid text comes back unchanged.
std::string ValidUtf8(std::string_view s);

// Whether every byte of `s` belongs to a well-formed UTF-8 sequence (the
// rules of ValidUtf8); JSON and protobuf text must be.
bool IsValidUtf8(std::string_view s);

// The first `max` bytes of `s` (then "..."), each byte outside printable
// ASCII shown as '?': untrusted text safe to quote in a message.
std::string PrintableAscii(std::string_view s, size_t max);

// `s` safe to print on a terminal: C0 control characters, DEL, C1 control
// characters (U+0080-U+009F) and bytes that are not UTF-8 are shown as
// escapes ("\e", "\n", "\t", "\x9b"); other text is unchanged. A name from a
// user can then neither move the cursor nor split a table's row.
std::string EscapeForTerminal(std::string_view s);

// Gathers bytes that arrive in pieces (tokens, reads of a file) and hands
// out only whole UTF-8 characters, so a character split over two pieces is
// never sent in halves; what is not UTF-8 comes out as U+FFFD.
class Utf8Pieces {
 public:
  // The bytes that complete characters now (possibly empty).
  std::string Add(std::string_view bytes);
  // What is left at the end (an incomplete character, replaced).
  std::string Flush();

 private:
  std::string pending_;
};

}  // namespace manta
