#include "gcs/health_check_manager.h"

#include <vector>

#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

// Records checks; the test delivers their outcomes.
class FakeHealthCheckClient : public HealthCheckClient {
 public:
  struct Pending {
    NodeId node;
    std::function<void(const absl::Status&)> done;
  };
  void Check(const NodeId& node, const std::string&, absl::Duration,
             std::function<void(const absl::Status&)> done) override {
    pending.push_back({node, std::move(done)});
  }
  void Forget(const NodeId& node) override { forgotten.push_back(node); }
  void ReplyAll(const absl::Status& s) {
    auto p = std::move(pending);
    pending.clear();
    for (auto& c : p) c.done(s);
  }
  std::vector<Pending> pending;
  std::vector<NodeId> forgotten;
};

class HealthCheckManagerTest : public ::testing::Test {
 protected:
  HealthCheckOptions Options() {
    HealthCheckOptions o;
    o.period = absl::Seconds(2);
    o.suspect_period = absl::Milliseconds(100);
    o.failure_threshold = 3;
    return o;
  }
  HealthCheckManager::Clock Clock() {
    return [this] { return now_; };
  }
  // Routine checks as rare as NodeFailureTest makes them: only suspicion
  // sends checks.
  HealthCheckOptions RareRoutineChecks() {
    HealthCheckOptions o = Options();
    o.period = absl::Minutes(10);
    return o;
  }
  // Records each node declared dead in dead_.
  HealthCheckManager::DeathCallback RecordDeaths() {
    return [this](const NodeId& n, const std::string& why) {
      dead_.push_back(n);
      reasons_.push_back(why);
    };
  }
  // Advances time by `d` and ticks.
  void Advance(HealthCheckManager& m, absl::Duration d) {
    now_ += d;
    m.Tick();
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  FakeHealthCheckClient client_;
  std::vector<NodeId> dead_;
  std::vector<std::string> reasons_;  // why, beside each of dead_
};

TEST_F(HealthCheckManagerTest, RoutineChecksFollowThePeriod) {
  HealthCheckManager m(
      &client_, Options(), [](const NodeId&, const std::string&) {}, Clock());
  m.AddNode(NodeId::FromRandom(), "127.0.0.1:1");
  Advance(m, absl::Seconds(1));
  EXPECT_TRUE(client_.pending.empty());
  Advance(m, absl::Seconds(1));
  EXPECT_EQ(client_.pending.size(), 1u);
}

TEST_F(HealthCheckManagerTest, DeclaresDeathAfterThresholdConsecutiveFailures) {
  std::vector<NodeId> dead;
  HealthCheckManager m(
      &client_, Options(), [&](const NodeId& n, const std::string&) { dead.push_back(n); }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  for (int i = 0; i < 2; ++i) {
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::UnavailableError("refused"));
  }
  EXPECT_TRUE(dead.empty());
  Advance(m, absl::Seconds(2));
  client_.ReplyAll(absl::UnavailableError("refused"));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0], a);
  EXPECT_EQ(m.num_nodes(), 0u);
  EXPECT_EQ(client_.forgotten.size(), 1u);
}

TEST_F(HealthCheckManagerTest, SuspectedNodeIsCheckedAtOnceAndOften) {
  std::vector<NodeId> dead;
  HealthCheckManager m(
      &client_, Options(), [&](const NodeId& n, const std::string&) { dead.push_back(n); }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  m.Suspect(a);
  ASSERT_EQ(client_.pending.size(), 1u);  // no waiting for the period
  client_.ReplyAll(absl::UnavailableError("refused"));
  for (int i = 0; i < 2; ++i) {
    Advance(m, absl::Milliseconds(100));
    client_.ReplyAll(absl::UnavailableError("refused"));
  }
  ASSERT_EQ(dead.size(), 1u);  // dead 200 ms after suspicion
}

TEST_F(HealthCheckManagerTest, SuccessResetsTheCountAndClearsSuspicion) {
  int deaths = 0;
  HealthCheckManager m(
      &client_, Options(), [&](const NodeId&, const std::string&) { ++deaths; }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 2; ++i) {
      Advance(m, absl::Seconds(2));
      client_.ReplyAll(absl::DeadlineExceededError("slow"));
    }
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::OkStatus());
  }
  EXPECT_EQ(deaths, 0);
  m.Suspect(a);
  client_.ReplyAll(absl::OkStatus());
  Advance(m, absl::Milliseconds(100));
  EXPECT_TRUE(client_.pending.empty());  // back to the routine period
}

