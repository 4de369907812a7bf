#include "raylet/log_forwarder.h"

#include <uv.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <utility>

#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

class LogForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_log_forwarder_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    files_.worker_id = WorkerId::FromRandom();
    files_.job_id = *JobId::FromBinary(std::string("\0\0\0\5", 4));
    files_.pid = 4242;
    files_.out_path = dir_ + "/w.out";
    files_.err_path = dir_ + "/w.err";
    Append(files_.out_path, "");
    Append(files_.err_path, "");
    Start(absl::Milliseconds(20));
  }
  void Start(absl::Duration flush_interval) {
    LogForwarderOptions o;
    o.node_ip = "10.1.2.3";
    o.flush_interval = flush_interval;
    forwarder_ = std::make_unique<LogForwarder>(o, &loop_, [this](rpc::LogBatch b, std::function<void()> answered) {
      batches_.push_back(b);
      if (answer_at_once_) return answered();
      unanswered_.push_back(std::move(answered));
    });
  }
  void AnswerAll() {
    for (auto& a : std::exchange(unanswered_, {})) a();
  }
  void TearDown() override {
    forwarder_.reset();
    std::filesystem::remove_all(dir_);
  }

  static void Append(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "a");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  std::vector<std::string> Lines(bool is_error) const {
    std::vector<std::string> out;
    for (const auto& b : batches_) {
      if (b.is_error() == is_error) out.insert(out.end(), b.lines().begin(), b.lines().end());
    }
    return out;
  }

  bool RunUntil(const std::function<bool()>& cond) {
    absl::Time deadline = absl::Now() + absl::Seconds(20);
    auto wake = loop_.RunEvery(absl::Milliseconds(10), [] {});
    while (!cond()) {
      if (absl::Now() > deadline) return false;
      uv_run(loop_.uv_loop(), UV_RUN_ONCE);
    }
    return true;
  }

  EventLoop loop_;
  std::string dir_;
  WorkerLogFiles files_;
  std::vector<rpc::LogBatch> batches_;
  bool answer_at_once_ = true;
  int flushes_done_ = 0;  // FlushJob's callbacks: members, as they may run in TearDown
  std::vector<std::function<void()>> unanswered_;
  std::unique_ptr<LogForwarder> forwarder_;
};

TEST_F(LogForwarderTest, ForwardsCompleteLinesAndTheRestAtExit) {
  Append(files_.out_path, "before start\n");
  forwarder_->AddWorker(files_);
  forwarder_->SetName(files_.worker_id, "Counter");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 1; }));
  EXPECT_FALSE(forwarder_->flush_armed()) << "nothing armed once the output is sent";
  Append(files_.out_path, "one\ntwo\npart");
  Append(files_.err_path, "oops\n");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 3 && Lines(true).size() == 1; }));
  EXPECT_EQ(Lines(false), std::vector<std::string>({"before start", "one", "two"}));
  EXPECT_EQ(Lines(true), std::vector<std::string>({"oops"}));
  const rpc::LogBatch& b = batches_.back();
  EXPECT_EQ(b.job_id(), files_.job_id.Binary());
  EXPECT_EQ(b.ip(), "10.1.2.3");
  EXPECT_EQ(b.pid(), 4242);
  EXPECT_EQ(b.actor_name(), "Counter");
  forwarder_->RemoveWorker(files_.worker_id);
  ASSERT_TRUE(RunUntil([&] { return forwarder_->num_tails() == 0 && !forwarder_->flush_armed(); }));
  EXPECT_EQ(Lines(false).back(), "part");
}

TEST_F(LogForwarderTest, OutputThatIsNotUtf8IsForwardedAsValidText) {
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "caf\xC3\xA9 ok\nbinary \xFF\xFE\n");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 2; }));
  EXPECT_EQ(Lines(false)[0], "caf\xC3\xA9 ok");
  EXPECT_EQ(Lines(false)[1], "binary \xEF\xBF\xBD\xEF\xBF\xBD");
  // Every batch would parse at the GCS.
  for (const auto& b : batches_) {
    rpc::LogBatch parsed;
    EXPECT_TRUE(parsed.ParseFromString(b.SerializeAsString()));
  }
}

TEST_F(LogForwarderTest, ManyWritesBecomeFewBatches) {
  forwarder_->AddWorker(files_);
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "line " + std::to_string(i) + "\n";
  Append(files_.out_path, text);
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 1000; }));
  EXPECT_LE(batches_.size(), 3u);
  EXPECT_EQ(Lines(false)[999], "line 999");
}

