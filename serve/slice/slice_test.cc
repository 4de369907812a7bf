// manta_serve on a reserved slice of a real cluster: tensor parallelism over
// four host processes answering what one engine answers, and a worker host
// killed under load (requests in flight end with 503 at once, the whole
// group is recreated on the replacement host without a hand, the restart is
// counted).
#include <atomic>
#include <csignal>
#include <mutex>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "serve/engine/weights.h"
#include "serve/server/test_model.h"
#include "tests/cluster_fixture.h"
#include "train/kernels/rendezvous.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {
namespace {

using manta::testing::Cluster;
using manta::testing::RayletOptions;

class ServeSliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    step_dir_ = TrainTinyTextModel(dir_.path());
    MANTA_ASSERT_OK(cluster_.StartHead());
    auto hosts = cluster_.AddTpuSlice("tpu-group-0", "v6e-16", "4x4");
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *hosts;
    auto port = train::PickCoordinatorPort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
  }
  void TearDown() override {
    if (driver_ > 0) {
      EXPECT_TRUE(TerminateProcess(driver_, absl::Now() + absl::Seconds(30)).ok());
      std::optional<int> status = ExitStatusOf(driver_);
      if (status) {
        EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
      }
      EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_.ResourcesFull(); }, absl::Seconds(30)))
          << "the slice was not given back";
    }
    cluster_.Shutdown();
  }

  void StartDriver(int tensor, const std::vector<std::string>& flags = {}) {
    log_ = dir_.path() + "/driver.log";
    std::vector<std::string> args = {"--topology=4x4", "--port=" + std::to_string(port_), "--start_timeout_s=60"};
    args.insert(args.end(), flags.begin(), flags.end());
    for (std::string a : {std::string("--"), std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml",
                          "load_parameters_path=" + step_dir_, "ici_tensor_parallelism=" + std::to_string(tensor),
                          std::string("per_device_batch_size=1"), std::string("max_prefill_predict_length=32"),
                          std::string("max_target_length=96"), std::string("prometheus_port=0")}) {
      args.push_back(a);
    }
    auto pid = cluster_.StartProgram("manta_serve", args, log_);
    ASSERT_TRUE(pid.ok()) << pid.status();
    driver_ = *pid;
  }
  bool Healthy() { return Call("GET", "/healthcheck", "").status == 200; }

  struct Reply {
    int status = -1;  // -1: no answer (error says why)
    std::string body;
    httplib::Error error = httplib::Error::Success;
  };
  Reply Call(const std::string& method, const std::string& path, const std::string& body) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(30, 0);
    client.set_connection_timeout(2, 0);
    httplib::Headers headers = {{"Authorization", "Bearer " + cluster_.token()}};
    httplib::Result r = method == "GET" ? client.Get(path.c_str(), headers)
                                        : client.Post(path.c_str(), headers, body, "application/json");
    if (!r) return {-1, "", r.error()};
    return {r->status, r->body, httplib::Error::Success};
  }
  std::string Generate(const std::string& prompt, int max_tokens) {
    Reply r = Call("POST", "/generate", nlohmann::json({{"prompt", prompt}, {"max_tokens", max_tokens}}).dump());
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("response") ? j["response"].get<std::string>() : "";
  }
  int Restarts() { return static_cast<int>(Metric("manta_serve_group_restarts_total")); }
  // A metric's value on the leader's metrics port (the last one it
  // logged); -1 when it cannot be read.
  double Metric(const std::string& name) {
    std::smatch m;
    const std::string text = TailFile(log_, 5000);
    int metrics_port = -1;
    const std::regex logged(R"(metrics: port (\d+))");
    for (std::sregex_iterator it(text.begin(), text.end(), logged), end; it != end; ++it) {
      metrics_port = std::stoi((*it)[1]);
    }
    if (metrics_port < 0) return -1;
    httplib::Client client("127.0.0.1", metrics_port);
    httplib::Result r = client.Get("/metrics", {{"Authorization", "Bearer " + cluster_.token()}});
    if (!r || r->status != 200) return -1;
    const std::string& body = r->body;
    if (!std::regex_search(body, m, std::regex(name + R"(\{[^}]*\} ([0-9.e+]+))"))) return -1;
    return std::stod(m[1]);
  }

  train::TempDir dir_;
  std::string step_dir_;
  Cluster cluster_;
  std::vector<int> hosts_;
  int port_ = 0;
  pid_t driver_ = -1;
  std::string log_;
};

