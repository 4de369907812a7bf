#include "dashboard/web_page.h"

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/token.h"
#include "dashboard/http_reply.h"
#include "dashboard/request_guard.h"
#include "dashboard/session_store.h"
#include "dashboard/web_assets.h"
#include "nlohmann/json.hpp"

namespace manta::dashboard {
namespace {

// The page loads only its own scripts and styles, and no other site may
// frame it.
void SecurityHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
}

}  // namespace

void RegisterWebPage(httplib::Server* server, std::shared_ptr<const GuardConfig> config) {
  for (const WebAsset& asset : WebAssets()) {
    server->Get(std::string(asset.path), [asset](const httplib::Request&, httplib::Response& res) {
      SecurityHeaders(res);
      res.set_header("Cache-Control", "no-cache");
      res.set_content(asset.bytes.data(), asset.bytes.size(), std::string(asset.content_type) + "; charset=utf-8");
    });
  }
  server->Post("/api/login", [config](const httplib::Request& req, httplib::Response& res) {
    SecurityHeaders(res);
    if (config->token.empty()) {  // --auth=none: nothing to sign in to
      res.status = 204;
      return;
    }
    nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("token") || !body["token"].is_string()) {
      return Text(res, 400, "Send {\"token\": \"<the cluster token>\"}.");
    }
    const std::string token = body["token"].get<std::string>();
    if (!TokenMatches(token, config->token)) {
      if (config->throttle != nullptr) config->throttle->Failed(req.remote_addr);
      return Text(res, 403, "Invalid cluster token.");
    }
    if (config->throttle != nullptr) config->throttle->Succeeded(req.remote_addr);
    if (config->sessions == nullptr) return Text(res, 503, "Sign-in sessions are not available.");
    res.status = 204;
    res.set_header("Set-Cookie", absl::StrCat(kSessionCookie, "=", config->sessions->Create(),
                                              "; HttpOnly; SameSite=Strict; Path=/; "
                                              "Max-Age=",
                                              absl::ToInt64Seconds(config->sessions->lifetime())));
  });
  server->Post("/api/logout", [config](const httplib::Request& req, httplib::Response& res) {
    SecurityHeaders(res);
    if (config->sessions != nullptr) config->sessions->Revoke(SessionIdFromCookies(req.get_header_value("Cookie")));
    res.status = 204;
    res.set_header("Set-Cookie", absl::StrCat(kSessionCookie, "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"));
  });
}

}  // namespace manta::dashboard
