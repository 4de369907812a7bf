// The few HTTP/2 frames (RFC 9113) a ConnectionGate reads and writes itself
// before, or instead of, handing a connection to gRPC: frame headers, the
// server's preface, and the answers that refuse a gRPC request. Pure; safe
// from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

struct nghttp2_hd_inflater;

namespace manta::rpc::http2 {

inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr size_t kFrameHeaderSize = 9;
// A client may not send larger frames until the server allows them, and
// the gate never does (SETTINGS_MAX_FRAME_SIZE's default).
inline constexpr uint32_t kMaxFrameSize = 16384;

enum FrameType : uint8_t {
  kData = 0,
  kHeaders = 1,
  kPriority = 2,
  kRstStream = 3,
  kSettings = 4,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
  kContinuation = 9,
};
inline constexpr uint8_t kEndStream = 0x1;
inline constexpr uint8_t kAck = 0x1;
inline constexpr uint8_t kEndHeaders = 0x4;
inline constexpr uint8_t kPadded = 0x8;
inline constexpr uint8_t kPriorityFlag = 0x20;

struct FrameHeader {
  uint32_t length = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream = 0;  // without the reserved bit
};

// `bytes` holds at least kFrameHeaderSize bytes.
FrameHeader ReadFrameHeader(std::string_view bytes);
// A HEADERS frame's header block fragment, without its padding and
// priority fields; false when they do not fit the payload.
bool HeaderFragment(const FrameHeader& headers, std::string_view payload, std::string_view* fragment);

// Decodes the header blocks a client sends on one connection, in order
// (HPACK's table carries over from block to block): nghttp2's decoder.
class HeaderDecoder {
 public:
  using Emit = std::function<void(std::string_view name, std::string_view value)>;
  HeaderDecoder();
  ~HeaderDecoder();
  HeaderDecoder(const HeaderDecoder&) = delete;
  HeaderDecoder& operator=(const HeaderDecoder&) = delete;
  // Calls `emit` for each field of the complete block `block`; false when
  // it does not decode (the connection's table is then unusable).
  bool Decode(std::string_view block, const Emit& emit);

 private:
  nghttp2_hd_inflater* inflater_ = nullptr;
};
void AppendFrame(std::string* out, uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload);

// The server's connection preface: a SETTINGS frame with every setting at
// its default. A gRPC client sends no request before the server's SETTINGS
// arrive; gRPC's own SETTINGS follow when the connection is handed over (a
// client acknowledges each).
std::string ServerPreface();
// Refuses the request on `stream` with UNAUTHENTICATED (grpc-status 16) and
// `message`: a trailers-only answer, then RST_STREAM NO_ERROR, which tells
// the client to stop sending the body and end the call with that status.
std::string Unauthenticated(uint32_t stream, std::string_view message);
// GOAWAY, NO_ERROR: `last_stream` is the last request processed; a client
// sends its later ones again on a new connection.
std::string Goaway(uint32_t last_stream);

}  // namespace manta::rpc::http2
