// RedisStore against a real redis-server started by each test.
#include "gcs/redis_store.h"

#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "gcs/redis_server_process.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

#define ASSERT_OK(expr)                                 \
  do {                                                  \
    ::absl::Status assert_status_ = (expr);             \
    ASSERT_TRUE(assert_status_.ok()) << assert_status_; \
  } while (0)

constexpr absl::Duration kDeadline = absl::Seconds(30);

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServerProcess::Installed()) GTEST_SKIP() << RedisServerProcess::kNotInstalled;
  }

  RedisStoreOptions Options(const RedisServerProcess& redis, const std::string& ns = "test") {
    RedisStoreOptions o;
    o.endpoint = redis.endpoint();
    o.ns = ns;
    o.min_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(100);
    return o;
  }

  // Runs the loop's posted callbacks until `done` holds or the deadline.
  bool PumpUntil(const std::function<bool()>& done) {
    return PollUntil(
        [&] {
          Pump(loop_, 1);
          return done();
        },
        absl::Now() + kDeadline);
  }

  // HGET of the raw hash, bypassing the store.
  std::string Get(RedisServerProcess& redis, const std::string& hash, const std::string& key) {
    auto reply = redis.Command({"HGET", hash, key});
    return reply.ok() ? reply->str : "<" + reply.status().ToString() + ">";
  }

  EventLoop loop_;
};

TEST_F(RedisStoreTest, WritesApplyInOrderAndReadAllIsOrderedByKey) {
  RedisServerProcess redis;
  ASSERT_OK(redis.Start());
  auto store = RedisStore::Open(Options(redis), &loop_);
  ASSERT_OK(store.status());
  std::vector<int> completed;  // indices, in the order their `done` ran
  for (int i = 0; i < 100; ++i) {
    (*store)->Put("t", "k" + std::to_string(i % 10), "v" + std::to_string(i), [&completed, i](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      completed.push_back(i);
    });
  }
  (*store)->Delete("t", "k0", [&](const absl::Status& s) { completed.push_back(100); });
  for (std::string key : {std::string("\xff", 1), std::string("b"), std::string("\0z", 2), std::string("a")}) {
    (*store)->Put("bin", key, std::string("\0\1", 2), nullptr);
  }
  EXPECT_TRUE(completed.empty());  // never inline
  ASSERT_TRUE(PumpUntil([&] { return completed.size() == 101; })) << completed.size();
  for (size_t i = 0; i < completed.size(); ++i) EXPECT_EQ(completed[i], static_cast<int>(i));

  auto rows = (*store)->ReadAll("t");
  ASSERT_OK(rows.status());
  ASSERT_EQ(rows->size(), 9u);
  EXPECT_EQ((*rows)[0].first, "k1");
  EXPECT_EQ((*rows)[0].second, "v91");  // the last write of k1 wins
  EXPECT_EQ((*rows)[8].first, "k9");
  // The layout is Ray's: a hash per table, named <namespace>@<table>.
  EXPECT_EQ(Get(redis, "test@t", "k5"), "v95");
  EXPECT_EQ(redis.Command({"HEXISTS", "test@t", "k0"})->integer, 0);

  // Binary keys and values; byte order, as SQLite's BLOBs.
  ASSERT_TRUE(PumpUntil([&] { return (*store)->ReadAll("bin")->size() == 4; }));
  auto bin = (*store)->ReadAll("bin");
  ASSERT_OK(bin.status());
  std::vector<std::string> keys;
  for (const auto& [k, v] : *bin) {
    keys.push_back(k);
    EXPECT_EQ(v, std::string("\0\1", 2));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{std::string("\0z", 2), "a", "b", std::string("\xff", 1)}));
  EXPECT_TRUE((*store)->ReadAll("missing")->empty());
}

TEST_F(RedisStoreTest, ANewStoreFindsTheTablesOfItsNamespaceOnly) {
  RedisServerProcess redis;
  ASSERT_OK(redis.Start());
  {
    auto store = RedisStore::Open(Options(redis, "cluster-a"), &loop_);
    ASSERT_OK(store.status());
    for (int i = 0; i < 1500; ++i) {  // more than one HSCAN round and one pipeline
      (*store)->Put("nodes", "n" + std::to_string(10000 + i), "info" + std::to_string(i), nullptr);
    }
    (*store)->Put("kv", "key", "value", nullptr);
  }  // the destructor sends every queued write
  Pump(loop_);
  auto again = RedisStore::Open(Options(redis, "cluster-a"), &loop_);
  ASSERT_OK(again.status());
  auto nodes = (*again)->ReadAll("nodes");
  ASSERT_OK(nodes.status());
  ASSERT_EQ(nodes->size(), 1500u);
  EXPECT_EQ(nodes->front().first, "n10000");
  EXPECT_EQ(nodes->back().second, "info1499");
  EXPECT_EQ((*again)->ReadAll("kv")->size(), 1u);

  auto other = RedisStore::Open(Options(redis, "cluster-b"), &loop_);
  ASSERT_OK(other.status());
  EXPECT_TRUE((*other)->ReadAll("nodes")->empty());
}

