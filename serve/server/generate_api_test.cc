// The /generate body and the pieces of a stream.
#include "serve/server/generate_api.h"

#include "common/utf8.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace manta::serve {
namespace {

TEST(GenerateApiTest, ReadsAPromptAndItsOptions) {
  absl::StatusOr<GenerateBody> b = ParseGenerateBody(
      R"({"prompt": "Why", "max_tokens": 7, "stream": true, "temperature": 0.5, "top_k": 3, "seed": 9,
          "ignore_eos": true})",
      100);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->prompt, "Why");
  EXPECT_EQ(b->max_tokens, 7);
  EXPECT_TRUE(b->stream);
  EXPECT_FLOAT_EQ(b->sampling.temperature, 0.5f);
  EXPECT_EQ(b->sampling.top_k, 3);
  EXPECT_EQ(b->sampling.seed, 9u);
  EXPECT_TRUE(b->ignore_eos);
  absl::StatusOr<GenerateBody> plain = ParseGenerateBody(R"({"prompt": "x"})", 100);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->max_tokens, 100);
  EXPECT_FALSE(plain->stream);
  EXPECT_FALSE(plain->ignore_eos);
  EXPECT_EQ(plain->sampling.temperature, 0);
}

TEST(GenerateApiTest, EachBadBodySaysWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[1]", "JSON object"},
      {"{}", "missing"},
      {R"({"prompt": ""})", "empty"},
      {R"({"prompt": 3})", "string"},
      {R"({"prompt": "a", "max_tokens": 0})", "positive"},
      {R"({"prompt": "a", "max_tokens": -2})", "from 1 to 2147483648, got -2"},
      {R"({"prompt": "a", "max_tokens": 18446744073709551615})", "got 18446744073709551615"},
      {R"({"prompt": "a", "max_tokens": 1.5})", "integer"},
      {R"({"prompt": "a", "max_tokens": "9"})", "integer"},
      {R"({"prompt": "a", "stream": "yes"})", "true or false"},
      {R"({"prompt": "a", "ignore_eos": 1})", "\"ignore_eos\" must be true or false"},
      {R"({"prompt": "a", "temperature": -1})", "temperature"},
      {R"({"prompt": "a", "temperature": 1e300})", "temperature"},
      {R"({"prompt": "a", "top_k": -1})", "top_k"},
      {R"({"prompt": "a", "seed": "x"})", "seed"},
      {R"({"prompt": "a", "max_token": 3})", "unknown key \"max_token\""},
  };
  for (const auto& [body, says] : cases) {
    absl::StatusOr<GenerateBody> b = ParseGenerateBody(body, 10);
    ASSERT_FALSE(b.ok()) << body;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_NE(b.status().message().find(says), std::string::npos) << body << " -> " << b.status();
  }
}

TEST(GenerateApiTest, PiecesNeverSplitACharacterAndJsonStaysValid) {
  Utf8Pieces pieces;
  const std::string euro = "\xe2\x82\xac";  // one character, three bytes
  EXPECT_EQ(pieces.Add("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(pieces.Add(euro.substr(1, 1)), "");
  EXPECT_EQ(pieces.Add(euro.substr(2) + "b"), euro + "b");
  EXPECT_EQ(pieces.Add("\xf0\x9f"), "");
  EXPECT_EQ(pieces.Flush(), "\xef\xbf\xbd\xef\xbf\xbd");  // an unfinished character, replaced
  // Whatever the bytes, the JSON parses.
  const nlohmann::json j = nlohmann::json::parse(ResponseJson("ok \xff\xfe"));
  EXPECT_EQ(j["response"].get<std::string>().substr(0, 3), "ok ");
  EXPECT_EQ(StreamEvent("hi"), "data: {\"response\":\"hi\"}\n\n");
}

}  // namespace
}  // namespace manta::serve
