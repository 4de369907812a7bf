// The limits of an HTTP server of Manta (gated_http_server.h).
#pragma once

#include <cstddef>

#include "absl/time/time.h"

namespace manta::http {

struct HttpLimits {
  int threads = 24;
  int max_connections = 0;  // 0: a quarter of the descriptor limit
  absl::Duration header_deadline = absl::Seconds(10);
  absl::Duration pressure_deadline = absl::Seconds(1);
  size_t max_header_bytes = 64 << 10;
  double min_body_bytes_per_second = 64 << 10;
  absl::Duration body_grace = absl::Seconds(10);
  absl::Duration io_timeout = absl::Seconds(30);  // one read or write of a response
  // Bodies up to this size are read whole by the accepting loop.
  size_t max_loop_body_bytes = 1 << 20;
  size_t max_loop_buffered_bytes = 64 << 20;
  // Larger bodies (a token holder's uploads) read by pool threads, per peer.
  int max_uploads_per_peer = 4;
  // Connections of one peer reading the body of a public route (a sign-in).
  int max_public_bodies_per_peer = 32;
};

}  // namespace manta::http