TEST_F(ServeSliceTest, FourHostsServeWhatOneEngineServesAndALostHostRecreatesTheGroup) {
  StartDriver(/*tensor=*/4);
  ASSERT_TRUE(Cluster::WaitFor([&] { return Healthy(); }, absl::Seconds(120))) << TailFile(log_, 60);
  for (const char* prompt : {"the cat", "a dog", "my friend"}) {
    EXPECT_EQ(Generate(prompt, 40), LocalGreedy(prompt, 40, step_dir_)) << prompt;
  }
  const std::string text = TailFile(log_, 200);
  EXPECT_TRUE(
      std::regex_search(text, std::regex(R"(process \d of 4 of the serving group: tensor ranks (\d)\.\.\1 of 4)")))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "Initializing the driver with 1 prefill engines and 1 generate engines"));
  EXPECT_EQ(Restarts(), 0);

  // Clients keep requests in flight while worker 2's host is killed.
  std::atomic<bool> stop{false};
  std::atomic<int> unavailable{0}, hung{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        Reply r = Call("POST", "/generate", R"({"prompt": "the old man", "max_tokens": 60})");
        if (r.status == 503) ++unavailable;
        if (r.status == -1 && r.error == httplib::Error::Read) ++hung;
        if (r.status != 200) return;  // the group is gone: stop knocking
      }
    });
  }
  MANTA_ASSERT_OK(cluster_.KillRaylet(hosts_[2], SIGKILL));
  EXPECT_TRUE(Cluster::WaitFor([&] { return unavailable > 0; }, absl::Seconds(20))) << TailFile(log_, 80);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(hung, 0) << "a request in flight waited instead of failing";

  // A replacement pod for worker 2: the whole group comes back by itself.
  RayletOptions replacement;
  replacement.env = {
      {"TPU_ACCELERATOR_TYPE", "v6e-16"}, {"TPU_TOPOLOGY", "4x4"}, {"TPU_WORKER_ID", "2"}, {"TPU_NAME", "tpu-group-0"}};
  auto added = cluster_.AddRaylet(replacement);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return Healthy(); }, absl::Seconds(120))) << TailFile(log_, 60);
  EXPECT_EQ(Generate("the cat", 40), LocalGreedy("the cat", 40, step_dir_));
  // The new leader's metrics port reaches the log as its output is relayed.
  int restarts = -1;
  EXPECT_TRUE(Cluster::WaitFor([&] { return (restarts = Restarts()) == 1; }, absl::Seconds(30)))
      << "restarts " << restarts;
  EXPECT_TRUE(absl::StrContains(TailFile(log_, 400), "recreating the whole group"));
}

// Prefill on one slice and generate on another, with bf16 weights: the
// same answers as one engine, the K/V of each prompt's true length moved
// between them, and JetStream's lines.
TEST_F(ServeSliceTest, DisaggregatedOverTwoSlicesServesWhatOneEngineServes) {
  auto second = cluster_.AddTpuSlice("tpu-group-1", "v6e-16", "4x4");
  ASSERT_TRUE(second.ok()) << second.status();
  StartDriver(/*tensor=*/4, {"--disaggregated", "--transfer_backlog=2", "--weights=bfloat16"});
  ASSERT_TRUE(Cluster::WaitFor([&] { return Healthy(); }, absl::Seconds(120))) << TailFile(log_, 60);
  auto weights = ServingWeights::Load(step_dir_, 1, 0);
  ASSERT_TRUE(weights.ok()) << weights.status();
  int64_t moved_tokens = 1;  // the warm-up's one-token prompt
  std::vector<std::thread> clients;
  std::vector<std::string> prompts = {"the cat", "a dog", "my friend", "the old man sat on", "a tree."};
  std::vector<std::string> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    moved_tokens += static_cast<int64_t>(weights->tokenizer()->Encode(prompts[i]).size());
    clients.emplace_back([&, i] { got[i] = Generate(prompts[i], 30); });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], LocalGreedy(prompts[i], 30, step_dir_, WeightFormat::kBf16)) << prompts[i];
  }
  const train::ModelShape& m = weights->shape();
  EXPECT_EQ(Metric("manta_serve_kv_transfer_bytes_total"),
            static_cast<double>(2 * m.num_layers * m.num_kv_heads * m.head_dim * 4 * moved_tokens));
  const std::string text = TailFile(log_, 400);
  for (const char* line :
       {"Initializing the driver with 1 prefill engines and 1 generate engines in disaggregated mode",
        "of 4 (prefill), bfloat16 weights", "of 4 (generate), bfloat16 weights", "Spinning up prefill thread 0.",
        "Spinning up transfer thread 0.", "Spinning up generate thread 0.", "Spinning up detokenize thread 0."}) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace manta::serve