TEST_F(HealthCheckManagerTest, OneCheckInFlightPerNodeAndLateResultsIgnored) {
  int deaths = 0;
  HealthCheckOptions o = Options();
  o.failure_threshold = 1;
  HealthCheckManager m(
      &client_, o, [&](const NodeId&, const std::string&) { ++deaths; }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  Advance(m, absl::Seconds(2));
  Advance(m, absl::Seconds(2));
  m.Suspect(a);
  EXPECT_EQ(client_.pending.size(), 1u);
  m.RemoveNode(a);
  m.AddNode(a, "127.0.0.1:2");  // re-added: the old outcome belongs to the old registration
  client_.ReplyAll(absl::UnavailableError("refused"));
  EXPECT_EQ(deaths, 0);
  EXPECT_EQ(m.num_nodes(), 1u);
}

// Timeouts are weaker evidence than refusals: a node that only answers
// slowly is dead only after `unresponsive_timeout` without an answer, so a
// loaded host keeps its workers; one answer in between starts it over.
TEST_F(HealthCheckManagerTest, ANodeThatOnlyTimesOutIsDeadOnlyAfterTheUnresponsiveTimeout) {
  std::vector<std::string> reasons;
  HealthCheckOptions o = Options();
  o.unresponsive_timeout = absl::Seconds(15);
  HealthCheckManager m(
      &client_, o, [&](const NodeId&, const std::string& why) { reasons.push_back(why); }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  // 7 timed-out checks, 2 s apart: 14 s without an answer, far past the threshold of 3.
  for (int i = 0; i < 7; ++i) {
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
  }
  EXPECT_TRUE(reasons.empty());
  Advance(m, absl::Seconds(2));
  client_.ReplyAll(absl::OkStatus());  // it answers after all
  for (int i = 0; i < 7; ++i) {
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
  }
  EXPECT_TRUE(reasons.empty()) << "the count restarted at the answer";
  Advance(m, absl::Seconds(2));
  client_.ReplyAll(absl::DeadlineExceededError("slow"));  // 16 s since the answer
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("no answer for 16s"), std::string::npos) << reasons[0];
  EXPECT_EQ(m.num_nodes(), 0u);
}

// Refusals prove the node's process is gone: a run of them is a death at
// once, whatever the unresponsive timeout.
TEST_F(HealthCheckManagerTest, RefusalsAloneAreFastEvenWithALongUnresponsiveTimeout) {
  int deaths = 0;
  HealthCheckOptions o = Options();
  o.unresponsive_timeout = absl::Minutes(10);
  HealthCheckManager m(
      &client_, o, [&](const NodeId&, const std::string&) { ++deaths; }, Clock());
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  m.Suspect(a);
  client_.ReplyAll(absl::UnavailableError("refused"));
  for (int i = 0; i < 2; ++i) {
    Advance(m, absl::Milliseconds(100));
    client_.ReplyAll(absl::UnavailableError("refused"));
  }
  EXPECT_EQ(deaths, 1);
}

// A raylet killed between a poll's answer and its next poll drops no held
// poll: holding none for repoll_timeout after an answer makes it a suspect.
TEST_F(HealthCheckManagerTest, ANodeHoldingNoPollLongAfterAnAnswerIsSuspected) {
  HealthCheckOptions o = RareRoutineChecks();
  o.repoll_timeout = absl::Seconds(2);
  HealthCheckManager m(&client_, o, RecordDeaths(), Clock());
  NodeId polling = NodeId::FromRandom(), gone = NodeId::FromRandom();
  m.AddNode(polling, "127.0.0.1:1");
  m.AddNode(gone, "127.0.0.1:2");
  Advance(m, absl::Milliseconds(100));
  client_.ReplyAll(absl::OkStatus());  // the first routine checks
  for (const NodeId& n : {polling, gone}) {
    m.PollStarted(n);
    m.PollAnswered(n);
  }
  m.PollStarted(polling);  // polls again; `gone` never does
  Advance(m, absl::Seconds(1));
  EXPECT_TRUE(client_.pending.empty()) << "within repoll_timeout";
  Advance(m, absl::Seconds(1));
  ASSERT_EQ(client_.pending.size(), 1u);
  EXPECT_EQ(client_.pending[0].node, gone);
  // Its checks are refused, as a killed raylet's are: dead after three.
  client_.ReplyAll(absl::UnavailableError("refused"));
  for (int i = 0; i < 2; ++i) {
    Advance(m, o.suspect_period);
    client_.ReplyAll(absl::UnavailableError("refused"));
  }
  ASSERT_EQ(dead_.size(), 1u);
  EXPECT_EQ(dead_[0], gone);

  // A live node slow to poll again answers its check and stays; it is
  // watched again only from its next answer.
  m.PollAnswered(polling);
  Advance(m, absl::Seconds(2));
  ASSERT_EQ(client_.pending.size(), 1u);
  client_.ReplyAll(absl::OkStatus());
  Advance(m, absl::Seconds(5));
  EXPECT_TRUE(client_.pending.empty());
  EXPECT_EQ(m.num_nodes(), 1u);
}

// A poll is a sign of life: a node suspected for polling late whose checks
// then time out gets the whole unresponsive_timeout from its last poll,
// however long ago its last routine check was.
TEST_F(HealthCheckManagerTest, ALatePollersTimeoutsCountFromItsLastPoll) {
  HealthCheckOptions o = RareRoutineChecks();
  o.unresponsive_timeout = absl::Seconds(15);
  HealthCheckManager m(&client_, o, RecordDeaths(), Clock());
  NodeId slow = NodeId::FromRandom();
  m.AddNode(slow, "127.0.0.1:1");
  Advance(m, absl::Milliseconds(100));
  client_.ReplyAll(absl::OkStatus());
  Advance(m, absl::Minutes(1));  // no routine check since
  m.PollStarted(slow);
  m.PollAnswered(slow);
  Advance(m, absl::Seconds(2));  // no poll again: suspected
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(client_.pending.size(), 1u) << i;
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
    Advance(m, o.suspect_period);
  }
  EXPECT_TRUE(dead_.empty()) << "timeouts within 15 s of its last poll";
  for (int i = 0; i < 150 && dead_.empty(); ++i) {
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
    Advance(m, o.suspect_period);
  }
  EXPECT_EQ(dead_.size(), 1u) << "a node that stays silent is still found";
}

