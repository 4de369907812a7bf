// manta_serve as a user runs it: a real process serving a checkpoint the
// trainer wrote, over HTTP with the token.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics/grafana_dashboards.h"
#include "common/process.h"
#include "common/token.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "serve/engine/engine.h"
#include "serve/engine/sampler.h"
#include "serve/server/test_model.h"
#include "tests/http_attacks.h"
#include "tests/raw_socket.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {
namespace {

// One tiny text model trained for the whole suite, and its checkpoint.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new train::TempDir();
    TrainTinyTextModel(dir_->path());
    token_ = GenerateToken();
    ASSERT_TRUE(WriteTokenFile(dir_->path() + "/token", token_).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string StepDir() { return dir_->path() + "/srv/checkpoints/10"; }

  // Starts manta_serve with these config overrides and flags; waits until
  // healthy.
  void Start(const std::vector<std::string>& overrides, const std::vector<std::string>& flags = {}) {
    SpawnOptions opts;
    opts.executable = std::string(std::getenv("MANTA_BIN_DIR")) + "/manta_serve";
    const std::string ready = absl::StrCat(dir_->path(), "/ready.", ++starts_);
    log_ = absl::StrCat(dir_->path(), "/serve.", starts_, ".log");
    opts.args = {"--port=0", "--token_file=" + dir_->path() + "/token", "--ready_file=" + ready};
    opts.args.insert(opts.args.end(), flags.begin(), flags.end());
    for (std::string a : {std::string("--"), std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml",
                          "load_parameters_path=" + StepDir(), std::string("per_device_batch_size=4"),
                          std::string("max_prefill_predict_length=32"), std::string("max_target_length=96"),
                          std::string("prometheus_port=0")}) {
      opts.args.push_back(a);
    }
    opts.args.insert(opts.args.end(), overrides.begin(), overrides.end());
    opts.log_file = log_;
    opts.kill_with_parent = true;
    absl::StatusOr<pid_t> pid = SpawnDaemon(opts);
    ASSERT_TRUE(pid.ok()) << pid.status();
    pid_ = *pid;
    absl::StatusOr<std::string> text = WaitForFile(ready, absl::Now() + absl::Seconds(60), pid_, log_);
    ASSERT_TRUE(text.ok()) << text.status();
    const nlohmann::json j = nlohmann::json::parse(*text);
    port_ = j["port"].get<int>();
    metrics_port_ = j["metrics_port"].get<int>();
    ASSERT_TRUE(
        PollUntil([&] { return Call("GET", "/healthcheck", "").first == 200; }, absl::Now() + absl::Seconds(60)))
        << TailFile(log_, 20);
  }
  void TearDown() override {
    if (pid_ > 0) {
      EXPECT_TRUE(TerminateProcess(pid_, absl::Now() + absl::Seconds(20)).ok());
      std::optional<int> status = ExitStatusOf(pid_);
      if (status) {
        EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
      }
    }
  }

  std::pair<int, std::string> Call(const std::string& method, const std::string& path, const std::string& body,
                                   const std::string& token = "") {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(120, 0);
    httplib::Headers headers = {{"Authorization", "Bearer " + (token.empty() ? token_ : token)}};
    httplib::Result r = method == "GET" ? client.Get(path.c_str(), headers)
                                        : client.Post(path.c_str(), headers, body, "application/json");
    if (!r) return {-1, ""};
    return {r->status, r->body};
  }
  std::string Generate(const std::string& prompt, int max_tokens, bool stream = false) {
    const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}};
    auto [status, text] = Call("POST", "/generate", body.dump());
    EXPECT_EQ(status, 200) << text;
    if (!stream) return nlohmann::json::parse(text)["response"].get<std::string>();
    std::string joined;
    size_t at = 0;
    bool done = false;
    while ((at = text.find("data: ", at)) != std::string::npos) {
      const size_t end = text.find("\n\n", at);
      const std::string data = text.substr(at + 6, end - at - 6);
      if (data == "[DONE]") {
        done = true;
      } else {
        joined += nlohmann::json::parse(data)["response"].get<std::string>();
      }
      at = end;
    }
    EXPECT_TRUE(done) << text;
    return joined;
  }

  // manta_serve_requests_cancelled_total, from the metrics port.
  double CancelledRequests() {
    httplib::Client metrics("127.0.0.1", metrics_port_);
    httplib::Result r = metrics.Get("/metrics", {{"Authorization", "Bearer " + token_}});
    if (!r || r->status != 200) return -1;
    const std::string key = "manta_serve_requests_cancelled_total";
    for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
      if (!absl::StartsWith(line, key) || absl::StartsWith(line, key + "_")) continue;
      double v = -1;
      if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
    }
    return -1;
  }

  static train::TempDir* dir_;
  static std::string token_;
  static int starts_;
  pid_t pid_ = -1;
  int port_ = 0, metrics_port_ = -1;
  std::string log_;
};

