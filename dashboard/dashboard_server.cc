#include "dashboard/dashboard_server.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics/discovery.h"
#include "common/status.h"
#include "dashboard/dashboard_metrics.h"
#include "dashboard/gcs_job_store.h"
#include "common/http/gated_http_server.h"
#include "dashboard/job_manager.h"
#include "dashboard/jobs_api.h"
#include "dashboard/package_store.h"
#include "dashboard/request_guard.h"
#include "dashboard/session_store.h"
#include "dashboard/state_api.h"
#include "dashboard/web_page.h"
#include "gcs/client/sync_gcs_client.h"

namespace manta::dashboard {
namespace {
// Each State API read of the GCS.
constexpr absl::Duration kStateCallTimeout = absl::Seconds(5);
// When the request being handled on this thread began (for its metrics).
thread_local absl::Time request_start;
}  // namespace

void InstallRoutes(httplib::Server* http, std::shared_ptr<const GuardConfig> config, JobsApi* api, StateApi* state,
                   DashboardMetrics* metrics) {
  auto refuse = [](const GuardVerdict& v, httplib::Response& res) {
    res.status = v.status;
    res.set_header("Connection", "close");
    res.set_content(v.message + "\n", "text/plain; charset=utf-8");
  };
  // The accepting loop has applied the front (DashboardFront) before the
  // body was read; the browser rules need the request's headers only.
  http->set_pre_routing_handler([config, refuse](const httplib::Request& req, httplib::Response& res) {
    request_start = absl::Now();
    GuardVerdict v = CheckRequest(*config, req);
    if (v.allowed()) return httplib::Server::HandlerResponse::Unhandled;
    Logger("dashboard")->info("refused {} {}: {} {}", req.method, req.path.substr(0, 200), v.status, v.message);
    refuse(v, res);
    return httplib::Server::HandlerResponse::Handled;
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
  if (metrics != nullptr) {
    // Called once the response is written, on the request's thread.
    http->set_logger([metrics](const httplib::Request& req, const httplib::Response& res) {
      metrics->Record(req.method, req.path, res.status, absl::Now() - request_start);
    });
  }
  RegisterWebPage(http, config);
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

  http::HttpLimits http_limits;
  http_limits.threads = options_.http_threads;
  http_ = std::make_unique<http::GatedHttpServer>(http_limits);
  http_->set_payload_max_length(std::max(options_.max_package_bytes, options_.max_json_bytes));

  GuardConfig guard;
  guard.token = options_.token;
  guard.max_json_bytes = options_.max_json_bytes;
  guard.max_package_bytes = options_.max_package_bytes;
  guard.sessions = &sessions_;
  guard.throttle = &login_throttle_;
  // The origins are final once the port is known; the handlers read them
  // only after the server starts.
  auto config = std::make_shared<GuardConfig>(guard);
  http_->SetFront(DashboardFront(config));
  state_gcs_ = gcs::SyncGcsClient::Connect(options_.gcs_address, options_.token, kStateCallTimeout);
  state_api_ = std::make_unique<StateApi>(state_gcs_.get());
  metrics_ = std::make_unique<DashboardMetrics>(api.session_name);
  InstallRoutes(http_.get(), config, api_.get(), state_api_.get(), metrics_.get());

  absl::Status bound = http_->Bind(options_.host, options_.port);
  if (!bound.ok() && options_.any_port_if_taken && options_.port != 0) bound = http_->Bind(options_.host, 0);
  if (!bound.ok()) {
    return absl::UnavailableError(absl::StrCat(
        bound.message(), options_.port == 0 ? "" : " (is another dashboard running? use --dashboard-port)"));
  }
  port_ = http_->bound_port();
  config->allowed_origins = OwnOrigins(options_.host, port_);
  http_->Serve();
  Logger("dashboard")->info("dashboard serving on http://{}:{}", options_.host, port_);
  return StartMetrics();
}

absl::Status DashboardServer::StartMetrics() {
  if (options_.metrics_port < 0) return absl::OkStatus();
  RETURN_IF_ERROR(metrics_->Start(options_.host, options_.metrics_port, options_.metrics_token));
  // The head lists it among the scrape targets (the GCS's discovery file).
  std::string host = options_.host;
  if (host == "0.0.0.0" || host == "::") host = options_.gcs_address.substr(0, options_.gcs_address.rfind(':'));
  metrics_address_ = absl::StrCat(host, ":", metrics_->port());
  auto put = state_gcs_->Call<rpc::KvPutReply>([&](gcs::GcsClient& c, auto done) {
    rpc::KvPutRequest req;
    req.set_ns(metrics::kMetricsKvNamespace);
    req.set_key(metrics::kDashboardMetricsKey);
    req.set_value(metrics_address_);
    req.set_overwrite(true);
    c.KvPut(std::move(req), std::move(done));
  });
  if (!put.ok())
    Logger("dashboard")->warn("cannot register the metrics address with the GCS: {}", put.status().ToString());
  Logger("dashboard")->info("metrics on {}", metrics_address_);
  return absl::OkStatus();
}

void DashboardServer::Shutdown(std::function<void()> done) {
  Logger("dashboard")->info("dashboard shutting down");
  api_->Shutdown();
  http_->StopServing();
  if (metrics_) metrics_->Stop();
  jobs_->Shutdown(std::move(done));
}

}  // namespace manta::dashboard
