#include "dashboard/request_guard.h"

#include <httplib.h>

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/token.h"
#include "dashboard/session_store.h"
#include "dashboard/web_assets.h"
#include "dashboard/web_page.h"

namespace manta::dashboard {
namespace {

bool IsMutating(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// How a request presents its credential: a header (Authorization, or Ray's
// X-Ray-Authorization for proxies that keep Authorization for themselves),
// or the page's session cookie.
enum class Presented { kNone, kHeader, kCookie };

Presented PresentedBy(const http::RequestHead& head, std::string* value) {
  for (const char* name : {"Authorization", "X-Ray-Authorization"}) {
    if (std::optional<std::string_view> h = head.Header(name); h.has_value()) {
      *value = std::string(TokenFromAuthorization(*h));
      return Presented::kHeader;
    }
  }
  std::string cookie = SessionIdFromCookies(head.Header("Cookie").value_or(""));
  if (cookie.empty()) return Presented::kNone;
  *value = std::move(cookie);
  return Presented::kCookie;
}

http::Credential Authenticate(const GuardConfig& config, const http::RequestHead& head) {
  std::string value;
  switch (PresentedBy(head, &value)) {
    case Presented::kNone:
      return http::Credential::kNone;
    case Presented::kHeader:
      return !value.empty() && TokenMatches(value, config.token) ? http::Credential::kValid : http::Credential::kWrong;
    case Presented::kCookie:
      return config.sessions != nullptr && config.sessions->Valid(value) ? http::Credential::kValid
                                                                         : http::Credential::kWrong;
  }
  return http::Credential::kNone;
}

// The front of `config`, which must outlive it.
http::FrontPolicy FrontFor(const GuardConfig* config) {
  http::FrontPolicy front;
  for (const WebAsset& asset : WebAssets()) {
    front.routes.push_back({.method = "GET", .path = std::string(asset.path), .is_public = true});
  }
  front.routes.push_back({.method = "POST",
                          .path = "/api/login",
                          .is_public = true,
                          .max_body = config->max_login_bytes,
                          .json_body = true});
  front.routes.push_back({.method = "POST", .path = "/api/logout", .is_public = true});
  front.routes.push_back({.method = "PUT", .path = "/api/packages/*", .max_body = config->max_package_bytes});
  // Every other path (the Jobs API, the State API, and what is not there)
  // needs the credential first.
  front.routes.push_back({.method = "*", .path = "*", .max_body = config->max_json_bytes});
  if (!config->token.empty()) {
    front.authenticate = [config](const http::RequestHead& head) { return Authenticate(*config, head); };
  }
  front.wrong_credential_status = 403;
  front.wrong_credential_message = "Invalid cluster token.";  // as the dashboard always said
  front.precheck = [config](const http::RequestHead& head) -> std::optional<http::FrontVerdict> {
    if (config->throttle == nullptr || head.method != "POST" || head.path != "/api/login") return std::nullopt;
    absl::Duration wait = config->throttle->Wait(head.peer_ip);
    if (wait <= absl::ZeroDuration()) return std::nullopt;
    http::FrontVerdict v;
    v.status = 429;
    int64_t seconds = static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(wait)));
    v.message = absl::StrCat("too many failed sign-ins from this address: try again in ", seconds, " s");
    v.headers.emplace_back("Retry-After", std::to_string(seconds));
    return v;
  };
  return front;
}

// The head of a request httplib has read, parsed again as the front parses
// heads.
absl::StatusOr<http::RequestHead> HeadOf(const httplib::Request& req) {
  std::string text = absl::StrCat(req.method, " ", req.target.empty() ? req.path : req.target, " ",
                                  req.version.empty() ? "HTTP/1.1" : req.version, "\r\n");
  for (const auto& [name, value] : req.headers) absl::StrAppend(&text, name, ": ", value, "\r\n");
  absl::StrAppend(&text, "\r\n");
  absl::StatusOr<http::RequestHead> head = http::ParseRequestHead(text);
  if (head.ok()) head->peer_ip = req.remote_addr;
  return head;
}

// A page's own origin: one of the dashboard's, or the one the request was
// sent to (a dashboard bound to every address is reached by many names).
bool OwnOrigin(const GuardConfig& config, const httplib::Request& req, const std::string& origin) {
  return config.allowed_origins.count(origin) > 0 ||
         (req.has_header("Host") && origin == "http://" + req.get_header_value("Host"));
}

}  // namespace

std::set<std::string> OwnOrigins(const std::string& host, int port) {
  std::set<std::string> origins = {absl::StrCat("http://", host, ":", port)};
  if (host == "127.0.0.1" || host == "0.0.0.0" || host == "localhost") {
    origins.insert(absl::StrCat("http://127.0.0.1:", port));
    origins.insert(absl::StrCat("http://localhost:", port));
  }
  return origins;
}

http::FrontPolicy DashboardFront(std::shared_ptr<const GuardConfig> config) {
  http::FrontPolicy front = FrontFor(config.get());
  // The policy's functions hold the config alive.
  auto authenticate = std::move(front.authenticate);
  if (authenticate) {
    front.authenticate = [config, authenticate](const http::RequestHead& head) { return authenticate(head); };
  }
  auto precheck = std::move(front.precheck);
  front.precheck = [config, precheck](const http::RequestHead& head) { return precheck(head); };
  return front;
}

GuardVerdict CheckRequest(const GuardConfig& config, const httplib::Request& req) {
  const absl::StatusOr<http::RequestHead> parsed = HeadOf(req);
  if (!parsed.ok()) return {http::HeadErrorStatus(parsed.status()), std::string(parsed.status().message())};
  const http::RequestHead& head = *parsed;
  const http::FrontVerdict front = http::CheckFront(FrontFor(&config), head);
  if (!front.accepted()) return {front.status, front.message};
  std::string unused;
  const Presented presented = config.token.empty() ? Presented::kNone : PresentedBy(head, &unused);
  const bool cross_site = absl::AsciiStrToLower(req.get_header_value("Sec-Fetch-Site")) == "cross-site";
  // A cookie is the browser's: a request another site made it send is refused.
  if (presented == Presented::kCookie && cross_site) return {403, "Cross-site requests are refused."};
  if (IsMutating(req.method)) {
    if (cross_site) return {403, "Cross-site requests may not change jobs."};
    const std::string origin = req.get_header_value("Origin");
    if (req.has_header("Origin") && !OwnOrigin(config, req, origin)) {
      return {403, absl::StrCat("Requests from origin '", origin.substr(0, 200), "' may not change jobs.")};
    }
    // Browsers send Origin with every POST; a cookie without it is not the page's.
    if (presented == Presented::kCookie && !req.has_header("Origin")) {
      return {403, "A request signed in by cookie must come from the dashboard's page (no Origin header)."};
    }
  }
  return {};
}

}  // namespace manta::dashboard
