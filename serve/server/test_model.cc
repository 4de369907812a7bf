#include "serve/server/test_model.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "serve/engine/engine.h"
#include "serve/engine/sampler.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {

std::string Corpus() {
  std::string text;
  const char* words[] = {"the cat", "a dog", "my friend", "the old man", "sat on", "looked at", "the mat.", "a tree."};
  for (int i = 0; i < 300; ++i) {
    text += absl::StrCat(words[i % 4], " ", words[4 + (i / 4) % 2], " ", words[6 + (i / 8) % 2], "\n");
  }
  // Made-up words, so a 300-id tokenizer has pairs enough to learn.
  uint32_t x = 1;
  for (int i = 0; i < 600; ++i) {
    for (int k = 0; k < 5; ++k) text += "abcdefghijklmnoprstu"[(x = x * 1103515245u + 12345u) >> 16 & 15];
    text += i % 8 == 7 ? "\n" : " ";
  }
  return text;
}

std::string TrainTinyTextModel(const std::string& dir) {
  const std::string corpus = dir + "/corpus.txt";
  FILE* f = std::fopen(corpus.c_str(), "w");
  const std::string text = Corpus();
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  train::RunOrDie(train::TinyConfig({"override_model_config=true", "vocab_size=300", "dataset_type=text",
                                     "dataset_path=" + corpus, "run_name=srv", "base_output_directory=" + dir,
                                     "enable_checkpointing=true", "checkpoint_period=10", "steps=10"}),
                  train::LocalEnv(1));
  return dir + "/srv/checkpoints/10";
}

std::string LocalGreedy(const std::string& prompt, int max_tokens, const std::string& step_dir, WeightFormat weights) {
  absl::StatusOr<ServingWeights> w = ServingWeights::Load(step_dir, 1, 0);
  EXPECT_TRUE(w.ok()) << w.status();
  Engine engine(*w, {.slots = 1, .max_len = 96, .weights = weights}, nullptr);
  const train::Tokenizer& tok = *w->tokenizer();
  std::vector<float> logits(engine.vocab());
  EXPECT_TRUE(engine.Prefill(0, tok.Encode(prompt), logits.data()).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    if (i > 0) {
      EXPECT_TRUE(engine.Decode({0}, {out.back()}, logits.data()).ok());
    }
    const int32_t t = Argmax(logits.data(), engine.vocab());
    if (t == tok.eos_id()) break;
    out.push_back(t);
  }
  return ValidUtf8(tok.Decode(out));  // as the server sends it: JSON is UTF-8
}

}  // namespace manta::serve
