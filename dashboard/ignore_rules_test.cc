#include "dashboard/ignore_rules.h"

#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

IgnoreRules Root(std::string_view text) {
  IgnoreRules rules;
  rules.AddFile(".gitignore", text);
  return rules;
}

TEST(WildMatchTest, StarQuestionAndClassDoNotCrossSlashes) {
  EXPECT_TRUE(WildMatch("*.o", "main.o"));
  EXPECT_FALSE(WildMatch("*.o", "main.c"));
  EXPECT_FALSE(WildMatch("*.o", "dir/main.o"));
  EXPECT_TRUE(WildMatch("a?c", "abc"));
  EXPECT_FALSE(WildMatch("a?c", "a/c"));
  EXPECT_FALSE(WildMatch("a?c", "ac"));
  EXPECT_TRUE(WildMatch("file[0-9].txt", "file7.txt"));
  EXPECT_FALSE(WildMatch("file[0-9].txt", "filex.txt"));
  EXPECT_TRUE(WildMatch("file[!0-9].txt", "filex.txt"));
  EXPECT_FALSE(WildMatch("file[^0-9].txt", "file7.txt"));
  EXPECT_TRUE(WildMatch("[]x]", "]"));
  EXPECT_FALSE(WildMatch("a[/]b", "a/b"));
  EXPECT_TRUE(WildMatch("a[b", "a[b"));  // unclosed: a literal '['
  EXPECT_TRUE(WildMatch("\\*", "*"));
  EXPECT_FALSE(WildMatch("\\*", "x"));
  EXPECT_TRUE(WildMatch("foo**bar", "fooxbar"));  // not a whole component: one star
  EXPECT_FALSE(WildMatch("foo**bar", "foo/bar"));
}