TEST_F(RedisStoreTest, APasswordIsNeededAndChecked) {
  RedisServerProcess redis({.password = "s3cret:@/"});
  ASSERT_OK(redis.Start());
  RedisStoreOptions o = Options(redis);
  o.endpoint.password.clear();
  auto none = RedisStore::Open(o, &loop_);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kPermissionDenied) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(), "requires a password")) << none.status();
  o.endpoint.password = "wrong";
  auto wrong = RedisStore::Open(o, &loop_);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied) << wrong.status();
  EXPECT_FALSE(absl::StrContains(wrong.status().message(), "wrong"));  // the password is never shown

  auto store = RedisStore::Open(Options(redis), &loop_);
  ASSERT_OK(store.status());
  bool done = false;
  (*store)->Put("t", "k", "v", [&](const absl::Status& s) { done = s.ok(); });
  ASSERT_TRUE(PumpUntil([&] { return done; }));
  EXPECT_EQ(Get(redis, "test@t", "k"), "v");
}

TEST_F(RedisStoreTest, AnUnreachableRedisIsAClearError) {
  auto port = PickFreePort();  // nothing listens there
  ASSERT_OK(port.status());
  RedisStoreOptions o;
  o.endpoint.port = *port;
  auto store = RedisStore::Open(o, &loop_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::StrContains(store.status().message(), "cannot connect to Redis at 127.0.0.1:" + std::to_string(*port)))
      << store.status();
  o.ns = "";
  EXPECT_EQ(RedisStore::Open(o, &loop_).status().code(), absl::StatusCode::kInvalidArgument);
}

// A key that is not a hash cannot take rows: that write fails, later ones
// do not.
TEST_F(RedisStoreTest, AWriteRedisRefusesFailsAloneAndIsNotRetried) {
  RedisServerProcess redis;
  ASSERT_OK(redis.Start());
  ASSERT_OK(redis.Command({"SET", "test@broken", "a string"}).status());
  auto store = RedisStore::Open(Options(redis), &loop_);
  ASSERT_OK(store.status());
  std::vector<absl::Status> results;
  (*store)->Put("broken", "k", "v", [&](const absl::Status& s) { results.push_back(s); });
  (*store)->Put("fine", "k", "v", [&](const absl::Status& s) { results.push_back(s); });
  ASSERT_TRUE(PumpUntil([&] { return results.size() == 2; }));
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(results[0].message(), "WRONGTYPE")) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  EXPECT_EQ((*store)->ReadAll("broken").status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*store)->connection_failures(), 0);
}

// Redis killed while writes flow and started again (its append-only file
// keeps what it acknowledged): nothing is reported done while it is down,
// every write is sent again in order, and the table ends as written.
TEST_F(RedisStoreTest, WritesInterruptedByARedisRestartAreRetriedInOrder) {
  RedisServerProcess redis({.durable = true});
  ASSERT_OK(redis.Start());
  auto store = RedisStore::Open(Options(redis), &loop_);
  ASSERT_OK(store.status());
  constexpr int kBefore = 3000;
  constexpr int kWhileDown = 200;
  std::vector<int> completed;
  auto put = [&](int i) {
    (*store)->Put("t", "k" + std::to_string(i % 1000), "v" + std::to_string(i), [&completed, i](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      completed.push_back(i);
    });
  };
  for (int i = 0; i < kBefore; ++i) put(i);
  ASSERT_TRUE(PumpUntil([&] { return !completed.empty(); }));
  ASSERT_OK(redis.Kill());  // likely with writes queued or in flight
  for (int i = kBefore; i < kBefore + kWhileDown; ++i) put(i);
  // The writer has found Redis gone more than once: it is retrying.
  ASSERT_TRUE(PumpUntil([&] { return (*store)->connection_failures() >= 3; }));
  Pump(loop_);
  const size_t done_while_down = completed.size();
  EXPECT_LT(done_while_down, static_cast<size_t>(kBefore + kWhileDown));
  // Every write reported done so far is in the append-only file: each key
  // holds its last write reported done, or a later one Redis took but could
  // not acknowledge.
  ASSERT_OK(redis.Start());
  auto all = redis.Command({"HGETALL", "test@t"});
  ASSERT_OK(all.status());
  std::map<std::string, int> stored;
  for (size_t i = 0; i + 1 < all->elements.size(); i += 2) {
    stored[all->elements[i].str] = std::stoi(all->elements[i + 1].str.substr(1));
  }
  for (int i : completed) {
    std::string key = "k" + std::to_string(i % 1000);
    ASSERT_TRUE(stored.count(key)) << key << " was reported done but is not in Redis";
    EXPECT_GE(stored[key], i) << key;
    EXPECT_EQ(stored[key] % 1000, i % 1000) << key;
  }
  ASSERT_TRUE(PumpUntil([&] { return completed.size() == static_cast<size_t>(kBefore + kWhileDown); }))
      << completed.size();
  for (size_t i = 0; i < completed.size(); ++i) ASSERT_EQ(completed[i], static_cast<int>(i));
  auto rows = (*store)->ReadAll("t");  // its read connection is new too
  ASSERT_OK(rows.status());
  ASSERT_EQ(rows->size(), 1000u);
  for (const auto& [k, v] : *rows) {
    int key = std::stoi(k.substr(1));
    int last = key + 1000 * ((kBefore + kWhileDown - 1 - key) / 1000);
    EXPECT_EQ(v, "v" + std::to_string(last)) << k;
  }
}

}  // namespace
}  // namespace manta::gcs