TEST_F(LogForwarderTest, BatchesGoOneAtATimeAndInOrder) {
  answer_at_once_ = false;
  forwarder_->AddWorker(files_);
  std::string text;
  const std::string pad(1000, '.');
  for (int i = 0; i < 2000; ++i) text += std::to_string(i) + pad + "\n";  // 2 MB: several batches
  Append(files_.out_path, text);
  size_t most_unanswered = 0;
  ASSERT_TRUE(RunUntil([&] {
    most_unanswered = std::max(most_unanswered, unanswered_.size());
    AnswerAll();
    return Lines(false).size() == 2000;
  }));
  EXPECT_EQ(most_unanswered, 1u);
  EXPECT_GE(batches_.size(), 8u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(Lines(false)[i], std::to_string(i) + pad);
}

TEST_F(LogForwarderTest, FlushJobForwardsWhatWasWrittenAndAnswersOnceTheGcsHasIt) {
  Start(absl::Hours(1));  // after the first batch, only a flush sends more
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "first\n");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 1; }));
  answer_at_once_ = false;
  Append(files_.out_path, "second\nthird\n");
  Append(files_.err_path, "warning\n");
  forwarder_->FlushJob(files_.job_id, [&] { ++flushes_done_; });
  ASSERT_TRUE(RunUntil([&] {
    if (Lines(false).size() == 3 && Lines(true).size() == 1) return true;
    AnswerAll();  // all but the last batch
    return false;
  }));
  EXPECT_EQ(Lines(false), std::vector<std::string>({"first", "second", "third"}));
  EXPECT_EQ(flushes_done_, 0) << "answered before the GCS took the last lines";
  EXPECT_FALSE(forwarder_->flush_armed());
  AnswerAll();
  ASSERT_TRUE(RunUntil([&] { return flushes_done_ == 1; }));
  EXPECT_EQ(forwarder_->num_job_flushes(), 0u);
}

TEST_F(LogForwarderTest, FlushJobWaitsForBatchesSentBeforeIt) {
  Start(absl::Hours(1));
  answer_at_once_ = false;
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "on its way\n");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 1; }));
  // Another job's flush has nothing of its own to read or send, but the
  // batch already sent may hold its lines: it waits for that answer too.
  forwarder_->FlushJob(*JobId::FromBinary(std::string("\0\0\0\6", 4)), [&] { ++flushes_done_; });
  EXPECT_EQ(forwarder_->num_job_flushes(), 1u);
  EXPECT_EQ(flushes_done_, 0);
  EXPECT_EQ(batches_.size(), 1u);
  AnswerAll();
  ASSERT_TRUE(RunUntil([&] { return flushes_done_ == 1; }));
}

TEST_F(LogForwarderTest, FilesAreOpenedOffTheLoopAndOneThatCannotBeLeavesNoTail) {
  // The open is answered on the loop later, not within AddWorker.
  files_.err_path = dir_ + "/missing/w.err";
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "written while opening\n");
  forwarder_->FlushJob(files_.job_id, [&] { ++flushes_done_; });
  EXPECT_EQ(flushes_done_, 0) << "a flush waits for the files being opened";
  ASSERT_TRUE(RunUntil([&] { return flushes_done_ == 1; }));
  EXPECT_EQ(Lines(false), std::vector<std::string>({"written while opening"}));
  EXPECT_EQ(forwarder_->num_tails(), 1u) << "the file that cannot be opened is not followed";
}

TEST_F(LogForwarderTest, DestroyedWithOpensInFlightClosesWhatTheyOpen) {
  auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator());
  };
  const auto before = open_fds();
  forwarder_->AddWorker(files_);
  forwarder_.reset();  // the opens' callbacks close the files and free the orphaned tails
  EXPECT_TRUE(RunUntil([&] { return open_fds() <= before; })) << "a file opened for a destroyed forwarder stays open";
}

TEST_F(LogForwarderTest, FlushJobCountsAnExitedWorkersLastLine) {
  Start(absl::Hours(1));
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "no newline at exit");
  forwarder_->RemoveWorker(files_.worker_id);
  forwarder_->FlushJob(files_.job_id, [&] { ++flushes_done_; });
  ASSERT_TRUE(RunUntil([&] { return flushes_done_ == 1; }));
  EXPECT_EQ(Lines(false), std::vector<std::string>({"no newline at exit"}));
  EXPECT_EQ(forwarder_->num_tails(), 0u);
}

TEST_F(LogForwarderTest, FlushJobForwardsALastLineWithoutItsNewline) {
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "done\nprogress 99%");
  forwarder_->FlushJob(files_.job_id, [&] { ++flushes_done_; });
  ASSERT_TRUE(RunUntil([&] { return flushes_done_ == 1; }));
  EXPECT_EQ(Lines(false), std::vector<std::string>({"done", "progress 99%"}));
  Append(files_.out_path, ", 100%\n");
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 3; }));
  EXPECT_EQ(Lines(false).back(), ", 100%");
}

TEST_F(LogForwarderTest, FlushesStillWaitingAreAnsweredWhenTheForwarderGoes) {
  answer_at_once_ = false;
  forwarder_->AddWorker(files_);
  Append(files_.out_path, "unanswered\n");
  forwarder_->FlushJob(files_.job_id, [&] { ++flushes_done_; });
  ASSERT_TRUE(RunUntil([&] { return Lines(false).size() == 1; }));
  EXPECT_EQ(flushes_done_, 0);
  forwarder_.reset();
  EXPECT_EQ(flushes_done_, 1);
  AnswerAll();  // answers after the forwarder is gone change nothing
}

}  // namespace
}  // namespace manta::raylet
