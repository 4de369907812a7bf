// Every HTTP front of a head (the dashboard, and the metrics ports of the
// GCS, the raylet and the dashboard) decides a request from its head: a
// chunked bomb or a trickled body without the token is refused before its
// body is read, holds no memory, and no real request waits behind it.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/http_attacks.h"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

constexpr int64_t kMaxGrowth = 32 << 20;

struct Front {
  std::string name;
  int port = 0;
  pid_t pid = -1;
  std::string attacked;  // a path that takes no body without the token
  std::string probe;     // a valid request
};

class HttpFrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.Start().ok());
    const int dashboard_port = std::stoi(cluster_.url().substr(cluster_.url().rfind(':') + 1));
    const std::string auth = "Authorization: Bearer " + cluster_.token() + "\r\n";
    fronts_.push_back({"dashboard", dashboard_port, PidListeningOn(dashboard_port), "/api/jobs/",
                       "GET /api/version HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"});
    // The metrics ports of the GCS, the head's raylet and the dashboard.
    ASSERT_TRUE(JobCluster::WaitFor([&] { return MetricsTargets().size() >= 3; }, absl::Seconds(30)));
    for (const std::string& target : MetricsTargets()) {
      const int port = std::stoi(target.substr(target.rfind(':') + 1));
      fronts_.push_back({"metrics " + target, port, PidListeningOn(port), "/metrics",
                         "GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"});
    }
    for (const Front& f : fronts_) ASSERT_GT(f.pid, 0) << f.name;
  }

  std::vector<std::string> MetricsTargets() {
    auto text = ReadFile(cluster_.session_dir() + "/prom_metrics_service_discovery.json");
    if (!text.ok()) return {};
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_array() || j.empty()) return {};
    return j[0]["targets"].get<std::vector<std::string>>();
  }

  JobCluster cluster_;
  std::vector<Front> fronts_;
};

TEST_F(HttpFrontTest, ChunkedBombsWithoutATokenAreRefusedBeforeTheirBodies) {
  for (const Front& f : fronts_) {
    const int64_t before = RssOf(f.pid);
    std::vector<std::string> answers;
    HttpAnswer probe;
    absl::Duration probe_took;
    const int64_t peak = PeakRssWhile(f.pid, [&] {
      std::thread real([&] {
        // A real request while three bombs are under way.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const absl::Time start = absl::Now();
        probe = RawRequest(f.port, f.probe);
        probe_took = absl::Now() - start;
      });
      answers = ChunkedBombs(f.port, f.attacked, uint64_t{200} << 20, 3);
      real.join();
    });
    std::printf(
        "%s: RSS %.1f MB before, %.1f MB at most during 3 x 200 MB chunked posts, %.1f MB after; "
        "a real request meanwhile: %d in %.0f ms\n",
        f.name.c_str(), before / 1048576.0, peak / 1048576.0, RssOf(f.pid) / 1048576.0, probe.status,
        absl::ToDoubleMilliseconds(probe_took));
    for (const std::string& a : answers) EXPECT_EQ(a.substr(0, 12), "HTTP/1.1 401") << f.name << ": " << a;
    EXPECT_LE(peak - before, kMaxGrowth) << f.name << " grew from " << before << " to " << peak << " bytes";
    EXPECT_EQ(probe.status, 200) << f.name << ": " << probe.status_line;
  }
}

TEST_F(HttpFrontTest, TrickledBodiesWithoutATokenHoldNoThread) {
  for (const Front& f : fronts_) {
    // 60 connections announcing 100,000 bytes with a wrong token, then a byte
    // a second: answered from their heads, while they still trickle.
    Trickle slow(f.port,
                 absl::StrCat("POST ", f.attacked, " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n",
                              "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"),
                 60);
    EXPECT_TRUE(JobCluster::WaitFor([&] { return slow.Answered() == 60; }, absl::Seconds(10)))
        << f.name << ": " << slow.Answered() << " of 60 answered";
    for (int status : slow.Statuses()) EXPECT_TRUE(status == 401 || status == 403) << f.name << ": " << status;
    HttpAnswer probe = RawRequest(f.port, f.probe);
    EXPECT_EQ(probe.status, 200) << f.name << ": " << probe.status_line;
  }
}

TEST_F(HttpFrontTest, AMetricsPortTakesNoBodyAndTheDashboardNoChunkedOne) {
  const std::string auth = "Authorization: Bearer " + cluster_.token() + "\r\n";
  for (const Front& f : fronts_) {
    if (f.attacked != "/metrics") continue;
    EXPECT_EQ(RawRequest(f.port, "GET /metrics HTTP/1.1\r\n" + auth + "Content-Length: 5\r\n\r\nhello").status, 413);
    EXPECT_EQ(RawRequest(f.port, "GET /metrics HTTP/1.1\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n").status,
              411);
    EXPECT_EQ(RawRequest(f.port, "POST /metrics HTTP/1.1\r\n" + auth + "Content-Length: 5\r\n\r\nhello").status, 405);
    EXPECT_EQ(RawRequest(f.port, "GET /metrics HTTP/1.1\r\n\r\n").status, 401);
  }
  const Front& dashboard = fronts_.front();
  EXPECT_EQ(RawRequest(dashboard.port, "POST /api/jobs/ HTTP/1.1\r\n" + auth +
                                           "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
                .status,
            411);
  EXPECT_EQ(RawRequest(dashboard.port, "POST /api/jobs/ HTTP/1.1\r\n" + auth +
                                           "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                .status,
            400)
      << "both framings at once";
  EXPECT_EQ(RawRequest(dashboard.port, "POST /api/jobs/ HTTP/1.1\r\n" + auth +
                                           "Content-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd")
                .status,
            415);
}

}  // namespace
}  // namespace manta::testing
