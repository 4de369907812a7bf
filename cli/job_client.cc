#include "cli/job_client.h"

#include <httplib.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cli/cluster_address.h"
#include "common/file_util.h"
#include "common/session.h"
#include "common/status.h"
#include "common/token.h"
#include "dashboard/validation.h"

namespace manta::cli {
namespace {

using nlohmann::json;

std::unique_ptr<httplib::Client> MakeClient(const std::string& url, const std::string& token) {
  auto client = std::make_unique<httplib::Client>(url);
  client->set_connection_timeout(5);
  client->set_read_timeout(60);
  client->set_write_timeout(60);
  client->set_keep_alive(false);
  if (!token.empty()) client->set_bearer_token_auth(token);
  return client;
}

absl::Status HttpError(const std::string& url, const httplib::Result& r) {
  if (!r) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the dashboard at ", url, ": ", httplib::to_string(r.error())));
  }
  std::string message(absl::StripAsciiWhitespace(r->body));
  if (message.empty()) message = absl::StrCat("HTTP ", r->status);
  switch (r->status) {
    case 400:
      return absl::InvalidArgumentError(message);
    case 401:
      return absl::UnauthenticatedError(absl::StrCat(message, " (set MANTA_TOKEN to the cluster token)"));
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 413:
      return absl::ResourceExhaustedError(message);
    case 503:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(absl::StrCat("HTTP ", r->status, ": ", message));
  }
}

absl::StatusOr<json> JsonOf(const std::string& url, const httplib::Result& r) {
  if (!r || r->status != 200) return HttpError(url, r);
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError(absl::StrCat("the dashboard at ", url, " sent invalid JSON"));
  return j;
}

absl::StatusOr<std::string> JobPath(const std::string& id, const std::string& suffix = "") {
  RETURN_IF_ERROR(dashboard::ValidateSubmissionId(id));
  return absl::StrCat("/api/jobs/", id, suffix);
}

}  // namespace

JobClient::JobClient(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}
JobClient::~JobClient() = default;

absl::StatusOr<json> JobClient::Version() { return JsonOf(url_, MakeClient(url_, token_)->Get("/api/version")); }

absl::StatusOr<std::string> JobClient::Submit(const json& request) {
  std::string body;
  try {
    body = request.dump();
  } catch (const json::type_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("the job request holds text that is not valid UTF-8: ", e.what()));
  }
  auto r = MakeClient(url_, token_)->Post("/api/jobs/", body, "application/json");
  ASSIGN_OR_RETURN(json reply, JsonOf(url_, r));
  if (!reply.contains("submission_id") || !reply["submission_id"].is_string()) {
    return absl::InternalError("the dashboard's reply has no submission_id");
  }
  return reply["submission_id"].get<std::string>();
}

absl::StatusOr<json> JobClient::GetJob(const std::string& id) {
  ASSIGN_OR_RETURN(std::string path, JobPath(id));
  return JsonOf(url_, MakeClient(url_, token_)->Get(path));
}

absl::StatusOr<json> JobClient::ListJobs() { return JsonOf(url_, MakeClient(url_, token_)->Get("/api/jobs/")); }

absl::StatusOr<bool> JobClient::StopJob(const std::string& id) {
  ASSIGN_OR_RETURN(std::string path, JobPath(id, "/stop"));
  ASSIGN_OR_RETURN(json reply, JsonOf(url_, MakeClient(url_, token_)->Post(path)));
  return reply.value("stopped", false);
}

absl::Status JobClient::DeleteJob(const std::string& id) {
  ASSIGN_OR_RETURN(std::string path, JobPath(id));
  return JsonOf(url_, MakeClient(url_, token_)->Delete(path)).status();
}

absl::StatusOr<std::string> JobClient::GetLogs(const std::string& id) {
  ASSIGN_OR_RETURN(std::string path, JobPath(id, "/logs"));
  ASSIGN_OR_RETURN(json reply, JsonOf(url_, MakeClient(url_, token_)->Get(path)));
  return reply.value("logs", "");
}

absl::Status JobClient::TailLogs(const std::string& id, const std::function<bool(std::string_view)>& on_data) {
  ASSIGN_OR_RETURN(std::string path, JobPath(id, "/logs/tail"));
  auto client = MakeClient(url_, token_);
  // A quiet job sends nothing for a long time; the stream ends with the job.
  client->set_read_timeout(24 * 3600);
  bool cancelled = false;
  int status = 0;
  std::string error_body;
  auto r = client->Get(
      path, httplib::Headers{},
      [&](const httplib::Response& res) {
        status = res.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status != 200) {
          error_body.append(data, n);
          return true;
        }
        if (!on_data(std::string_view(data, n))) cancelled = true;
        return !cancelled;
      });
  if (cancelled) return absl::CancelledError("stopped following the logs");
  if (!r) return HttpError(url_, r);
  if (r->status != 200) {
    absl::Status s = HttpError(url_, r);
    std::string message(absl::StripAsciiWhitespace(error_body));
    return message.empty() ? s : absl::Status(s.code(), message);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> JobClient::PackageExists(const std::string& name) {
  RETURN_IF_ERROR(dashboard::ValidatePackageName(name));
  auto r = MakeClient(url_, token_)->Get("/api/packages/gcs/" + name);
  if (r && r->status == 404) return false;
  if (r && r->status == 200) return true;
  return HttpError(url_, r);
}

absl::Status JobClient::UploadPackage(const std::string& name, const std::string& data) {
  RETURN_IF_ERROR(dashboard::ValidatePackageName(name));
  auto r = MakeClient(url_, token_)->Put("/api/packages/gcs/" + name, data, "application/octet-stream");
  if (r && r->status == 200) return absl::OkStatus();
  return HttpError(url_, r);
}

absl::StatusOr<std::string> ResolveDashboardUrl(const std::string& flag, const std::string& temp_dir) {
  std::string url = flag;
  if (url.empty()) {
    if (const char* env = std::getenv("MANTA_DASHBOARD_ADDRESS"); env != nullptr && *env != '\0') url = env;
  }
  if (url.empty()) {
    if (const char* env = std::getenv(kAddressEnv);
        env != nullptr && (absl::StartsWith(env, "http://") || absl::StartsWith(env, "https://"))) {
      url = env;
    }
  }
  if (url.empty()) {
    auto session = LatestSession(temp_dir);
    auto text = session.ok() ? ReadFile(session->dir + "/dashboard_address") : absl::NotFoundError("");
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat("no dashboard found under ", temp_dir,
                                              " (pass --address http://HOST:8265 or set MANTA_DASHBOARD_ADDRESS)"));
    }
    url = std::string(absl::StripAsciiWhitespace(*text));
  }
  if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) url = "http://" + url;
  while (absl::EndsWith(url, "/")) url.pop_back();
  return url;
}

absl::StatusOr<std::string> ResolveDashboardToken(const std::string& url, const std::string& temp_dir) {
  if (const char* env = std::getenv(kTokenEnv); env != nullptr && *env != '\0') {
    std::string token(absl::StripAsciiWhitespace(env));
    if (auto s = ValidateToken(token); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(kTokenEnv, ": ", s.message()));
    return token;
  }
  auto session = LatestSession(temp_dir);
  if (!session.ok()) return std::string();
  auto text = ReadFile(session->dir + "/dashboard_address");
  if (!text.ok() || absl::StripAsciiWhitespace(*text) != url || !PathExists(session->token())) return std::string();
  return ReadTokenFile(session->token());
}

}  // namespace manta::cli
