#include "common/metrics/metrics.h"

#include <httplib.h>

#include <cmath>
#include <limits>

#include "common/metrics/metrics_server.h"
#include "common/metrics/node_stats.h"
#include "gtest/gtest.h"

namespace manta::metrics {
namespace {

TEST(MetricsTest, FamiliesRenderInTheTextFormatWithTheConstantLabels) {
  MetricsRegistry registry(Labels{{"SessionName", "session_1"}});
  Counter* calls = registry.AddCounter("ray_calls_total", "Calls made.", {"Method"});
  Gauge* temp = registry.AddGauge("ray_temp", "A \"gauge\"\nwith two lines.", {});
  calls->Add({"A"});
  calls->Add({"A"}, 2);
  calls->Add({"B \"quoted\" \\ path\nx"});
  calls->Add({"A"}, -5);  // counters never go down
  temp->Set({}, 0.25);
  registry.AddCollector([](Exposition& out) {
    out.Family("ray_actors", "gauge", "Actors by state.");
    out.Sample("ray_actors", {{"State", "ALIVE"}}, 3);
  });
  EXPECT_EQ(registry.Render(),
            "# HELP ray_calls_total Calls made.\n"
            "# TYPE ray_calls_total counter\n"
            "ray_calls_total{Method=\"A\",SessionName=\"session_1\"} 3\n"
            "ray_calls_total{Method=\"B \\\"quoted\\\" \\\\ path\\nx\",SessionName=\"session_1\"} 1\n"
            "# HELP ray_temp A \"gauge\"\\nwith two lines.\n"
            "# TYPE ray_temp gauge\n"
            "ray_temp{SessionName=\"session_1\"} 0.25\n"
            "# HELP ray_actors Actors by state.\n"
            "# TYPE ray_actors gauge\n"
            "ray_actors{State=\"ALIVE\",SessionName=\"session_1\"} 3\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  Histogram* h = registry.AddHistogram("ray_latency_ms", "Latency.", {"Method"}, {1, 10});
  for (double v : {0.5, 1.0, 5.0, 50.0}) h->Observe({"m"}, v);
  EXPECT_EQ(registry.Render(),
            "# HELP ray_latency_ms Latency.\n"
            "# TYPE ray_latency_ms histogram\n"
            "ray_latency_ms_bucket{Method=\"m\",le=\"1\"} 2\n"
            "ray_latency_ms_bucket{Method=\"m\",le=\"10\"} 3\n"
            "ray_latency_ms_bucket{Method=\"m\",le=\"+Inf\"} 4\n"
            "ray_latency_ms_sum{Method=\"m\"} 56.5\n"
            "ray_latency_ms_count{Method=\"m\"} 4\n");
}

TEST(MetricsTest, ValuesAreWrittenAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(0.1), "0.10000000000000001");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(MetricsServerTest, ServesTheRegistryOnlyWithTheToken) {
  MetricsRegistry registry(Labels{{"SessionName", "s"}});
  registry.AddGauge("ray_up", "Up.", {})->Set({}, 1);
  auto server = MetricsServer::Start({.host = "127.0.0.1", .port = 0, .token = "tok"}, &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  auto wrong = client.Get("/metrics", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = client.Get("/metrics", {{"Authorization", "Bearer tok"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(right->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(right->body.find("ray_up{SessionName=\"s\"} 1\n"), std::string::npos) << right->body;
  (*server)->Stop();

  auto open = MetricsServer::Start({.host = "127.0.0.1", .port = 0, .token = ""}, &registry);
  ASSERT_TRUE(open.ok());
  auto anyone = httplib::Client("127.0.0.1", (*open)->port()).Get("/metrics");
  ASSERT_TRUE(anyone);
  EXPECT_EQ(anyone->status, 200);
}

TEST(MetricsServerTest, MetricsAuthIsTokenOrNone) {
  EXPECT_EQ(*MetricsToken("token", "t"), "t");
  EXPECT_EQ(*MetricsToken("none", "t"), "");
  EXPECT_FALSE(MetricsToken("off", "t").ok());
}

TEST(NodeStatsTest, ProcFilesAreReadAsRayReportsThem) {
  CpuTimes t = ParseProcStat("cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 1 2 3\n");
  EXPECT_EQ(t.total, 980u);
  EXPECT_EQ(t.busy, 160u);  // all but idle and iowait
  EXPECT_EQ(ParseProcStat("intr 5\n").total, 0u);
  const std::string meminfo = "MemTotal:       24683540 kB\nMemFree:  100 kB\nMemAvailable:   22427012 kB\n";
  EXPECT_EQ(ParseMeminfo(meminfo, "MemTotal"), 24683540LL * 1024);
  EXPECT_EQ(ParseMeminfo(meminfo, "MemAvailable"), 22427012LL * 1024);
  EXPECT_EQ(ParseMeminfo(meminfo, "Mem"), -1);
  EXPECT_EQ(ParseMeminfo(meminfo, "SwapTotal"), -1);
  EXPECT_EQ(ParseVmstat("nr_free_pages 30\noom_kill 2\nnr_zspages 0\n", "oom_kill"), 2);
  EXPECT_EQ(ParseVmstat("nr_free_pages 30\n", "oom_kill"), -1);
  // This host's own figures.
  MetricsRegistry registry;
  NodeStats stats("10.0.0.7");
  registry.AddCollector([&](Exposition& out) { stats.Collect(out); });
  const std::string text = registry.Render();
  for (const char* name :
       {"ray_node_cpu_utilization{ip=\"10.0.0.7\"} ", "ray_node_mem_total{ip=\"10.0.0.7\"} ",
        "ray_node_mem_used{ip=\"10.0.0.7\"} ", "ray_node_cpu_count{ip=\"10.0.0.7\"} ",
        "ray_node_disk_usage{ip=\"10.0.0.7\"} ", "ray_node_disk_free{ip=\"10.0.0.7\"} ",
        "ray_node_network_sent{ip=\"10.0.0.7\"} ", "ray_node_network_receive_speed{ip=\"10.0.0.7\"} ",
        "ray_node_disk_io_write_speed{ip=\"10.0.0.7\"} ", "ray_node_disk_read_iops{ip=\"10.0.0.7\"} ",
        "ray_node_mem_shared_bytes{ip=\"10.0.0.7\"} "}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << " in\n" << text;
  }
}

TEST(NodeStatsTest, NetworkAndDiskCountersAreSummedAsRayReportsThem) {
  const std::string net =
      "Inter-|   Receive |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
      "    lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0\n"
      "  eth0: 1000 3 0 0 0 0 0 0 200 2 0 0 0 0 0 0\n"
      "  eth1:   30 1 0 0 0 0 0 0   4 1 0 0 0 0 0 0\n";
  NetBytes n = ParseNetDev(net);
  EXPECT_EQ(n.received, 1030u);  // lo is not the network
  EXPECT_EQ(n.sent, 204u);
  const std::string disks =
      " 253 0 vda 10 0 80 5 20 0 160 7 0 0 0\n"
      " 253 1 vda1 9 0 72 5 19 0 152 7 0 0 0\n"
      "   7 0 loop0 3 0 8 0 0 0 0 0 0 0 0\n";
  DiskIo d = ParseDiskstats(disks, [](const std::string& name) { return name == "vda"; });
  EXPECT_EQ(d.reads, 10u);
  EXPECT_EQ(d.read_bytes, 80u * 512);
  EXPECT_EQ(d.writes, 20u);
  EXPECT_EQ(d.written_bytes, 160u * 512);
}

}  // namespace
}  // namespace manta::metrics
