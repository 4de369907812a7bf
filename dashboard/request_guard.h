// The dashboard's guard: what every HTTP request passes before a handler
// sees it.
//
// DashboardFront is the front (common/http/http_front.h) the dashboard's
// accepting loop applies to a request's head before any of its body is
// read, and CheckRequest applies it again, with the browser rules, before
// each handler (httplib's pre-routing). In order:
//   1. a peer whose sign-ins keep failing waits (LoginThrottle): 429;
//   2. the credential, for every route but the web page's own files and
//      its sign-in (web_page.h): "Authorization: Bearer <token>", Ray's
//      "X-Ray-Authorization: Bearer <token>" (for proxies), or the page's
//      HttpOnly session cookie (SessionStore); 401 when missing, 403 when
//      wrong (skipped when the cluster runs with --auth=none);
//   3. the declared body size: above the route's limit (the package limit
//      for PUT /api/packages/..., the sign-in's for /api/login, the JSON
//      limit elsewhere) gets 413, a chunked body 411, before it is read;
//   4. browser cross-site markers (CheckRequest only): a request signed in
//      by cookie with "Sec-Fetch-Site: cross-site" gets 403; on mutating
//      methods (POST, PUT, PATCH, DELETE) so does any cross-site one, one
//      whose Origin is not the dashboard's own (its bind address, or the
//      Host it was sent to), and one signed in by cookie that carries no
//      Origin.
//
// The config is constant once the server serves (the sessions and the
// throttle are thread-safe); safe from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common/http/http_front.h"

namespace httplib {
struct Request;
}

namespace manta::dashboard {

class SessionStore;
class LoginThrottle;

struct GuardConfig {
  std::string token;  // empty: no token check (--auth=none)
  // "http://127.0.0.1:8265", ...: Origin values of the dashboard's own pages.
  std::set<std::string> allowed_origins;
  size_t max_json_bytes = 1 << 20;
  size_t max_package_bytes = 100 << 20;
  size_t max_login_bytes = 4 << 10;
  SessionStore* sessions = nullptr;   // the page's sign-ins; null: none is valid
  LoginThrottle* throttle = nullptr;  // null: failed sign-ins are not slowed
};

struct GuardVerdict {
  int status = 0;  // 0: allowed; else the HTTP status to answer with
  std::string message;
  bool allowed() const { return status == 0; }
};

// The Origin values a dashboard bound to `host`:`port` serves its own pages
// from (loopback binds also answer as localhost and 127.0.0.1).
std::set<std::string> OwnOrigins(const std::string& host, int port);

// Steps 1-3 above, for the dashboard's accepting loop.
http::FrontPolicy DashboardFront(std::shared_ptr<const GuardConfig> config);

// Steps 1-4, before each handler.
GuardVerdict CheckRequest(const GuardConfig& config, const httplib::Request& req);

}  // namespace manta::dashboard
