// The dashboard's web page at `/` (web_assets.h) and its sign-in.
//
// The page asks for the cluster token once and sends it to POST /api/login
// ({"token": "..."}), which answers 204 with an HttpOnly, SameSite=Strict
// cookie holding it: later requests from the page carry the cookie, the
// page's script never sees the token, and a page on another site cannot
// make the browser send it. POST /api/logout clears the cookie. The page
// and its static files need no token; everything under /api/ does
// (request_guard.h).
//
// Constant after Register; handlers run on the HTTP server's threads.
#pragma once

#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace manta::dashboard {

struct GuardConfig;

// The cookie that carries the token.
inline constexpr char kTokenCookie[] = "manta_token";

// Whether a request for `method` `path` needs no token: the page, its
// static files and the sign-in itself.
bool IsPublicRoute(const std::string& method, const std::string& path);

// Serves the page, its static files, /api/login and /api/logout.
void RegisterWebPage(httplib::Server* server, std::shared_ptr<const GuardConfig> config);

}  // namespace manta::dashboard
