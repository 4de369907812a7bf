#include "dashboard/http_reply.h"

#include <httplib.h>

#include <string>

#include "dashboard/job_info.h"

namespace manta::dashboard {

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 413;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return 503;
    default:
      return 500;
  }
}

void Text(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content(std::string(message) + "\n", "text/plain; charset=utf-8");
}

void Error(httplib::Response& res, const absl::Status& s) { Text(res, HttpStatus(s), std::string(s.message())); }

void Json(httplib::Response& res, const nlohmann::json& j) {
  res.status = 200;
  res.set_content(DumpJson(j), "application/json");
}

}  // namespace manta::dashboard
