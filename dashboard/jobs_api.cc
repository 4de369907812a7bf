#include "dashboard/jobs_api.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "dashboard/http_reply.h"
#include "dashboard/job_info.h"
#include "dashboard/validation.h"

namespace manta::dashboard {
namespace {

using nlohmann::json;

constexpr char kIdPattern[] = "([^/]+)";

// The submission id from the route's first match, validated.
absl::StatusOr<std::string> IdOf(const httplib::Request& req) {
  std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
  if (auto s = ValidateSubmissionId(id); !s.ok()) return s;
  return id;
}

// Up to `max` bytes of `fd` from `offset`.
std::string ReadFrom(int fd, off_t offset, size_t max) {
  std::string out(max, '\0');
  ssize_t n = pread(fd, out.data(), max, offset);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

JobsApi::JobsApi(JobManager* jobs, PackageStore* packages, JobsApiOptions options)
    : jobs_(jobs), packages_(packages), options_(std::move(options)) {}

void JobsApi::Register(httplib::Server* server) {
  auto bind = [this](void (JobsApi::*fn)(const httplib::Request&, httplib::Response&)) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) { (this->*fn)(req, res); };
  };
  std::string id = kIdPattern;
  server->Get("/api/version", bind(&JobsApi::Version));
  server->Post("/api/jobs/?", bind(&JobsApi::Submit));
  server->Get("/api/jobs/?", bind(&JobsApi::List));
  server->Get("/api/jobs/" + id + "/logs/tail", bind(&JobsApi::TailLogs));
  server->Get("/api/jobs/" + id + "/logs", bind(&JobsApi::Logs));
  server->Post("/api/jobs/" + id + "/stop", bind(&JobsApi::StopJob));
  server->Get("/api/jobs/" + id, bind(&JobsApi::Details));
  server->Delete("/api/jobs/" + id, bind(&JobsApi::DeleteJob));
  server->Get("/api/packages/([^/]+)/([^/]+)", bind(&JobsApi::PackageExists));
  server->Put("/api/packages/([^/]+)/([^/]+)", bind(&JobsApi::UploadPackage));
}

void JobsApi::Version(const httplib::Request&, httplib::Response& res) {
  // "version" is the Jobs API level; "ray_version" the Ray release whose API
  // this mirrors, so Ray's clients accept the server.
  Json(res, {{"version", "2"},
             {"ray_version", "2.9.0"},
             {"ray_commit", ""},
             {"manta_version", "0.1.0"},
             {"session_name", options_.session_name}});
}

void JobsApi::Submit(const httplib::Request& req, httplib::Response& res) {
  if (req.body.size() > options_.max_json_bytes) {
    return Text(res, 413, absl::StrCat("Request body is larger than ", options_.max_json_bytes, " bytes."));
  }
  auto request = ParseSubmitRequest(req.body);
  if (!request.ok()) return Error(res, request.status());
  if (!request->working_dir_package.empty() && !packages_->Exists(request->working_dir_package)) {
    return Text(res, 400, absl::StrCat("runtime_env working_dir gcs://", request->working_dir_package,
                                       " was not uploaded; PUT it to /api/packages/gcs/",
                                       request->working_dir_package, " first."));
  }
  auto id = jobs_->Submit(*request);
  if (!id.ok()) return Error(res, id.status());
  Json(res, {{"job_id", *id}, {"submission_id", *id}});
}

void JobsApi::List(const httplib::Request&, httplib::Response& res) {
  json out = json::array();
  for (const JobRecord& job : jobs_->List()) out.push_back(ToApiJson(job));
  Json(res, out);
}

void JobsApi::Details(const httplib::Request& req, httplib::Response& res) {
  auto id = IdOf(req);
  if (!id.ok()) return Error(res, id.status());
  auto job = jobs_->Get(*id);
  if (!job.ok()) return Error(res, job.status());
  Json(res, ToApiJson(*job));
}

void JobsApi::StopJob(const httplib::Request& req, httplib::Response& res) {
  auto id = IdOf(req);
  if (!id.ok()) return Error(res, id.status());
  auto stopped = jobs_->Stop(*id);
  if (!stopped.ok()) return Error(res, stopped.status());
  Json(res, {{"stopped", *stopped}});
}

void JobsApi::DeleteJob(const httplib::Request& req, httplib::Response& res) {
  auto id = IdOf(req);
  if (!id.ok()) return Error(res, id.status());
  absl::Status s = jobs_->Delete(*id);
  if (!s.ok()) return Error(res, s);
  Json(res, {{"deleted", true}});
}

void JobsApi::Logs(const httplib::Request& req, httplib::Response& res) {
  auto id = IdOf(req);
  if (!id.ok()) return Error(res, id.status());
  auto path = jobs_->LogPath(*id);
  if (!path.ok()) return Error(res, path.status());
  std::string logs;
  int fd = open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    struct stat st;
    off_t size = fstat(fd, &st) == 0 ? st.st_size : 0;
    off_t start = 0;
    if (static_cast<size_t>(size) > options_.max_log_bytes) {
      start = size - static_cast<off_t>(options_.max_log_bytes);
      logs = absl::StrCat("[... the first ", start, " bytes of the log are omitted ...]\n");
    }
    logs += ReadFrom(fd, start, static_cast<size_t>(size - start));
    close(fd);
  }
  Json(res, {{"logs", logs}});
}

