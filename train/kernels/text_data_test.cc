// The text dataset: reading a corpus, addressing samples, training on it.
#include "train/kernels/text_data.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "train/kernels/training_test_util.h"

namespace manta::train {
namespace {

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string Sentences(int n) {
  const char* subjects[] = {"the cat", "a dog", "my friend", "the old man"};
  const char* verbs[] = {"sat on", "looked at", "walked to", "slept near"};
  const char* objects[] = {"the mat.", "a tree.", "the door.", "the river."};
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += std::string(subjects[i % 4]) + " " + verbs[(i / 4) % 4] + " " + objects[(i / 16) % 4] + "\n";
  }
  return text;
}

TEST(TextDataTest, ReadsTheTextFilesOfAFolderInNameOrder) {
  TempDir dir;
  WriteFile(dir.path() + "/b", "second\n");
  WriteFile(dir.path() + "/a", "first\n");
  WriteFile(dir.path() + "/a.dat", std::string("\0\0\x01index", 8));  // binary: skipped
  WriteFile(dir.path() + "/c", "bad \xff\xfe utf-8\n");               // not UTF-8: skipped
  WriteFile(dir.path() + "/empty", "");
  std::filesystem::create_symlink(dir.path() + "/a", dir.path() + "/a.u8");  // a link: skipped
  std::filesystem::create_directory(dir.path() + "/sub");
  WriteFile(dir.path() + "/sub/deeper", "not read\n");
  absl::StatusOr<std::vector<std::string>> docs = ReadTextCorpus(dir.path());
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ(*docs, (std::vector<std::string>{"first\n", "second\n"}));

  absl::StatusOr<std::vector<std::string>> one = ReadTextCorpus(dir.path() + "/b");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"second\n"});
}

TEST(TextDataTest, ACorpusThatIsNotThereOrHasNoTextIsAnErrorNamingTheKey) {
  TempDir dir;
  EXPECT_EQ(ReadTextCorpus(dir.path() + "/nothing").status().code(), absl::StatusCode::kNotFound);
  absl::Status empty = ReadTextCorpus(dir.path()).status();
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("dataset_path"), std::string::npos);
  EXPECT_FALSE(ReadTextCorpus("/dev/null").ok());  // not a regular file
}

TEST(TextDataTest, EachEpochReadsEveryWindowOnceInItsOwnOrder) {
  std::vector<int32_t> tokens(37 * 8 + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  absl::StatusOr<std::unique_ptr<TextDataset>> data = TextDataset::Create(tokens, 8, 5);
  ASSERT_TRUE(data.ok());
  ASSERT_EQ((*data)->windows(), 37);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t g = 0; g < 37; ++g) epoch0.push_back((*data)->WindowOf(g));
  for (int64_t g = 37; g < 74; ++g) epoch1.push_back((*data)->WindowOf(g));
  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), 37u);
  EXPECT_EQ(std::set<int64_t>(epoch1.begin(), epoch1.end()).size(), 37u);
  EXPECT_EQ(*std::max_element(epoch0.begin(), epoch0.end()), 36);
  EXPECT_NE(epoch0, epoch1);
  // Another seed, another order; the same seed, the same order.
  absl::StatusOr<std::unique_ptr<TextDataset>> other = TextDataset::Create(tokens, 8, 6);
  absl::StatusOr<std::unique_ptr<TextDataset>> same = TextDataset::Create(tokens, 8, 5);
  std::vector<int64_t> other0, same0;
  for (int64_t g = 0; g < 37; ++g) other0.push_back((*other)->WindowOf(g));
  for (int64_t g = 0; g < 37; ++g) same0.push_back((*same)->WindowOf(g));
  EXPECT_NE(epoch0, other0);
  EXPECT_EQ(epoch0, same0);
}

