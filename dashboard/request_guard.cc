#include "dashboard/request_guard.h"

#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/token.h"
#include "dashboard/web_page.h"

namespace manta::dashboard {
namespace {

bool IsMutating(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// The value of cookie `name` in a Cookie header ("a=1; manta_token=..."), or "".
std::string CookieValue(const std::string& header, const std::string& name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) return std::string(part);
  }
  return {};
}

// Where the token came from.
enum class Credential { kNone, kHeader, kCookie };

// The token the request presents: "Authorization: Bearer", Ray's
// "X-Ray-Authorization: Bearer" (for proxies that keep Authorization for
// themselves), or the page's cookie.
Credential Presented(const httplib::Request& req, std::string* token) {
  for (const char* header : {"Authorization", "X-Ray-Authorization"}) {
    if (req.has_header(header)) {
      *token = std::string(TokenFromAuthorization(req.get_header_value(header)));
      return Credential::kHeader;
    }
  }
  std::string cookie = CookieValue(req.get_header_value("Cookie"), kTokenCookie);
  if (!cookie.empty()) {
    *token = std::move(cookie);
    return Credential::kCookie;
  }
  return Credential::kNone;
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

size_t BodyLimit(const GuardConfig& config, std::string_view method, std::string_view path) {
  if (method == "PUT" && path.substr(0, 14) == "/api/packages/") return config.max_package_bytes;
  return config.max_json_bytes;
}

GuardVerdict CheckRequest(const GuardConfig& config, const httplib::Request& req) {
  Credential credential = Credential::kNone;
  if (!config.token.empty() && !IsPublicRoute(req.method, req.path)) {
    std::string presented;
    credential = Presented(req, &presented);
    if (credential == Credential::kNone) {
      return {401, "Missing cluster token: send 'Authorization: Bearer <token>' (the token file is in the "
                   "session directory on the head node), or sign in on the dashboard's page."};
    }
    if (presented.empty() || !TokenMatches(presented, config.token)) return {403, "Invalid cluster token."};
  }
  const bool cross_site = absl::AsciiStrToLower(req.get_header_value("Sec-Fetch-Site")) == "cross-site";
  // A cookie is the browser's: a request another site made it send is refused.
  if (credential == Credential::kCookie && cross_site) return {403, "Cross-site requests are refused."};
  if (IsMutating(req.method)) {
    if (cross_site) return {403, "Cross-site requests may not change jobs."};
    const std::string origin = req.get_header_value("Origin");
    if (req.has_header("Origin") && !OwnOrigin(config, req, origin)) {
      return {403, absl::StrCat("Requests from origin '", origin.substr(0, 200), "' may not change jobs.")};
    }
    // Browsers send Origin with every POST; a cookie without it is not the page's.
    if (credential == Credential::kCookie && !req.has_header("Origin")) {
      return {403, "A request signed in by cookie must come from the dashboard's page (no Origin header)."};
    }
  }
  if (!req.has_header("Content-Length") && req.has_header("Transfer-Encoding")) {
    // A body of undeclared size could only be refused after reading up to
    // the limit; every client of this API (Ray's included) declares it.
    return {411, "Send request bodies with a Content-Length header (chunked uploads are not accepted)."};
  }
  if (req.has_header("Content-Length")) {
    uint64_t length = 0;
    if (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) {
      return {400, "Invalid Content-Length header."};
    }
    size_t limit = BodyLimit(config, req.method, req.path);
    if (length > limit) {
      return {413, absl::StrCat("Request body of ", length, " bytes is larger than the limit of ", limit,
                                " bytes for this route.")};
    }
  }
  return {};
}

}  // namespace manta::dashboard
