// The dashboard's web page in headless Chromium (tests/web/dashboard_page_test.mjs,
// driven by playwright-core from npm with Debian's chromium): on a cluster
// of two simulated v6e-16 slices with a training run going, the page asks
// for the token, shows the 9 nodes grouped by slice, the job with its logs
// and a loss plot whose point count grows, and a page on another origin can
// neither read state nor stop the job. Screenshots are kept in
// <build>/test-artifacts/dashboard/.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

std::string NodeTools() {
  const char* set = std::getenv("MANTA_NODE_TOOLS");
  if (set != nullptr && *set != '\0') return set;
  const char* home = std::getenv("HOME");
  return std::string(home == nullptr ? "" : home) + "/.cache/manta/node_tools";
}

bool BrowserReady() {
  return PathExists("/usr/bin/chromium") && PathExists("/usr/bin/node") &&
         PathExists(NodeTools() + "/node_modules/playwright-core/package.json");
}

TEST(WebPageTest, ThePageShowsTheClusterTheJobAndALiveLossPlot) {
  if (!BrowserReady()) GTEST_SKIP() << "chromium, node or playwright-core is missing (scripts/install_deps.sh)";
  Cluster cluster;  // the temp dir, RunManta and teardown on failure
  auto up = cluster.MantaUp("up", {"--tpu=v6e-16", "--slices=2", "--host-cpus=2"});
  ASSERT_TRUE(up.ok()) << up.status();
  const std::string temp = up->temp_dir;
  auto token = ReadFile(temp + "/session_latest/token");
  ASSERT_TRUE(token.ok());

  // A tiny model on both slices, long enough to be watched.
  const std::string data = cluster.temp_dir() + "/data";
  CommandResult submit =
      cluster.RunManta({"job", "submit", "--no-wait", "--temp-dir=" + temp, "--",
                        std::filesystem::absolute(Cluster::BinDir()).string() + "/maxtext_trainer",
                        std::string(MANTA_SOURCE_DIR) + "/train/kernels/configs/base.yml", "model_name=tiny",
                        "steps=100000", "per_device_batch_size=1", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4",
                        "dcn_data_parallelism=2", "base_output_directory=" + data, "run_name=web-page"},
                       {}, absl::Seconds(60));
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  std::smatch id;
  const std::string out = submit.out;
  ASSERT_TRUE(std::regex_search(out, id, std::regex("Job '([A-Za-z0-9_]+)' submitted successfully"))) << out;

  const std::string artifacts = std::string(MANTA_BINARY_DIR) + "/test-artifacts/dashboard";
  std::filesystem::create_directories(artifacts);
  SpawnOptions test;
  test.executable = "/usr/bin/node";
  test.args = {std::string(MANTA_SOURCE_DIR) + "/tests/web/dashboard_page_test.mjs"};
  test.env = {{"MANTA_DASHBOARD_URL", absl::StrCat("http://127.0.0.1:", up->dashboard_port)},
              {"MANTA_TOKEN", std::string(absl::StripAsciiWhitespace(*token))},
              {"MANTA_EXPECT_NODES", "9"},
              {"MANTA_EXPECT_SLICES", "2"},
              {"MANTA_JOB_ID", id[1].str()},
              {"MANTA_ARTIFACT_DIR", artifacts},
              {"MANTA_NODE_TOOLS", NodeTools()}};
  auto page = RunAndCapture(test, absl::Minutes(5));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->exit_code, 0) << page->out << page->err;
  std::cout << page->out;
  for (const char* shot : {"01-login.png", "03-nodes.png", "05-train.png", "06-cross-site.png"}) {
    EXPECT_TRUE(PathExists(artifacts + "/" + shot)) << shot;
  }

  EXPECT_EQ(cluster.RunManta({"job", "stop", "--temp-dir=" + temp, id[1].str()}, {}, absl::Seconds(60)).exit_code, 0);
  EXPECT_EQ(cluster.RunManta({"down", "--temp-dir=" + temp}, {}, absl::Seconds(60)).exit_code, 0);
}

}  // namespace
}  // namespace manta::testing