void JobsApi::TailLogs(const httplib::Request& req, httplib::Response& res) {
  auto id = IdOf(req);
  if (!id.ok()) return Error(res, id.status());
  auto path = jobs_->LogPath(*id);
  if (!path.ok()) return Error(res, path.status());
  if (followers_.fetch_add(1) >= options_.max_log_followers) {
    followers_.fetch_sub(1);
    return Text(res, 503, "Too many clients are following logs; try again later.");
  }
  struct Follow {
    std::string path;
    off_t offset = 0;
    int fd = -1;
    std::atomic<int>* followers;
    ~Follow() {
      if (fd >= 0) close(fd);
      followers->fetch_sub(1);
    }
  };
  auto follow = std::make_shared<Follow>();
  follow->path = *path;
  follow->followers = &followers_;
  std::string job_id = *id;
  res.set_chunked_content_provider("text/plain; charset=utf-8", [this, follow, job_id](size_t, httplib::DataSink& sink) {
    constexpr size_t kChunk = 64 << 10;
    for (int idle = 0; !stopping_; ++idle) {
      if (!sink.is_writable()) return false;
      if (follow->fd < 0) follow->fd = open(follow->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      // Whether the job had ended before this read: then the read sees all
      // it will ever write.
      auto job = jobs_->Get(job_id);
      bool ended = !job.ok() || IsTerminal(job->status);
      std::string data = follow->fd >= 0 ? ReadFrom(follow->fd, follow->offset, kChunk) : "";
      if (!data.empty()) {
        follow->offset += static_cast<off_t>(data.size());
        return sink.write(data.data(), data.size());
      }
      if (ended) {
        sink.done();
        return true;
      }
      // Keep-alive for idle streams is unnecessary: clients read without timeouts.
      std::this_thread::sleep_for(std::chrono::milliseconds(idle < 10 ? 20 : 100));
    }
    sink.done();
    return true;
  });
}

void JobsApi::PackageExists(const httplib::Request& req, httplib::Response& res) {
  std::string protocol = req.matches[1].str();
  std::string name = req.matches[2].str();
  if (protocol != "gcs") return Text(res, 400, "Only the gcs:// package protocol is supported.");
  if (auto s = ValidatePackageName(name); !s.ok()) return Error(res, s);
  if (!packages_->Exists(name)) return Text(res, 404, absl::StrCat("Package gcs://", name, " does not exist."));
  Text(res, 200, absl::StrCat("Package gcs://", name, " exists."));
}

void JobsApi::UploadPackage(const httplib::Request& req, httplib::Response& res) {
  std::string protocol = req.matches[1].str();
  std::string name = req.matches[2].str();
  if (protocol != "gcs") return Text(res, 400, "Only the gcs:// package protocol is supported.");
  absl::Status s = packages_->Put(name, req.body);
  if (!s.ok()) return Error(res, s);
  Logger("dashboard")->info("package uploaded name={} bytes={}", name, req.body.size());
  Text(res, 200, absl::StrCat("Uploaded package gcs://", name, "."));
}

}  // namespace manta::dashboard
