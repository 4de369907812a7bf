// RefusingConnection: the server side of an HTTP/2 connection whose first
// request came without the cluster token, kept by a ConnectionGate for a
// short while instead of gRPC. Every request on it without the token is
// answered UNAUTHENTICATED at once (trailers-only, then RST_STREAM NO_ERROR
// so the client stops sending the body); SETTINGS and PINGs are
// acknowledged; DATA is dropped unread beyond its frame header. Since no
// WINDOW_UPDATE is ever sent, a client can send at most 64 KiB of bodies on
// the whole connection. A request that does carry the token ends the
// connection with a GOAWAY that leaves it unprocessed, so the client sends
// it again on a new connection, which the gate hands to gRPC.
//
// Pure: bytes in, bytes to send out; the gate does the I/O. Not thread-safe
// (one gate thread owns each).
//
//   RefusingConnection r("missing cluster token", token);
//   std::string out = r.Consume(bytes_read);   // send `out`
//   if (r.done()) { send(r.Goaway()); close(); }
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/rpc/http2_frames.h"

namespace manta::rpc {

class RefusingConnection {
 public:
  // Requests past this many are not answered: the connection ends.
  static constexpr int kMaxAnswered = 1000;

  RefusingConnection(std::string message, std::string token) : message_(std::move(message)), token_(std::move(token)) {}

  // Takes the next bytes the client sent (from the very first: the preface
  // is checked) and returns what to send back.
  std::string Consume(std::string_view bytes);
  // The connection should end: the client sent GOAWAY, broke the protocol,
  // made kMaxAnswered requests, or made one with the token.
  bool done() const { return done_; }
  // The last frame to send before closing.
  std::string Goaway() const;
  int answered() const { return answered_; }

 private:
  // Handles one complete frame; appends the answer to `out`.
  void OnFrame(const http2::FrameHeader& h, std::string_view payload, std::string* out);
  // A request's header block is complete: refuses it, or steps aside.
  void OnRequest(std::string* out);

  const std::string message_;
  const std::string token_;
  http2::HeaderDecoder decoder_;
  std::string block_;          // the header block being received
  uint32_t block_stream_ = 0;  // its stream; 0: none
  std::string buffer_;         // bytes not yet parsed
  bool preface_ = false;       // the client preface was seen
  size_t skip_ = 0;            // bytes of a DATA payload still to drop unbuffered
  uint32_t last_stream_ = 0;
  int answered_ = 0;
  bool done_ = false;
};

}  // namespace manta::rpc
