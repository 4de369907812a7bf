// The byte-level BPE tokenizer: training, round trips, its saved form.
#include "train/kernels/tokenizer.h"

#include <chrono>
#include <random>

#include "gtest/gtest.h"
#include "train/kernels/training_test_util.h"

namespace manta::train {
namespace {

// Sentences, " zq" fifty times (the commonest pairs: " z" and "zq", tied,
// and " z" has the smaller ids), and a thousand made-up words, one a line.
std::vector<std::string> Corpus() {
  std::string zq, made_up;
  for (int i = 0; i < 50; ++i) zq += " zq";
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    for (int k = 0; k < 5; ++k) made_up += "abcdefghijklmnoprstu"[rng() % 20];
    made_up += "\n";
  }
  return {"the cat sat on the mat. the cat ate the rat.\n", "There were 12 cats and 3 dogs!\n", zq, made_up};
}

TEST(TokenizerTest, SplitWordsKeepsTheSpaceBeforeAWordAndCoversTheText) {
  const std::string text = "Hi  there,\n\tworld 42x";
  const std::vector<std::string_view> words = Tokenizer::SplitWords(text);
  std::vector<std::string> got(words.begin(), words.end());
  EXPECT_EQ(got, (std::vector<std::string>{"Hi", " ", " there", ",", "\n\t", "world", " 42", "x"}));
}

TEST(TokenizerTest, TrainsTheRequestedVocabularyMostFrequentPairFirst) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Train(Corpus(), 300);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), 300);
  EXPECT_EQ(tok->eos_id(), 299);
  ASSERT_EQ(tok->merges().size(), 300u - 257u);
  EXPECT_EQ(tok->merges()[0], std::make_pair(int32_t{' '}, int32_t{'z'}));
  EXPECT_EQ(tok->merges()[1], std::make_pair(int32_t{256}, int32_t{'q'}));
  EXPECT_EQ(tok->TokenBytes(257), " zq");
  EXPECT_EQ(tok->Encode(" zq"), std::vector<int32_t>{257});
  // Learned words encode shorter than their bytes; text round-trips.
  const std::vector<int32_t> ids = tok->Encode(" zq the cat");
  EXPECT_LT(ids.size(), 11u);
  EXPECT_EQ(tok->Decode(ids), " zq the cat");
}

TEST(TokenizerTest, RoundTripsAnyBytes) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Train(Corpus(), 320);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 300, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? " te"[rng() % 3] : rng() % 256);
    const std::vector<int32_t> ids = tok->Encode(s);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->eos_id());
    ASSERT_EQ(tok->Decode(ids), s);
  }
  EXPECT_EQ(tok->Decode({tok->eos_id(), -4, 1 << 30}), "");  // end-of-text and strays give nothing
}

TEST(TokenizerTest, LongRunsEncodeInLinearTime) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Train(Corpus(), 300);
  ASSERT_TRUE(tok.ok());
  const std::string run(4 << 20, 'a');  // one 4 MiB "word"
  const std::vector<int32_t> ids = tok->Encode(run);
  EXPECT_EQ(tok->Decode(ids), run);
  for (std::string_view w : Tokenizer::SplitWords(run)) ASSERT_LE(w.size(), Tokenizer::kMaxWordBytes);
}

TEST(TokenizerTest, SameCorpusSameTokenizerWhateverTheDocumentOrder) {
  std::vector<std::string> docs = Corpus();
  absl::StatusOr<Tokenizer> a = Tokenizer::Train(docs, 290);
  std::reverse(docs.begin(), docs.end());
  absl::StatusOr<Tokenizer> b = Tokenizer::Train(docs, 290);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ToJson(), b->ToJson());
}

TEST(TokenizerTest, SavesAndLoads) {
  TempDir dir;
  absl::StatusOr<Tokenizer> tok = Tokenizer::Train(Corpus(), 280);
  ASSERT_TRUE(tok.ok());
  const std::string path = dir.path() + "/tokenizer.json";
  ASSERT_TRUE(tok->Save(path).ok());
  absl::StatusOr<Tokenizer> back = Tokenizer::Load(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->merges(), tok->merges());
  EXPECT_EQ(back->Encode("the cats sat"), tok->Encode("the cats sat"));
  EXPECT_EQ(Tokenizer::Load(dir.path() + "/missing.json").status().code(), absl::StatusCode::kNotFound);
}

TEST(TokenizerTest, RefusesBadFilesAndSizes) {
  for (const char* bad : {"", "[]", "{\"format\": \"other\"}", "{\"format\": \"manta-byte-bpe\"}",
                          R"({"format": "manta-byte-bpe", "vocab_size": 258, "merges": []})",
                          R"({"format": "manta-byte-bpe", "vocab_size": 258, "merges": [[1, 256]]})",
                          R"({"format": "manta-byte-bpe", "vocab_size": 258, "merges": [[1, -1]]})",
                          R"({"format": "manta-byte-bpe", "vocab_size": 258, "merges": [[1]]})",
                          R"({"format": "manta-byte-bpe", "vocab_size": 1e99, "merges": []})",
                          R"({"format": "manta-byte-bpe", "vocab_size": 100, "merges": []})"}) {
    EXPECT_FALSE(Tokenizer::FromJson(bad).ok()) << bad;
  }
  EXPECT_TRUE(Tokenizer::FromJson(R"({"format": "manta-byte-bpe", "vocab_size": 258, "merges": [[1, 255]]})").ok());
  EXPECT_FALSE(Tokenizer::Train(Corpus(), 256).ok());
  EXPECT_FALSE(Tokenizer::Train(Corpus(), Tokenizer::kMaxVocab + 1).ok());
  // Three bytes of text cannot give a thousand merges.
  absl::StatusOr<Tokenizer> small = Tokenizer::Train({"abc"}, 1000);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("too small"), std::string::npos);
}

}  // namespace
}  // namespace manta::train