train::TempDir* ServerTest::dir_ = nullptr;
std::string ServerTest::token_;
int ServerTest::starts_ = 0;

TEST_F(ServerTest, GreedyAnswersAreTheEnginesStreamedOrNotAndTheSameUnderLoad) {
  Start({});
  const std::string want = LocalGreedy("the cat", 30, StepDir());
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(Generate("the cat", 30), want);
  EXPECT_EQ(Generate("the cat", 30), want);
  EXPECT_EQ(Generate("the cat", 30, /*stream=*/true), want);
  // Sixteen at once, with mixed lengths: each gets its solo answer.
  std::vector<std::string> prompts, solo(16), got(16);
  for (int i = 0; i < 16; ++i) prompts.push_back(std::string(Corpus().substr(i * 7, 3 + i % 20)));
  for (int i = 0; i < 16; ++i) solo[i] = Generate(prompts[i], 5 + 3 * (i % 6));
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) clients.emplace_back([&, i] { got[i] = Generate(prompts[i], 5 + 3 * (i % 6), i % 2); });
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], solo[i]) << "request " << i;

  // JetStream's metrics, with the token.
  httplib::Client metrics("127.0.0.1", metrics_port_);
  httplib::Result r = metrics.Get("/metrics", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  for (const char* name : {"jetstream_time_to_first_token_bucket", "jetstream_time_per_output_token_count",
                           "jetstream_slots_used_percentage", "jetstream_prefill_backlog_size",
                           "jetstream_request_success_count", "jetstream_model_load_time"}) {
    EXPECT_NE(r->body.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r->body.find("jetstream_request_success_count{id="), std::string::npos);
  // Every name of the server's that Manta's Grafana dashboards read.
  auto dashboards = metrics::GrafanaDashboards();
  ASSERT_TRUE(dashboards.ok()) << dashboards.status();
  int read = 0;
  for (const metrics::GrafanaDashboard& d : *dashboards) {
    for (const std::string& name : metrics::DashboardMetricNames(d.model)) {
      if (!absl::StartsWith(name, "jetstream_") && !absl::StartsWith(name, "manta_serve_")) continue;
      ++read;
      // A family, or a histogram's sample (a counter not yet counted has no sample).
      EXPECT_TRUE(absl::StrContains(r->body, "# TYPE " + name + " ") || absl::StrContains(r->body, "\n" + name + "{") ||
                  absl::StrContains(r->body, "\n" + name + " "))
          << d.file_name << " reads " << name << ", which the server does not serve";
    }
  }
  EXPECT_GT(read, 10);
  EXPECT_EQ(metrics.Get("/metrics")->status, 401);
}

TEST_F(ServerTest, TwoTensorRanksServeWhatOneServes) {
  Start({"ici_tensor_parallelism=2"});
  EXPECT_EQ(Generate("a dog", 25), LocalGreedy("a dog", 25, StepDir()));
}

TEST_F(ServerTest, Int8WeightsServeWhatAnInt8EngineServes) {
  Start({}, {"--weights=int8"});
  for (const char* prompt : {"a dog", "the old man"}) {
    EXPECT_EQ(Generate(prompt, 25), LocalGreedy(prompt, 25, StepDir(), WeightFormat::kInt8)) << prompt;
  }
  EXPECT_TRUE(absl::StrContains(TailFile(log_, 20), "1 tensor ranks, 4 slots of 96 tokens, int8 weights"))
      << TailFile(log_, 20);
}

TEST(ServeFlagsTest, AWeightFormatItCannotServeIsRefusedBeforeLoading) {
  SpawnOptions opts;
  opts.executable = std::string(std::getenv("MANTA_BIN_DIR")) + "/manta_serve";
  opts.args = {"--auth=none", "--weights=float16", "--", std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml",
               "load_parameters_path=/nonexistent/checkpoints/1"};
  absl::StatusOr<CommandResult> r = RunAndCapture(opts, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r->err, "--weights must be float32, bfloat16 or int8, got 'float16'")) << r->err;
}

