#include "dashboard/dashboard_metrics.h"

#include <httplib.h>

#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

TEST(DashboardMetricsTest, EndpointsAreRoutesNeverRawPaths) {
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/"), "/api/jobs/");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs"), "/api/jobs/");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/raysubmit_ABC"), "/api/jobs/{submission_id}");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/raysubmit_ABC/logs"), "/api/jobs/{submission_id}/logs");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/x/logs/tail"), "/api/jobs/{submission_id}/logs/tail");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/x/stop"), "/api/jobs/{submission_id}/stop");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/jobs/x/secret"), "other");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/packages/gcs/pkg.zip"), "/api/packages/{protocol}/{name}");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/v0/actors"), "/api/v0/actors");
  EXPECT_EQ(DashboardMetrics::Endpoint("/static/app.js"), "/static/app.js");
  EXPECT_EQ(DashboardMetrics::Endpoint("/wp-admin/x.php"), "other");
  EXPECT_EQ(DashboardMetrics::Endpoint("/api/v0/actors/../../etc"), "other");
}

TEST(DashboardMetricsTest, RequestsAreCountedAndTimed) {
  DashboardMetrics metrics("session_x");
  ASSERT_TRUE(metrics.Start("127.0.0.1", 0, "tok").ok());
  metrics.Record("GET", "/api/jobs/raysubmit_1/logs", 200, absl::Milliseconds(3));
  metrics.Record("GET", "/api/jobs/raysubmit_2/logs", 200, absl::Milliseconds(30));
  auto res = httplib::Client("127.0.0.1", metrics.port()).Get("/metrics", {{"Authorization", "Bearer tok"}});
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("ray_dashboard_api_requests_count_requests_total{method=\"GET\",endpoint=\"/api/jobs/"
                           "{submission_id}/logs\",http_status=\"200\",SessionName=\"session_x\"} 2"),
            std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("ray_dashboard_api_requests_duration_seconds_count{method=\"GET\",endpoint=\"/api/jobs/"
                           "{submission_id}/logs\",SessionName=\"session_x\"} 2"),
            std::string::npos);
}

}  // namespace
}  // namespace manta::dashboard
