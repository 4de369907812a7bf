#include "dashboard/jobs_api.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
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

// The JSON {"logs": "<the file's last max_bytes>"} in pieces, each a
// bounded read of the file, escaped; bytes that are not UTF-8 become U+FFFD.
class LogJsonReader {
 public:
  static constexpr size_t kPiece = 64 << 10;

  LogJsonReader(int fd, uint64_t max_bytes, std::atomic<int>* readers) : fd_(fd), readers_(readers) {
    struct stat st;
    end_ = fd_ >= 0 && fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    offset_ = end_ > max_bytes ? end_ - max_bytes : 0;
  }
  ~LogJsonReader() {
    if (fd_ >= 0) close(fd_);
    readers_->fetch_sub(1);
  }

  bool done() const { return done_; }

  std::string Next() {
    std::string out;
    if (!started_) {
      started_ = true;
      out = "{\"logs\": \"";
      if (offset_ > 0) out += Escaped(absl::StrCat("[... the first ", offset_, " bytes of the log are omitted ...]\n"));
    }
    const bool last = offset_ >= end_;
    std::string bytes;
    if (!last) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, end_ - offset_));
      std::string read = ReadFrom(fd_, static_cast<off_t>(offset_), n);
      offset_ = read.empty() ? end_ : offset_ + read.size();  // a file cut short ends the log here
      bytes = pieces_.Add(read);
    } else {
      bytes = pieces_.Flush();
    }
    out += Escaped(bytes);
    if (last) {
      out += "\"}";
      done_ = true;
    }
    return out;
  }

 private:
  static std::string Escaped(const std::string& text) {
    std::string quoted = json(text).dump();
    return quoted.substr(1, quoted.size() - 2);
  }

  const int fd_;
  std::atomic<int>* const readers_;
  uint64_t end_ = 0;  // the file's size when the request came: later lines wait for the next
  uint64_t offset_ = 0;
  Utf8Pieces pieces_;  // a character split between reads stays whole
  bool started_ = false;
  bool done_ = false;
};

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
    return Text(
        res, 400,
        absl::StrCat("runtime_env working_dir gcs://", request->working_dir_package,
                     " was not uploaded; PUT it to /api/packages/gcs/", request->working_dir_package, " first."));
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
  // ?max_bytes=N: only the last N bytes (the page's view of a running job).
  uint64_t max_bytes = options_.max_log_bytes;
  if (req.has_param("max_bytes")) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(req.get_param_value("max_bytes"), &n) || n == 0) {
      return Text(res, 400, "max_bytes must be a positive number of bytes.");
    }
    max_bytes = std::min<uint64_t>(n, max_bytes);
  }
  if (log_readers_.fetch_add(1) >= options_.max_log_readers) {
    log_readers_.fetch_sub(1);
    return Text(res, 503, "Too many clients are reading logs at once; try again later.");
  }
  // Ray's {"logs": "..."}, written as the file is read: a request holds one
  // piece of the log at a time, never the whole of it.
  auto reader =
      std::make_shared<LogJsonReader>(open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW), max_bytes, &log_readers_);
  res.status = 200;
  res.set_chunked_content_provider("application/json", [reader](size_t, httplib::DataSink& sink) {
    std::string piece = reader->Next();
    if (!piece.empty() && !sink.write(piece.data(), piece.size())) return false;
    if (reader->done()) sink.done();
    return true;
  });
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
  res.set_chunked_content_provider(
      "text/plain; charset=utf-8", [this, follow, job_id](size_t, httplib::DataSink& sink) {
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