TEST(WildMatchTest, DoubleStarComponents) {
  EXPECT_TRUE(WildMatch("**/foo", "foo"));
  EXPECT_TRUE(WildMatch("**/foo", "a/b/foo"));
  EXPECT_FALSE(WildMatch("**/foo", "a/b/foox"));
  EXPECT_TRUE(WildMatch("a/**", "a/b"));
  EXPECT_TRUE(WildMatch("a/**", "a/b/c"));
  EXPECT_FALSE(WildMatch("a/**", "a"));
  EXPECT_TRUE(WildMatch("a/**/b", "a/b"));
  EXPECT_TRUE(WildMatch("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(WildMatch("a/**/b", "a/x/y/c"));
  EXPECT_FALSE(WildMatch("a/**/b", "ab"));
}

TEST(IgnoreRulesTest, BlankLinesCommentsAndEscapes) {
  IgnoreRules rules = Root("\n# build\n   \n\\#hash\n\\!bang\ntrail   \nkeep\\ \r\n");
  EXPECT_FALSE(rules.IsIgnored("# build", false));
  EXPECT_FALSE(rules.IsIgnored("build", false));
  EXPECT_TRUE(rules.IsIgnored("#hash", false));
  EXPECT_TRUE(rules.IsIgnored("!bang", false));
  EXPECT_TRUE(rules.IsIgnored("trail", false));  // trailing spaces dropped
  EXPECT_TRUE(rules.IsIgnored("keep ", false));  // an escaped one kept, CR dropped
  EXPECT_TRUE(Root("# only a comment\n\n").empty());
}

TEST(IgnoreRulesTest, PatternWithoutSlashMatchesAtAnyDepth) {
  IgnoreRules rules = Root("*.o\nlogs\n");
  EXPECT_TRUE(rules.IsIgnored("a.o", false));
  EXPECT_TRUE(rules.IsIgnored("src/deep/b.o", false));
  EXPECT_TRUE(rules.IsIgnored("logs", true));
  EXPECT_TRUE(rules.IsIgnored("x/logs", false));
  EXPECT_FALSE(rules.IsIgnored("a.c", false));
  EXPECT_FALSE(rules.IsIgnored("logs2", false));
}

TEST(IgnoreRulesTest, LeadingOrMiddleSlashAnchorsToTheFilesDirectory) {
  IgnoreRules rules = Root("/top\ndoc/out\n");
  EXPECT_TRUE(rules.IsIgnored("top", false));
  EXPECT_FALSE(rules.IsIgnored("sub/top", false));
  EXPECT_TRUE(rules.IsIgnored("doc/out", false));
  EXPECT_FALSE(rules.IsIgnored("x/doc/out", false));
  rules.AddFile("sub/.gitignore", "/here\n");
  EXPECT_TRUE(rules.IsIgnored("sub/here", false));
  EXPECT_FALSE(rules.IsIgnored("here", false));
  EXPECT_FALSE(rules.IsIgnored("sub/x/here", false));
}

TEST(IgnoreRulesTest, TrailingSlashMatchesDirectoriesOnly) {
  IgnoreRules rules = Root("build/\n");
  EXPECT_TRUE(rules.IsIgnored("build", true));
  EXPECT_TRUE(rules.IsIgnored("src/build", true));
  EXPECT_FALSE(rules.IsIgnored("build", false));
  EXPECT_TRUE(rules.IsIgnored("build/bin/prog", false));  // under an ignored directory
}

TEST(IgnoreRulesTest, NegationAndLaterRulesWin) {
  IgnoreRules rules = Root("*.log\n!keep.log\n");
  EXPECT_TRUE(rules.IsIgnored("a.log", false));
  EXPECT_FALSE(rules.IsIgnored("keep.log", false));
  EXPECT_EQ(rules.Check("keep.log", false).source, ".gitignore");
  IgnoreRules reversed = Root("!keep.log\n*.log\n");
  EXPECT_TRUE(reversed.IsIgnored("keep.log", false));
}

TEST(IgnoreRulesTest, DeeperFilesOverrideShallowerOnesOnlyBelowThem) {
  IgnoreRules rules;
  rules.AddFile("sub/.gitignore", "!*.log\n");  // added first, still applies after the root's
  rules.AddFile(".gitignore", "*.log\n");
  EXPECT_TRUE(rules.IsIgnored("a.log", false));
  EXPECT_FALSE(rules.IsIgnored("sub/a.log", false));
  EXPECT_FALSE(rules.IsIgnored("sub/x/a.log", false));
  EXPECT_TRUE(rules.IsIgnored("other/a.log", false));
  EXPECT_EQ(rules.Check("sub/a.log", false).source, "sub/.gitignore");
  EXPECT_EQ(rules.Check("a.log", false).source, ".gitignore");
  // Of two files in one directory, the later one (.mantaignore) wins.
  rules.AddFile("sub/.mantaignore", "big.log\n");
  EXPECT_TRUE(rules.IsIgnored("sub/big.log", false));
  EXPECT_EQ(rules.Check("sub/big.log", false).source, "sub/.mantaignore");
}

TEST(IgnoreRulesTest, NothingUnderAnIgnoredDirectoryComesBack) {
  IgnoreRules rules = Root("out/\n!out/keep\n");
  EXPECT_TRUE(rules.IsIgnored("out/keep", false));
  EXPECT_FALSE(rules.Check("out/keep", false).ignored);  // its own rules alone
  // Ignoring the contents, not the directory, lets a negation work.
  IgnoreRules contents = Root("out/*\n!out/keep\n");
  EXPECT_FALSE(contents.IsIgnored("out", true));
  EXPECT_FALSE(contents.IsIgnored("out/keep", false));
  EXPECT_TRUE(contents.IsIgnored("out/other", false));
}

TEST(IgnoreRulesTest, DoubleStarPatterns) {
  IgnoreRules rules = Root("**/cache\nlogs/**\na/**/b\n");
  EXPECT_TRUE(rules.IsIgnored("cache", true));
  EXPECT_TRUE(rules.IsIgnored("x/y/cache", true));
  EXPECT_FALSE(rules.IsIgnored("logs", true));
  EXPECT_TRUE(rules.IsIgnored("logs/today", false));
  EXPECT_TRUE(rules.IsIgnored("a/b", false));
  EXPECT_TRUE(rules.IsIgnored("a/x/y/b", false));
  EXPECT_FALSE(rules.IsIgnored("x/a/b", false));
}

}  // namespace
}  // namespace manta::dashboard
