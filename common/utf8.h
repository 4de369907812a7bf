// UTF-8 helpers for text that goes into protobuf `string` fields, which must
// be valid UTF-8 (a peer refuses the whole message otherwise).
#pragma once

#include <cstddef>
#include <string_view>

namespace manta {

// The longest prefix of `s` of at most `max` bytes that does not split a
// UTF-8 character.
std::string_view Utf8Prefix(std::string_view s, size_t max);

}  // namespace manta
