// HttpFront: what every HTTP server of Manta (the dashboard, the model
// server and a serving group's leader, every daemon's metrics port) decides
// about a request from its head alone, before one byte of its body is read:
//
//   1. `precheck` (e.g. a peer that failed to sign in too often: 429);
//   2. the route: a method and path of the server's table, or none;
//   3. the credential, for every route that is not public and for every
//      unknown path (so an unauthenticated client learns nothing of the
//      routes): 401 without one, `wrong_credential_status` with a wrong one;
//   4. 405 for a known path with another method, 404 for an unknown one;
//   5. the body: a Content-Length above the route's limit gets 413, a
//      chunked body 411 unless the route takes one (read whole, up to its
//      limit, before the handler runs).
//
// GatedHttpServer (gated_http_server.h) applies it on its accepting thread:
// a refused request's body is never read and never reaches a pool thread.
//
//   FrontPolicy front;
//   front.routes = {{"GET", "/metrics"}};
//   front.authenticate = BearerToken(token);
//   server.SetFront(std::move(front));
//
// A policy is constant once the server serves; its functions may run on
// the server's accepting thread concurrently with handlers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/http/request_head.h"

namespace manta::http {

struct FrontRoute {
  std::string method;  // "GET", "POST", ... or "*" for any
  std::string path;    // exact, or a prefix when it ends in '*' ("/api/*", "*")
  bool is_public = false;
  uint64_t max_body = 0;   // largest body taken (0: none)
  bool chunked = false;    // a chunked body is taken (up to max_body)
  bool json_body = false;  // the body is JSON whatever its Content-Type says
};

enum class Credential { kNone, kValid, kWrong };

struct FrontVerdict {
  int status = 0;  // 0: accepted; else the status of the refusal
  std::string message;
  std::vector<std::pair<std::string, std::string>> headers;  // WWW-Authenticate, Retry-After, ...
  // Accepted: the matched route's limits.
  uint64_t max_body = 0;
  bool json_body = false;
  bool is_public = false;
  bool accepted() const { return status == 0; }
};

struct FrontPolicy {
  std::vector<FrontRoute> routes;  // the first that matches wins
  // The request's credential; null: no check (--auth=none).
  std::function<Credential(const RequestHead&)> authenticate;
  int wrong_credential_status = 401;
  std::string wrong_credential_message = "wrong cluster token";
  // A refusal decided before the route (nullopt: go on).
  std::function<std::optional<FrontVerdict>(const RequestHead&)> precheck;
  // Refusals as JSON ({"error": "..."}) rather than plain text.
  bool json_errors = false;
};

FrontVerdict CheckFront(const FrontPolicy& policy, const RequestHead& head);

// A whole HTTP/1.1 response refusing a request (Connection: close).
std::string RefusalResponse(const FrontVerdict& verdict, bool json);

// The credential of "Authorization: Bearer <token>" (any case of "Bearer"),
// compared in constant time with `token`.
Credential BearerCredential(const RequestHead& head, const std::string& token);

}  // namespace manta::http
