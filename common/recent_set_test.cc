#include "common/recent_set.h"

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(RecentSetTest, RemembersTheLastKeysAndForgetsTheOldestFirst) {
  RecentSet set(2);
  EXPECT_TRUE(set.Insert("a"));
  EXPECT_FALSE(set.Insert("a")) << "a key is new once";
  EXPECT_TRUE(set.Insert("b"));
  EXPECT_TRUE(set.Insert("c"));
  EXPECT_FALSE(set.Contains("a")) << "the oldest went";
  EXPECT_TRUE(set.Contains("b"));
  EXPECT_TRUE(set.Contains("c"));
  EXPECT_FALSE(set.Contains(""));
  EXPECT_EQ(set.size(), 2u);
  EXPECT_TRUE(set.Insert("a")) << "forgotten, it is new again";
  EXPECT_FALSE(set.Contains("b"));
}

}  // namespace
}  // namespace manta
