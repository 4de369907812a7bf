// The start of an HTTP/2 connection from a gRPC client, read before any of
// it reaches gRPC: the client preface, the frames a client may send before
// its first request (SETTINGS, WINDOW_UPDATE, PING, PRIORITY), and the
// HEADERS (with its CONTINUATIONs) of that first request, whose header block
// is decoded with nghttp2's HPACK decoder. A ConnectionGate reads this with
// MSG_PEEK to check the cluster token before gRPC reads a byte of the body
// (and answers a refused connection itself: refusing_connection.h).
//
// Pure functions of their input: no I/O, safe from any thread.
//
//   FirstRequest r = ParseFirstRequest(peeked);
//   if (r.kind == FirstRequest::kNeedMore) wait until r.need bytes are there;
//   if (r.kind == FirstRequest::kHeaders && !r.authorization) refuse it;
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace manta::rpc {

// The longest start of a connection looked at: a first request whose
// headers end later is refused as not HTTP/2 from a gRPC client.
inline constexpr size_t kMaxFirstRequestBytes = 64 << 10;

struct FirstRequest {
  enum Kind {
    kNeedMore,  // a valid start so far; `need` bytes in all are wanted at least
    kHeaders,   // the first request's headers are complete
    kInvalid,   // not the start of an HTTP/2 connection from a gRPC client (`error` says why)
  };
  Kind kind = kNeedMore;
  size_t need = 0;
  uint32_t stream_id = 0;
  std::string path;                          // ":path", e.g. "/manta.rpc.KvGcsService/Put"
  std::optional<std::string> authorization;  // the "authorization" header, when sent
  std::string error;
};

// Reads `bytes`, the first bytes a client sent on a connection.
FirstRequest ParseFirstRequest(std::string_view bytes);

}  // namespace manta::rpc
