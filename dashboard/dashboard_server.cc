#include "dashboard/dashboard_server.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "dashboard/gcs_job_store.h"
#include "dashboard/http_gate.h"
#include "dashboard/job_manager.h"
#include "dashboard/jobs_api.h"
#include "dashboard/package_store.h"
#include "dashboard/request_guard.h"
#include "dashboard/state_api.h"
#include "gcs/client/sync_gcs_client.h"

namespace manta::dashboard {
namespace {
// Each State API read of the GCS.
constexpr absl::Duration kStateCallTimeout = absl::Seconds(5);
}  // namespace

void InstallRoutes(httplib::Server* http, std::shared_ptr<const GuardConfig> config, JobsApi* api, StateApi* state) {
  auto refuse = [](const GuardVerdict& v, httplib::Response& res) {
    res.status = v.status;
    res.set_header("Connection", "close");
    res.set_content(v.message + "\n", "text/plain; charset=utf-8");
  };
  http->set_pre_routing_handler([config, refuse](const httplib::Request& req, httplib::Response& res) {
    // A request with neither Content-Length nor Transfer-Encoding has an
    // empty body (RFC 9112 6.3), as `curl -X POST .../stop` sends it; httplib
    // would wait for the connection to close instead. The request object is
    // httplib's own mutable one.
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
    }
    GuardVerdict v = CheckRequest(*config, req);
    if (v.allowed()) return httplib::Server::HandlerResponse::Unhandled;
    Logger("dashboard")->info("refused {} {}: {} {}", req.method, req.path.substr(0, 200), v.status, v.message);
    refuse(v, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  http->set_expect_100_continue_handler([config, refuse](const httplib::Request& req, httplib::Response& res) {
    GuardVerdict v = CheckRequest(*config, req);
    if (v.allowed()) return 100;
    refuse(v, res);
    return v.status;
  });
  http->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      res.set_content(absl::StrCat("No route for ", req.method, " ", req.path.substr(0, 200), "\n"),
                      "text/plain; charset=utf-8");
    } else if (res.status == 413 && res.body.empty()) {
      res.set_content("Request body is too large.\n", "text/plain; charset=utf-8");
    }
  });
  http->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    Logger("dashboard")->error("handler for {} {} threw: {}", req.method, req.path.substr(0, 200), what);
    res.status = 500;
    res.set_content("Internal error.\n", "text/plain; charset=utf-8");
  });
  api->Register(http);
  if (state != nullptr) state->Register(http);
}

DashboardServer::DashboardServer(DashboardOptions options, EventLoop* loop)
    : options_(std::move(options)), loop_(loop) {}

DashboardServer::~DashboardServer() {
  if (http_) http_->StopServing();
}

absl::Status DashboardServer::Start() {
  store_ = std::make_unique<GcsJobStore>(options_.gcs_address, options_.token);
  TarLimits limits;
  limits.max_unpacked_bytes = options_.max_unpacked_bytes;
  packages_ = std::make_unique<PackageStore>(options_.session_dir + "/runtime_resources", limits);
  RETURN_IF_ERROR(packages_->Init());

  JobManagerOptions jm;
  jm.session_dir = options_.session_dir;
  jm.gcs_address = options_.gcs_address;
  jm.token = options_.token;
  jm.runner_path = options_.runner_path;
  jm.stop_grace = options_.stop_grace;
  jobs_ = std::make_unique<JobManager>(jm, store_.get(), packages_.get(), loop_);
  RETURN_IF_ERROR(jobs_->Start());

  JobsApiOptions api;
  api.session_name = options_.session_dir.substr(options_.session_dir.rfind('/') + 1);
  api.max_json_bytes = options_.max_json_bytes;
  api_ = std::make_unique<JobsApi>(jobs_.get(), packages_.get(), api);

  HttpLimits http_limits;
  http_limits.threads = options_.http_threads;
  http_ = std::make_unique<GatedHttpServer>(http_limits);
  http_->set_payload_max_length(std::max(options_.max_package_bytes, options_.max_json_bytes));

  GuardConfig guard;
  guard.token = options_.token;
  guard.max_json_bytes = options_.max_json_bytes;
  guard.max_package_bytes = options_.max_package_bytes;
  // The origins are final once the port is known; the handlers read them
  // only after the server starts.
  auto config = std::make_shared<GuardConfig>(guard);
  state_gcs_ = gcs::SyncGcsClient::Connect(options_.gcs_address, options_.token, kStateCallTimeout);
  state_api_ = std::make_unique<StateApi>(state_gcs_.get());
  InstallRoutes(http_.get(), config, api_.get(), state_api_.get());

  absl::Status bound = http_->Bind(options_.host, options_.port);
  if (!bound.ok()) {
    return absl::UnavailableError(absl::StrCat(
        bound.message(), options_.port == 0 ? "" : " (is another dashboard running? use --dashboard-port)"));
  }
  port_ = http_->bound_port();
  config->allowed_origins = OwnOrigins(options_.host, port_);
  http_->Serve();
  Logger("dashboard")->info("dashboard serving on http://{}:{}", options_.host, port_);
  return absl::OkStatus();
}

void DashboardServer::Shutdown(std::function<void()> done) {
  Logger("dashboard")->info("dashboard shutting down");
  api_->Shutdown();
  http_->StopServing();
  jobs_->Shutdown(std::move(done));
}

}  // namespace manta::dashboard
