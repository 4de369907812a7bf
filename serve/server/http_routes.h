// The server's HTTP routes, JetStream's HTTP API:
//   POST /generate     {"prompt", "max_tokens", "stream", ...} -> {"response"} or server-sent events
//   GET  /healthcheck  200 once the engine has warmed up, else 503
// With a token, every route needs "Authorization: Bearer <token>" (401
// without it, before any of the body is read). A body larger than
// max_body_bytes is a 413 before it is read (chunked bodies too, as they
// arrive); a body is JSON whatever its Content-Type says (curl -d sends a
// form's). A bad request is a 400 saying why; a request the server cannot
// serve now (not warm, stopping, its group failed) is a 503, never a wait.
// Requests in flight when the group fails end at once with 503; a request
// whose client hung up is dropped by the batcher.
#pragma once

#include <cstdint>
#include <string>

#include "common/http/gated_http_server.h"
#include "serve/server/serving_loop.h"

namespace manta::serve {

struct RouteOptions {
  std::string token;              // empty: no check (--auth=none)
  int64_t max_prompt_tokens = 0;  // max_prefill_predict_length
  int64_t default_max_tokens = 0;
  size_t max_body_bytes = 1 << 20;
};

// `loop` and `tokenizer` outlive the server's handlers.
void InstallRoutes(http::GatedHttpServer* server, ServingLoop* loop, const train::Tokenizer* tokenizer,
                   const RouteOptions& options);

}  // namespace manta::serve