// A raylet holding its stream starts no polls: what its loop does for the
// GCS (a report, an answered call) is its sign of life. Its timed-out checks
// count from the last one; refusals are fast as ever.
TEST_F(HealthCheckManagerTest, ANodeAliveBetweenTimeoutsIsNotDeclaredDead) {
  HealthCheckOptions o = Options();
  o.unresponsive_timeout = absl::Seconds(15);
  HealthCheckManager m(&client_, o, RecordDeaths(), Clock());
  const std::vector<std::string>& reasons = reasons_;
  NodeId a = NodeId::FromRandom();
  m.AddNode(a, "127.0.0.1:1");
  m.PollStarted(a);               // its stream, held throughout
  for (int i = 0; i < 20; ++i) {  // 40 s of timed-out checks, alive every 10 s
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
    if (i % 5 == 4) m.Alive(a);
  }
  EXPECT_TRUE(reasons.empty());
  for (int i = 0; i < 8; ++i) {  // silent from here: dead 15 s after the last sign
    Advance(m, absl::Seconds(2));
    client_.ReplyAll(absl::DeadlineExceededError("slow"));
  }
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("no answer for 16s"), std::string::npos) << reasons[0];
  m.Alive(a);  // a node already gone: nothing
  EXPECT_EQ(m.num_nodes(), 0u);
}

}  // namespace
}  // namespace manta::gcs
