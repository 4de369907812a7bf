#include "cli/start_banner.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta::cli {
namespace {

HeadBanner Banner(const std::string& token_file) {
  return {.node_ip = "127.0.0.1",
          .gcs_address = "127.0.0.1:6379",
          .token_file = token_file,
          .dashboard_url = "http://127.0.0.1:8265",
          .temp_dir_suffix = " --temp-dir=/tmp/t"};
}

TEST(HeadBannerTest, WithATokenSaysWhereItIs) {
  std::string out = FormatHeadBanner(Banner("/tmp/t/session_latest/token"));
  EXPECT_TRUE(absl::StrContains(out,
                                "    MANTA_TOKEN=<token> manta start --address='127.0.0.1:6379'\n"
                                "  where <token> is the content of /tmp/t/session_latest/token (keep it secret).\n"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "(send 'Authorization: Bearer <token>')")) << out;
  EXPECT_TRUE(absl::StrContains(out, "MANTA_ADDRESS='127.0.0.1:6379' (and MANTA_TOKEN)")) << out;
  EXPECT_TRUE(absl::StrContains(out, "manta job submit --address=http://127.0.0.1:8265 --working-dir")) << out;
  EXPECT_TRUE(absl::StrContains(out, "    manta stop --temp-dir=/tmp/t\n")) << out;
}

TEST(HeadBannerTest, WithoutAuthenticationNeverMentionsAToken) {
  std::string out = FormatHeadBanner(Banner(""));
  EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(out), "token")) << out;
  EXPECT_FALSE(absl::StrContains(out, "Authorization")) << out;
  EXPECT_TRUE(absl::StrContains(out, "    manta start --address='127.0.0.1:6379'\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "The Jobs REST API is at http://127.0.0.1:8265 (no authentication).\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "    MANTA_ADDRESS='127.0.0.1:6379'\n")) << out;
}

TEST(AuthDisabledWarningTest, LoopbackOnlyWarns) {
  std::string w =
      AuthDisabledWarning({{"GCS", "127.0.0.1:6379"}, {"raylet", "127.0.0.1"}, {"dashboard", "127.0.0.1:8265"}});
  EXPECT_TRUE(absl::StartsWith(w, "WARNING: authentication is disabled (--auth=none)")) << w;
  EXPECT_TRUE(absl::EndsWith(w, "\n"));
  EXPECT_FALSE(absl::StrContains(w, "NON-LOOPBACK")) << w;
}

TEST(AuthDisabledWarningTest, PublicAddressesMakeItLouderAndAreListed) {
  std::string w =
      AuthDisabledWarning({{"GCS", "10.0.0.5:6379"}, {"raylet", "10.0.0.5"}, {"dashboard", "0.0.0.0:8265"}});
  EXPECT_TRUE(absl::StartsWith(w, std::string(78, '*') + "\nWARNING: AUTHENTICATION IS DISABLED (--auth=none) AND THE "
                                                         "CLUSTER LISTENS ON NON-LOOPBACK ADDRESSES: 10.0.0.5:6379 "
                                                         "(GCS), 10.0.0.5 (raylet), 0.0.0.0:8265 (dashboard).\n"))
      << w;
  EXPECT_TRUE(absl::StrContains(w, "run arbitrary commands")) << w;
  std::string only_dashboard =
      AuthDisabledWarning({{"GCS", "127.0.0.1:6379"}, {"raylet", "127.0.0.1"}, {"dashboard", "0.0.0.0:8265"}});
  EXPECT_TRUE(absl::StrContains(only_dashboard, "ADDRESSES: 0.0.0.0:8265 (dashboard).")) << only_dashboard;
}

TEST(AuthDisabledWarningTest, LoopbackIsAll127Slash8) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3:80"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:8265"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1"));
}

}  // namespace
}  // namespace manta::cli