TEST_F(ServerTest, EveryBadRequestIsRefusedWithItsReasonAndTheServerGoesOn) {
  Start({});
  EXPECT_EQ(Call("POST", "/generate", R"({"prompt": "x"})", std::string(64, 'a')).first, 401);
  EXPECT_EQ(Call("GET", "/healthcheck", "", std::string(64, 'b')).first, 401);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"prompt": ""})", "empty"},
      {R"({"prompt": "a", "max_tokens": 0})", "positive"},
      {R"({"prompt": "a", "max_tokens": -1})", "got -1"},
      {"{not json", "not JSON"},
      {R"({"prompt": ")" + std::string(400, 'q') + R"("})", "max_prefill_predict_length"},
      {R"({"prompt": "a", "max_tokens": 1000})", "exceed"},
      {R"({"prompt": "a", "max_tokens": 18446744073709551615})", "18446744073709551615"},
      {R"({"prompt": "a", "top_k": 18446744073709551615})", "18446744073709551615"},
  };
  for (const auto& [body, says] : bad) {
    auto [status, text] = Call("POST", "/generate", body);
    EXPECT_EQ(status, 400) << body.substr(0, 60) << " -> " << text;
    EXPECT_NE(text.find(says), std::string::npos) << text;
  }
  // A body past the route's limit is refused from its head, as JSON.
  auto [status, text] = Call("POST", "/generate", R"({"prompt": ")" + std::string(2 << 20, 'z') + R"("})");
  EXPECT_EQ(status, 413) << text;
  EXPECT_NE(text.find("bytes"), std::string::npos) << text;
  EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).contains("error")) << text;
  EXPECT_EQ(Generate("the cat", 4), LocalGreedy("the cat", 4, StepDir()));
}

TEST_F(ServerTest, AFormEncodedBodyIsReadAsTheJsonItIs) {
  // What `curl -d '{...}'` sends: a form's content type. Past httplib's 8 KB
  // form limit, the answer is still the reason, not a bare 413.
  Start({});
  const std::string body = R"({"prompt": ")" + std::string(9000, 'q') + R"("})";
  testing::HttpAnswer a = testing::RawRequest(
      port_, absl::StrCat("POST /generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", token_,
                          "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ", body.size(),
                          "\r\n\r\n", body));
  EXPECT_EQ(a.status, 400) << a.status_line << " " << a.body;
  EXPECT_NE(a.body.find("max_prefill_predict_length"), std::string::npos) << a.body;
  const std::string small = R"({"prompt": "the cat", "max_tokens": 4})";
  a = testing::RawRequest(port_, absl::StrCat("POST /generate HTTP/1.1\r\nAuthorization: Bearer ", token_,
                                              "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ",
                                              small.size(), "\r\n\r\n", small));
  EXPECT_EQ(a.status, 200) << a.body;
}

