#include "common/package_name.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(PackageNameTest, NamesBySha256AndCompression) {
  EXPECT_EQ(PackageNameOf(""), "_manta_pkg_e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.tar");
  std::string gz("\x1f\x8b rest", 7);
  EXPECT_TRUE(absl::EndsWith(PackageNameOf(gz), ".tar.gz"));
}

TEST(PackageNameTest, ContentMustMatchName) {
  std::string data = "some archive bytes";
  EXPECT_TRUE(CheckPackageContent(PackageNameOf(data), data).ok());
  absl::Status s = CheckPackageContent(PackageNameOf(data), data + "!");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not match its content"), std::string::npos) << s;
  EXPECT_FALSE(CheckPackageContent("../../etc/passwd", data).ok());
}

TEST(PackageNameTest, RefsHaveTheGeneratedForm) {
  EXPECT_TRUE(ValidatePackageRef(PackageNameOf("x")).ok());
  EXPECT_TRUE(ValidatePackageRef(PackageNameOf(std::string("\x1f\x8b", 2))).ok());
  std::string upper = PackageNameOf("x");
  upper[12] = 'A';
  for (std::string bad : {std::string(""), std::string("_manta_pkg_.tar"), upper, PackageNameOf("x") + "/..",
                          "../" + PackageNameOf("x"), std::string("_manta_pkg_") + std::string(64, 'a') + ".zip"}) {
    EXPECT_FALSE(ValidatePackageRef(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace manta
