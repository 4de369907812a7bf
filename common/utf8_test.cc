#include "common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(Utf8PrefixTest, NeverSplitsACharacter) {
  const std::string s =
      "ab\xC3\xA9"
      "c\xE2\x82\xAC";  // "abéc€"
  EXPECT_EQ(Utf8Prefix(s, 100), s);
  EXPECT_EQ(Utf8Prefix(s, 2), "ab");
  EXPECT_EQ(Utf8Prefix(s, 3), "ab");  // would split é
  EXPECT_EQ(Utf8Prefix(s, 4), "ab\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(s, 6),
            "ab\xC3\xA9"
            "c");  // would split €
  EXPECT_EQ(Utf8Prefix(s, 7),
            "ab\xC3\xA9"
            "c");
  EXPECT_EQ(Utf8Prefix(s, 0), "");
}

TEST(ValidUtf8Test, KeepsValidTextAndReplacesEachBadByte) {
  const std::string valid = "plain, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80";  // é € 😀
  EXPECT_EQ(ValidUtf8(valid), valid);
  const std::string bad = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("a\xFF"
                      "b"),
            "a" + bad + "b");                                       // never a lead byte
  EXPECT_EQ(ValidUtf8("\x80"), bad);                                // a stray continuation
  EXPECT_EQ(ValidUtf8("ab\xE2\x82"), "ab" + bad + bad);             // cut short
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), bad + bad);                      // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), bad + bad + bad);            // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), bad + bad + bad + bad);  // past U+10FFFF
}

TEST(IsValidUtf8Test, AcceptsWellFormedTextOnly) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80"));
  for (const char* bad : {"a\xFF"
                          "b",
                          "\x80", "ab\xE2\x82", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
}

}  // namespace
}  // namespace manta