TEST(TextDataTest, ARowIsItsWindowAndTheTargetsAreShiftedByOne) {
  std::vector<int32_t> tokens(10 * 4 + 3);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 7 % 101);
  absl::StatusOr<std::unique_ptr<TextDataset>> data = TextDataset::Create(tokens, 4, 1);
  ASSERT_TRUE(data.ok());
  const TextDataset& d = **data;
  // A batch of 6 rows at step 3, read whole and as two halves (two devices).
  std::vector<int32_t> in(24), tg(24), in2(24), tg2(24);
  d.Fill(3, 6, 0, 6, in.data(), tg.data());
  d.Fill(3, 6, 0, 3, in2.data(), tg2.data());
  d.Fill(3, 6, 3, 3, in2.data() + 12, tg2.data() + 12);
  EXPECT_EQ(in, in2);
  EXPECT_EQ(tg, tg2);
  for (int r = 0; r < 6; ++r) {
    const int64_t w = d.WindowOf(3 * 6 + r);
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(in[r * 4 + t], tokens[w * 4 + t]);
      EXPECT_EQ(tg[r * 4 + t], tokens[w * 4 + t + 1]);
    }
  }
  EXPECT_FALSE(TextDataset::Create({1, 2, 3}, 4, 0).ok());  // shorter than one sequence
}

TEST(TextDataTest, ConfigNeedsAPathAndRoomForTheBytes) {
  const std::string base = std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml";
  absl::Status no_path = LoadConfig({base, "model_name=tiny", "dataset_type=text"}).status();
  EXPECT_NE(no_path.message().find("dataset_path"), std::string::npos) << no_path;
  absl::Status small = LoadConfig({base, "model_name=tiny", "dataset_type=text", "dataset_path=/x"}).status();
  EXPECT_NE(small.message().find("vocab_size"), std::string::npos) << small;
  absl::Status other = LoadConfig({base, "dataset_type=c4"}).status();
  EXPECT_NE(other.message().find("dataset_type"), std::string::npos) << other;
}

std::vector<std::string> TextOverrides(const TempDir& dir, const std::string& corpus) {
  return {"override_model_config=true", "vocab_size=300", "dataset_type=text",
          "dataset_path=" + corpus,     "run_name=text",  "base_output_directory=" + dir.path()};
}

TEST(TextDataTest, TheRunTrainsItsTokenizerOnceAndSavesItWithEachCheckpoint) {
  TempDir dir;
  const std::string corpus = dir.path() + "/corpus.txt";
  WriteFile(corpus, Sentences(400));
  std::vector<std::string> overrides = TextOverrides(dir, corpus);
  overrides.insert(overrides.end(), {"enable_checkpointing=true", "checkpoint_period=10", "steps=20"});
  const Config config = TinyConfig(overrides);
  TrainingResult result = RunOrDie(config, LocalEnv(2));
  ASSERT_EQ(result.steps.size(), 20u);
  // The loss falls well below that of a uniform guess over the vocabulary.
  EXPECT_LT(result.steps.back().loss, result.steps.front().loss - 1.0);
  EXPECT_LT(result.steps.front().loss, std::log(300.0) + 0.5);

  absl::StatusOr<Tokenizer> run_tok = Tokenizer::Load(RunTokenizerPath(config));
  ASSERT_TRUE(run_tok.ok()) << run_tok.status();
  EXPECT_EQ(run_tok->vocab_size(), 300);
  for (const char* step : {"10", "20"}) {
    absl::StatusOr<Tokenizer> saved = Tokenizer::Load(dir.path() + "/text/checkpoints/" + step + "/tokenizer.json");
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->ToJson(), run_tok->ToJson());
  }
}

TEST(TextDataTest, ATokenizerOfAnotherSizeIsRefusedByName) {
  TempDir dir;
  const std::string corpus = dir.path() + "/corpus.txt";
  WriteFile(corpus, Sentences(100));
  absl::StatusOr<Tokenizer> tok = Tokenizer::Train({Sentences(100)}, 280);
  ASSERT_TRUE(tok.ok());
  ASSERT_TRUE(tok->Save(dir.path() + "/tok.json").ok());
  std::vector<std::string> overrides = TextOverrides(dir, corpus);
  overrides.push_back("tokenizer_path=" + dir.path() + "/tok.json");
  absl::StatusOr<RunData> data = MakeRunData(TinyConfig(overrides));
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("vocab_size"), std::string::npos) << data.status();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/text/tokenizer.json"));  // nothing written
}

}  // namespace
}  // namespace manta::train
