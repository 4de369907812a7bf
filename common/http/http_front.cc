#include "common/http/http_front.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/token.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace manta::http {
namespace {

bool PathMatches(const std::string& pattern, const std::string& path) {
  if (!pattern.empty() && pattern.back() == '*') return absl::StartsWith(path, pattern.substr(0, pattern.size() - 1));
  return pattern == path;
}

FrontVerdict Refused(int status, std::string message) {
  FrontVerdict v;
  v.status = status;
  v.message = std::move(message);
  return v;
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

}  // namespace

FrontVerdict CheckFront(const FrontPolicy& policy, const RequestHead& head) {
  if (policy.precheck) {
    if (std::optional<FrontVerdict> v = policy.precheck(head); v.has_value()) return *v;
  }
  const FrontRoute* route = nullptr;
  bool path_known = false;
  for (const FrontRoute& r : policy.routes) {
    if (!PathMatches(r.path, head.path)) continue;
    path_known = true;
    if (r.method == "*" || r.method == head.method || (r.method == "GET" && head.method == "HEAD")) {
      route = &r;
      break;
    }
  }
  if ((route == nullptr || !route->is_public) && policy.authenticate) {
    switch (policy.authenticate(head)) {
      case Credential::kValid:
        break;
      case Credential::kNone: {
        FrontVerdict v = Refused(401,
                                 "missing cluster token: send \"Authorization: Bearer <token>\" (the token "
                                 "file is in the session directory on the head node)");
        v.headers.emplace_back("WWW-Authenticate", "Bearer");
        return v;
      }
      case Credential::kWrong: {
        FrontVerdict v = Refused(policy.wrong_credential_status, policy.wrong_credential_message);
        if (policy.wrong_credential_status == 401) v.headers.emplace_back("WWW-Authenticate", "Bearer");
        return v;
      }
    }
  }
  if (route == nullptr) {
    if (path_known) return Refused(405, absl::StrCat(PrintableAscii(head.method, 20), " is not allowed here"));
    return Refused(404,
                   absl::StrCat("no route for ", PrintableAscii(head.method, 20), " ", PrintableAscii(head.path, 200)));
  }
  if (head.framing == BodyFraming::kChunked && !route->chunked) {
    return Refused(411, "send the body with a Content-Length header (chunked bodies are not taken here)");
  }
  if (head.framing == BodyFraming::kLength && head.content_length > route->max_body) {
    return Refused(413, route->max_body == 0
                            ? std::string("this route takes no request body")
                            : absl::StrCat("the body of ", head.content_length, " bytes is larger than the ",
                                           route->max_body, " bytes this route takes"));
  }
  FrontVerdict accepted;
  accepted.max_body = route->max_body;
  accepted.json_body = route->json_body;
  accepted.is_public = route->is_public;
  return accepted;
}

std::string RefusalResponse(const FrontVerdict& verdict, bool json) {
  std::string body =
      json ? nlohmann::json{{"error", ValidUtf8(verdict.message)}}.dump() + "\n" : verdict.message + "\n";
  std::string r = absl::StrCat("HTTP/1.1 ", verdict.status, " ", Reason(verdict.status),
                               "\r\nContent-Type: ", json ? "application/json" : "text/plain; charset=utf-8",
                               "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n");
  for (const auto& [name, value] : verdict.headers) absl::StrAppend(&r, name, ": ", value, "\r\n");
  absl::StrAppend(&r, "\r\n", body);
  return r;
}

Credential BearerCredential(const RequestHead& head, const std::string& token) {
  std::optional<std::string_view> header = head.Header("Authorization");
  if (!header.has_value()) return Credential::kNone;
  return TokenMatches(TokenFromAuthorization(*header), token) ? Credential::kValid : Credential::kWrong;
}

}  // namespace manta::http
