// JobsApi: the HTTP routes of Ray's Jobs REST API (and its package upload
// route) on top of JobManager and PackageStore.
//
//   GET    /api/version
//   POST   /api/jobs/                      submit     -> {"job_id", "submission_id"}
//   GET    /api/jobs/                      list       -> [JobDetails...]
//   GET    /api/jobs/{id}                  details    -> JobDetails
//   POST   /api/jobs/{id}/stop             stop       -> {"stopped": bool}
//   DELETE /api/jobs/{id}                  delete     -> {"deleted": true}   (terminal jobs only)
//   GET    /api/jobs/{id}/logs             all logs   -> {"logs": "..."}
//   GET    /api/jobs/{id}/logs/tail        follow: the log as a chunked text/plain stream that
//                                          ends when the job has ended and all output was sent
//                                          (Ray uses a websocket here)
//   GET    /api/packages/gcs/{name}        200 when the package was uploaded, else 404
//   PUT    /api/packages/gcs/{name}        upload a working-dir package (.tar / .tar.gz)
//
// Errors are text/plain messages, as Ray's: 400 for bad input, 404 for
// unknown jobs, 413 for oversized bodies, 503 when the GCS is unreachable.
// Handlers run on the HTTP server's threads; the class holds no state but
// the count of log followers. Authentication and cross-site checks happen
// before (request_guard.h).
#pragma once

#include <atomic>
#include <string>

#include "dashboard/job_manager.h"
#include "dashboard/package_store.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace manta::dashboard {

struct JobsApiOptions {
  std::string session_name;  // reported by /api/version
  size_t max_json_bytes = 1 << 20;
  int max_log_followers = 16;  // each holds one HTTP thread while it follows
  // Logs larger than this are returned from their end, with a note.
  size_t max_log_bytes = 64 << 20;
  // GET .../logs requests being answered at once; each holds a bounded
  // piece of its log at a time.
  int max_log_readers = 16;
};

class JobsApi {
 public:
  JobsApi(JobManager* jobs, PackageStore* packages, JobsApiOptions options);

  void Register(httplib::Server* server);

  // Ends every log follow promptly (the server is stopping). Any thread.
  void Shutdown() { stopping_ = true; }

 private:
  void Version(const httplib::Request& req, httplib::Response& res);
  void Submit(const httplib::Request& req, httplib::Response& res);
  void List(const httplib::Request& req, httplib::Response& res);
  void Details(const httplib::Request& req, httplib::Response& res);
  void StopJob(const httplib::Request& req, httplib::Response& res);
  void DeleteJob(const httplib::Request& req, httplib::Response& res);
  void Logs(const httplib::Request& req, httplib::Response& res);
  void TailLogs(const httplib::Request& req, httplib::Response& res);
  void PackageExists(const httplib::Request& req, httplib::Response& res);
  void UploadPackage(const httplib::Request& req, httplib::Response& res);

  JobManager* const jobs_;
  PackageStore* const packages_;
  const JobsApiOptions options_;
  std::atomic<int> followers_{0};
  std::atomic<int> log_readers_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace manta::dashboard
