#include "dashboard/validation.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

TEST(SubmissionIdTest, GeneratedIdsHavePrefixAndNoLookAlikes) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewSubmissionId();
    ASSERT_TRUE(absl::StartsWith(id, "mantasubmit_")) << id;
    ASSERT_EQ(id.size(), 12u + 16u) << id;
    for (char c : id.substr(12)) {
      ASSERT_EQ(std::string("Il0oO").find(c), std::string::npos) << id;
    }
    EXPECT_TRUE(ValidateSubmissionId(id).ok());
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(SubmissionIdTest, AcceptsUserChosenNames) {
  for (const char* id : {"my-job", "job_1.2", "_x", "A", "raysubmit_abc"}) {
    EXPECT_TRUE(ValidateSubmissionId(id).ok()) << id;
  }
}

TEST(SubmissionIdTest, RejectsPathsAndOddCharacters) {
  for (const char* id :
       {"", ".", "..", "../etc", "a/b", "..%2F", "-rf", ".hidden", "a b", "a\nb", "a\\b", "x:y", "a\x01"}) {
    EXPECT_FALSE(ValidateSubmissionId(id).ok()) << id;
  }
  EXPECT_FALSE(ValidateSubmissionId(std::string(129, 'a')).ok());
  EXPECT_TRUE(ValidateSubmissionId(std::string(128, 'a')).ok());
  EXPECT_FALSE(ValidateSubmissionId(std::string("a\0b", 3)).ok());
}

TEST(PackageNameTest, ValidatesNamesAndUris) {
  EXPECT_TRUE(ValidatePackageName("_manta_pkg_0123abcd.tar.gz").ok());
  EXPECT_TRUE(ValidatePackageName("mine.tar").ok());
  EXPECT_FALSE(ValidatePackageName("../x.tar").ok());
  EXPECT_FALSE(ValidatePackageName("x.zip").ok());
  EXPECT_FALSE(ValidatePackageName(".tar").ok());
  auto name = PackageNameFromUri("gcs://_manta_pkg_ab.tar.gz");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(*name, "_manta_pkg_ab.tar.gz");
  EXPECT_FALSE(PackageNameFromUri("/home/me/project").ok());
  EXPECT_FALSE(PackageNameFromUri("gcs://../../x.tar").ok());
  EXPECT_FALSE(PackageNameFromUri("s3://bucket/x.tar").ok());
}

TEST(EntrypointQuantityTest, RefusesNanInfiniteNegativeAndHugeNamingTheField) {
  struct Case {
    double value;
    const char* message_part;
  };
  for (const Case& c : std::initializer_list<Case>{{std::nan(""), "is NaN"},
                                                   {std::numeric_limits<double>::infinity(), "infinite"},
                                                   {-std::numeric_limits<double>::infinity(), "infinite"},
                                                   {-1, "negative"},
                                                   {1e15, "larger than the maximum"},
                                                   {0.00001, "resolution"}}) {
    absl::Status s = ValidateEntrypointQuantity("entrypoint_num_cpus", c.value);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.value;
    EXPECT_TRUE(absl::StartsWith(s.message(), "'entrypoint_num_cpus': ")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.message_part)) << s;
  }
  for (double ok : {0.0, 0.5, 4.0, 9e14}) EXPECT_TRUE(ValidateEntrypointQuantity("x", ok).ok()) << ok;
}

}  // namespace
}  // namespace manta::dashboard
