// RequestGuard: the checks every HTTP request passes before a handler sees
// it, in this order:
//   1. the cluster token, for every route but the web page's own files and
//      its sign-in (web_page.h): "Authorization: Bearer <token>", Ray's
//      "X-Ray-Authorization: Bearer <token>" (for proxies), or the page's
//      HttpOnly cookie; 401 when missing, 403 when wrong (skipped when the
//      cluster runs with --auth=none);
//   2. browser cross-site markers: a request signed in by cookie with
//      "Sec-Fetch-Site: cross-site" gets 403; on mutating methods (POST,
//      PUT, PATCH, DELETE) so does any cross-site one, one whose Origin is
//      not the dashboard's own (its bind address, or the Host it was sent
//      to), and one signed in by cookie that carries no Origin;
//   3. the declared body size: Content-Length above the route's limit (the
//      package limit for PUT /api/packages/..., the JSON limit elsewhere) gets
//      413 before any of the body is read; a body without Content-Length
//      (chunked) gets 411, since it could only be refused after reading it.
// The dashboard runs it as httplib's pre-routing handler and its
// "Expect: 100-continue" handler, so a refused upload is never read.
//
// Constant after construction; safe from any thread.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

namespace httplib {
struct Request;
}

namespace manta::dashboard {

struct GuardConfig {
  std::string token;  // empty: no token check (--auth=none)
  // "http://127.0.0.1:8265", ...: Origin values of the dashboard's own pages.
  std::set<std::string> allowed_origins;
  size_t max_json_bytes = 1 << 20;
  size_t max_package_bytes = 100 << 20;
};

struct GuardVerdict {
  int status = 0;  // 0: allowed; else the HTTP status to answer with
  std::string message;
  bool allowed() const { return status == 0; }
};

// The Origin values a dashboard bound to `host`:`port` serves its own pages
// from (loopback binds also answer as localhost and 127.0.0.1).
std::set<std::string> OwnOrigins(const std::string& host, int port);

// The body limit of a route: max_package_bytes for PUT under /api/packages/,
// max_json_bytes otherwise.
size_t BodyLimit(const GuardConfig& config, std::string_view method, std::string_view path);

GuardVerdict CheckRequest(const GuardConfig& config, const httplib::Request& req);

}  // namespace manta::dashboard
