#include "common/runtime_env_json.h"

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(RuntimeEnvJsonTest, RoundTrips) {
  RuntimeEnvSpec env{"gcs://_manta_pkg_ab.tar.gz", {{"A", "1"}, {"B", "x y\n\"z\""}}};
  auto back = ParseRuntimeEnvJson(RuntimeEnvJson(env));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->working_dir, env.working_dir);
  EXPECT_EQ(back->env_vars, env.env_vars);
  auto empty = ParseRuntimeEnvJson(RuntimeEnvJson({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->working_dir.empty() && empty->env_vars.empty());
}

TEST(RuntimeEnvJsonTest, RejectsOtherShapes) {
  for (const char* bad : {"", "[]", "{\"working_dir\": 3}", "{\"env_vars\": []}", "{\"env_vars\": {\"A\": 1}}", "{"}) {
    EXPECT_EQ(ParseRuntimeEnvJson(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(ParseRuntimeEnvJson("{\"pip\": [\"x\"]}").ok()) << "unknown keys are ignored";
}

}  // namespace
}  // namespace manta