TEST_F(ServerTest, HostileClientsAreRefusedFromTheirHeadsOnBothPorts) {
  Start({});
  const std::string auth = "Authorization: Bearer " + token_ + "\r\n";
  for (const auto& target :
       {std::tuple<int, std::string, std::string>{port_, "/generate", "GET /healthcheck HTTP/1.1\r\n" + auth + "\r\n"},
        {metrics_port_, "/metrics", "GET /metrics HTTP/1.1\r\n" + auth + "\r\n"}}) {
    // Named copies: a lambda cannot capture a structured binding in C++17.
    const int port = std::get<0>(target);
    const std::string& path = std::get<1>(target);
    const std::string& probe = std::get<2>(target);
    // Three 200 MB chunked bodies without the token, and a real request meanwhile.
    const int64_t before = testing::RssOf(pid_);
    std::vector<std::string> answers;
    testing::HttpAnswer answer;
    const int64_t peak = testing::PeakRssWhile(pid_, [&] {
      absl::Duration took;
      std::thread real([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // once the bombs are under way
        const absl::Time start = absl::Now();
        answer = testing::RawRequest(port, probe);
        took = absl::Now() - start;
      });
      answers = testing::ChunkedBombs(port, path, uint64_t{200} << 20, 3);
      real.join();
      std::printf("manta_serve %s: a real request during 3 x 200 MB chunked posts: %d in %.0f ms\n", path.c_str(),
                  answer.status, absl::ToDoubleMilliseconds(took));
    });
    std::printf("manta_serve %s: RSS %.1f MB before, %.1f MB at most during, %.1f MB after\n", path.c_str(),
                before / 1048576.0, peak / 1048576.0, testing::RssOf(pid_) / 1048576.0);
    for (const std::string& a : answers) EXPECT_EQ(a.substr(0, 12), "HTTP/1.1 401") << path << ": " << a;
    EXPECT_LE(peak - before, 32 << 20) << path << ": " << before << " -> " << peak;
    EXPECT_EQ(answer.status, 200) << answer.status_line;
    // 60 bodies a byte a second with a wrong token: answered from their heads.
    testing::Trickle slow(
        port, "POST " + path + " HTTP/1.1\r\nAuthorization: Bearer wrong\r\nContent-Length: 100000\r\n\r\n", 60);
    EXPECT_TRUE(PollUntil([&] { return slow.Answered() == 60; }, absl::Now() + absl::Seconds(10))) << slow.Answered();
    EXPECT_EQ(testing::RawRequest(port, probe).status, 200);
  }
}

TEST_F(ServerTest, ARequestWhoseClientHungUpIsDroppedNotDecoded) {
  // Long answers, four slots: sixteen requests that would take a while.
  Start({"max_target_length=1024"});
  const std::string body = R"({"prompt": "the cat", "max_tokens": 990})";
  for (int i = 0; i < 16; ++i) {
    int fd = testing::ConnectLoopback(port_);
    ASSERT_GE(fd, 0);
    const std::string request = absl::StrCat("POST /generate HTTP/1.1\r\nAuthorization: Bearer ", token_,
                                             "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    close(fd);  // and gone
  }
  // Each is dropped: the batcher frees its slot or never gives it one.
  EXPECT_TRUE(PollUntil([&] { return CancelledRequests() == 16; }, absl::Now() + absl::Seconds(30)))
      << CancelledRequests() << " of 16 were dropped";
  EXPECT_EQ(Generate("the cat", 3), LocalGreedy("the cat", 3, StepDir()));
}

TEST_F(ServerTest, ResidentMemoryStaysFlatOverAThousandRequests) {
#if defined(MANTA_TSAN)
  // TSan keeps state for every thread and lock it has seen, so resident
  // memory grows with requests there; leaks are the ASan build's to find.
  GTEST_SKIP() << "resident memory is not the server's own under ThreadSanitizer";
#elif defined(__SANITIZE_ADDRESS__)
  // ASan holds freed memory in its quarantine (256 MB) before reusing it, so
  // resident memory grows until that fills; LeakSanitizer finds the leaks.
  GTEST_SKIP() << "resident memory is not the server's own under AddressSanitizer";
#endif
  Start({});
  auto round = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const nlohmann::json body = {
          {"prompt", "the cat " + std::to_string(i)}, {"max_tokens", 4 + i % 8}, {"stream", i % 3 == 0}};
      ASSERT_EQ(Call("POST", "/generate", body.dump()).first, 200);
    }
  };
  round(200);  // allocators and caches reach their working size
  const int64_t before = ResidentBytes(pid_);
  round(1000);
  const int64_t after = ResidentBytes(pid_);
  ASSERT_GT(before, 0);
  std::printf("manta_serve RSS %.1f MB -> %.1f MB over 1000 requests\n", before / 1048576.0, after / 1048576.0);
  EXPECT_LT(after - before, 2 << 20) << before << " -> " << after;
}

}  // namespace
}  // namespace manta::serve
