#include "common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(Utf8PrefixTest, NeverSplitsACharacter) {
  const std::string s = "ab\xC3\xA9" "c\xE2\x82\xAC";  // "abéc€"
  EXPECT_EQ(Utf8Prefix(s, 100), s);
  EXPECT_EQ(Utf8Prefix(s, 2), "ab");
  EXPECT_EQ(Utf8Prefix(s, 3), "ab");  // would split é
  EXPECT_EQ(Utf8Prefix(s, 4), "ab\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(s, 6), "ab\xC3\xA9" "c");  // would split €
  EXPECT_EQ(Utf8Prefix(s, 7), "ab\xC3\xA9" "c");
  EXPECT_EQ(Utf8Prefix(s, 0), "");
}

}  // namespace
}  // namespace manta
