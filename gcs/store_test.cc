#include <unistd.h>

#include <cstdlib>

#include "gcs/in_memory_store.h"
#include "gcs/sqlite_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

TEST(SqliteStoreTest, WritesSurviveReopenInOrder) {
  ScopedTempDir dir("manta_store_test");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/store.sqlite";
  EventLoop loop;
  int completed = 0;
  {
    auto store = SqliteStore::Open(path, &loop);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 100; ++i) {
      (*store)->Put("t", "k" + std::to_string(i % 10), "v" + std::to_string(i),
                    [&](const absl::Status& s) { completed += s.ok(); });
    }
    (*store)->Delete("t", "k0", [&](const absl::Status& s) { completed += s.ok(); });
    (*store)->Put("other", std::string("bin\0key", 7), std::string("\0\1", 2), nullptr);
  }  // the destructor applies every queued write
  Pump(loop);
  EXPECT_EQ(completed, 101);
  auto store = SqliteStore::Open(path, &loop);
  ASSERT_TRUE(store.ok());
  auto rows = (*store)->ReadAll("t");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 9u);
  EXPECT_EQ((*rows)[0].first, "k1");
  EXPECT_EQ((*rows)[0].second, "v91");  // the last write of k1 wins
  auto other = (*store)->ReadAll("other");
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0].first, std::string("bin\0key", 7));
  EXPECT_EQ((*other)[0].second, std::string("\0\1", 2));
}

TEST(SqliteStoreTest, OpenFailsClearlyOnABadPath) {
  EventLoop loop;
  auto store = SqliteStore::Open("/nonexistent/dir/store.sqlite", &loop);
  EXPECT_FALSE(store.ok());
}

TEST(InMemoryStoreTest, CompletesOnTheLoop) {
  EventLoop loop;
  InMemoryStore store(&loop);
  bool done = false;
  store.Put("t", "k", "v", [&](const absl::Status&) { done = true; });
  EXPECT_FALSE(done);  // never inline
  Pump(loop);
  EXPECT_TRUE(done);
  EXPECT_EQ(store.ReadAll("t")->size(), 1u);
}

}  // namespace
}  // namespace manta::gcs
