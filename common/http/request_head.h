// RequestHead: an HTTP/1.1 request's line and headers, parsed before any of
// its body is read, and how its body is framed. Every HTTP server of Manta
// decides from it alone (http_front.h) whether to read the body at all.
//
//   absl::StatusOr<RequestHead> head = ParseRequestHead(bytes_up_to_the_blank_line);
//   if (head.ok() && head->framing == BodyFraming::kLength) ... head->content_length ...
//
// Errors (InvalidArgument, the reason in the message; the caller answers
// 400): a malformed request line or header, a Content-Length that is not a
// number or that differs from another Content-Length, Content-Length and
// Transfer-Encoding together (RFC 9112 6.1: the smuggling ambiguity), a
// Transfer-Encoding other than exactly "chunked" (Unimplemented: 501), and
// a Content-Encoding other than "identity" (Unimplemented: 415; a
// compressed body could grow past any limit once decoded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace manta::http {

// Debian's abseil has its own string_view: these cross between the two.
inline absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view StdView(absl::string_view s) { return std::string_view(s.data(), s.size()); }

enum class BodyFraming {
  kNone,     // neither Content-Length nor Transfer-Encoding: no body (RFC 9112 6.3)
  kLength,   // Content-Length: content_length bytes
  kChunked,  // Transfer-Encoding: chunked
};

struct RequestHead {
  std::string method;
  std::string target;  // as sent: path and query, percent-encoded
  std::string path;    // target without its query, still encoded
  std::string version;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, values trimmed
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  std::string peer_ip;  // set by the server that read it

  // The value of the first header named `name` (any case), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// Parses `head`, the bytes of a request up to and including the blank line
// that ends its headers.
absl::StatusOr<RequestHead> ParseRequestHead(std::string_view head);

// The HTTP status an error of ParseRequestHead is answered with.
int HeadErrorStatus(const absl::Status& error);

// Reads a chunked body (RFC 9112 7.1) as its bytes arrive, keeping at most
// `max_bytes` of data. Trailers are read and dropped.
class ChunkedDecoder {
 public:
  enum class State { kMore, kDone, kTooLarge, kMalformed };
  explicit ChunkedDecoder(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Feeds bytes of the body; returns what the decoder knows then. Bytes after
  // the end of the body are counted in excess().
  State Feed(std::string_view bytes);
  State state() const { return state_; }
  const std::string& body() const { return body_; }
  std::string TakeBody() { return std::move(body_); }
  size_t excess() const { return excess_; }

 private:
  enum class Part { kSize, kData, kDataEnd, kTrailer };
  State Fail(State s) { return state_ = s; }

  const uint64_t max_bytes_;
  State state_ = State::kMore;
  Part part_ = Part::kSize;
  std::string line_;  // a size or trailer line being read
  uint64_t chunk_left_ = 0;
  size_t trailer_bytes_ = 0;
  std::string body_;
  size_t excess_ = 0;
};

}  // namespace manta::http
