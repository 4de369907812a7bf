// SHA-256 of bytes, as 64 lowercase hex digits: the name of what is stored
// by its content (job packages, a Python job's functions), so that nothing
// can be stored under a name its bytes do not have.
#pragma once

#include <string>
#include <string_view>

namespace manta {

std::string Sha256Hex(std::string_view data);

}  // namespace manta
