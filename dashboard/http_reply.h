// The dashboard's HTTP replies: text/plain messages and JSON bodies, and the
// HTTP status of an absl::Status, shared by the Jobs API and the State API.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace httplib {
struct Response;
}

namespace manta::dashboard {

// 400 for bad input (InvalidArgument, AlreadyExists, FailedPrecondition),
// 404, 413 (ResourceExhausted), 503 (Unavailable, DeadlineExceeded), else 500.
int HttpStatus(const absl::Status& s);
// A text/plain message (with a newline) under `status`.
void Text(httplib::Response& res, int status, std::string_view message);
// `s`'s message under HttpStatus(s).
void Error(httplib::Response& res, const absl::Status& s);
// `j` as a 200 application/json body (invalid UTF-8 replaced).
void Json(httplib::Response& res, const nlohmann::json& j);

}  // namespace manta::dashboard
