// The dashboard's web page at `/` (web_assets.h) and its sign-in.
//
// The page asks for the cluster token once and sends it to POST /api/login
// ({"token": "..."}), which answers 204 with an HttpOnly, SameSite=Strict
// cookie holding a new session's id (session_store.h), never the token:
// later requests from the page carry the cookie, the page's script never
// sees the token, a page on another site cannot make the browser send it,
// and the session ends after its lifetime or at POST /api/logout, which
// revokes it. A peer's failed sign-ins slow it down (429 with Retry-After).
// The page and its static files need no token; everything under /api/ does
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

// Serves the page, its static files, /api/login and /api/logout (whose
// sessions and throttle are the config's).
void RegisterWebPage(httplib::Server* server, std::shared_ptr<const GuardConfig> config);

}  // namespace manta::dashboard
