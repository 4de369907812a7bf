#include "common/id.h"

#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(IdTest, RandomIdsDifferAndRoundTripThroughHex) {
  NodeId a = NodeId::FromRandom();
  NodeId b = NodeId::FromRandom();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.Hex().size(), 56u);
  auto back = NodeId::FromHex(a.Hex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, a);
  EXPECT_FALSE(a.IsNil());
  EXPECT_TRUE(NodeId().IsNil());
}

TEST(IdTest, ThousandsOfIdsFromOneThreadAreDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(seen.insert(ObjectId::FromRandom().Binary()).second);
}

// The random bytes are pooled per thread: a forked child must not hand out
// the ids its parent is about to.
TEST(IdTest, AForkedChildDrawsIdsItsParentDoesNot) {
  NodeId::FromRandom();  // the pool is filled
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string id = NodeId::FromRandom().Binary();
    ssize_t wrote = write(fds[1], id.data(), id.size());
    _exit(wrote == static_cast<ssize_t>(id.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string parent = NodeId::FromRandom().Binary();
  std::string from_child(NodeId::kSize, '\0');
  size_t got = 0;
  while (got < from_child.size()) {
    ssize_t n = read(fds[0], from_child.data() + got, from_child.size() - got);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(parent, from_child);
}

TEST(IdTest, RejectsBadInput) {
  EXPECT_FALSE(NodeId::FromBinary("short").ok());
  EXPECT_FALSE(NodeId::FromHex("zz").ok());
  EXPECT_FALSE(FromHex("abc").ok());
}

}  // namespace
}  // namespace manta
