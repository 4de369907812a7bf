// HTTP/2 bytes as a client writes them, for the tests of what reads them
// (the connection gate, the first-request parser, the refusing connection).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "common/rpc/http2_frames.h"

namespace manta::rpc::testing {

// The connection preface a client sends before any frame.
constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

inline std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string out;
  http2::AppendFrame(&out, type, flags, stream, payload);
  return out;
}

// A header block of literal fields (no Huffman coding, no indexing).
inline std::string Block(std::initializer_list<std::pair<std::string, std::string>> headers) {
  std::string b;
  for (const auto& [name, value] : headers) {
    b.push_back('\0');
    b.push_back(static_cast<char>(name.size()));
    b.append(name);
    b.push_back(static_cast<char>(value.size()));
    b.append(value);
  }
  return b;
}

}  // namespace manta::rpc::testing
