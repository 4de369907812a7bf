#include "common/token.h"

#include <sys/stat.h>

#include <cstdlib>
#include <vector>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(TokenTest, FileIsPrivateAndRoundTrips) {
  char dir[] = "/tmp/manta_token_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/token";
  std::string token = GenerateToken();
  ASSERT_TRUE(WriteTokenFile(path, token).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto read = ReadTokenFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, token);
  chmod(path.c_str(), 0644);
  EXPECT_EQ(ReadTokenFile(path).status().code(), absl::StatusCode::kFailedPrecondition);
  unlink(path.c_str());
  rmdir(dir);
}

// A Kubernetes Secret mounted for a non-root pod's fsGroup (0440, the
// pod's group, a read-only mount) is private to the pod's user; any file
// that others may read, or that sits where someone could loosen it, is not.
TEST(TokenTest, OnlyAGroupReadableSecretOnAReadOnlyMountForTheCallersGroupPassesAsPrivate) {
  const std::vector<unsigned> caller = {1000, 27};
  EXPECT_TRUE(CheckTokenFileAccess("t", 0100600, 0, false, caller).ok());
  EXPECT_TRUE(CheckTokenFileAccess("t", 0100400, 0, false, caller).ok());
  EXPECT_TRUE(CheckTokenFileAccess("t", 0100440, 1000, true, caller).ok());
  EXPECT_TRUE(CheckTokenFileAccess("t", 0100640, 27, true, caller).ok());
  const auto refused = absl::StatusCode::kFailedPrecondition;
  EXPECT_EQ(CheckTokenFileAccess("t", 0100440, 1000, false, caller).code(), refused) << "a writable mount";
  EXPECT_EQ(CheckTokenFileAccess("t", 0100440, 1001, true, caller).code(), refused) << "another group";
  EXPECT_EQ(CheckTokenFileAccess("t", 0100460, 1000, true, caller).code(), refused) << "group-writable";
  EXPECT_EQ(CheckTokenFileAccess("t", 0100444, 1000, true, caller).code(), refused) << "readable by others";
  EXPECT_EQ(CheckTokenFileAccess("t", 0100404, 0, true, caller).code(), refused) << "readable by others";
  // On a writable file system, a group-readable file is refused whatever its group.
  char dir[] = "/tmp/manta_token_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/token";
  ASSERT_TRUE(WriteTokenFile(path, GenerateToken()).ok());
  chmod(path.c_str(), 0640);
  EXPECT_EQ(ReadTokenFile(path).status().code(), refused);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(TokenTest, MatchesOnlyTheSameToken) {
  EXPECT_TRUE(TokenMatches("abcdef0123456789", "abcdef0123456789"));
  EXPECT_FALSE(TokenMatches("abcdef0123456788", "abcdef0123456789"));
  EXPECT_FALSE(TokenMatches("abcdef012345678", "abcdef0123456789"));
  EXPECT_FALSE(TokenMatches("", "abcdef0123456789"));
  EXPECT_EQ(TokenFromAuthorization("Bearer xyz"), "xyz");
  EXPECT_EQ(TokenFromAuthorization("Basic xyz"), "");
  EXPECT_FALSE(ValidateToken("has space in the token").ok());
}

}  // namespace
}  // namespace manta
