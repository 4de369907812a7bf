// The GGUF export: the file's structure, the tensors' layout (transposed,
// query and key heads interleaved for llama.cpp's rotary embedding), BF16
// and Q8_0 projections, the tokenizer's strings, and llama.cpp's answers.
#include "serve/export/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "serve/engine/engine.h"
#include "serve/engine/sampler.h"
#include "serve/engine/test_util.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {
namespace {

// The parts of a GGUF file the checks read.
struct Gguf {
  uint32_t version = 0;
  std::map<std::string, std::string> strings;
  std::map<std::string, uint64_t> numbers;
  std::map<std::string, std::vector<std::string>> string_arrays;
  std::map<std::string, std::pair<std::vector<uint64_t>, const float*>> tensors;  // F32's values
  std::map<std::string, uint32_t> types;                                          // ggml's tensor types
  std::string bytes;
};

class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string Str() {
    const uint64_t n = Get<uint64_t>();
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  size_t at() const { return at_; }

 private:
  const std::string& b_;
  size_t at_ = 0;
};

Gguf Read(const std::string& path) {
  Gguf g;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  g.bytes = ss.str();
  Reader r(g.bytes);
  EXPECT_EQ(r.Get<uint32_t>(), 0x46554747u);
  g.version = r.Get<uint32_t>();
  const uint64_t tensors = r.Get<uint64_t>(), kvs = r.Get<uint64_t>();
  for (uint64_t i = 0; i < kvs; ++i) {
    const std::string key = r.Str();
    const uint32_t type = r.Get<uint32_t>();
    if (type == 8) {
      g.strings[key] = r.Str();
    } else if (type == 4 || type == 5) {
      g.numbers[key] = r.Get<uint32_t>();
    } else if (type == 6) {
      r.Get<float>();
      g.numbers[key] = 1;
    } else if (type == 7) {
      g.numbers[key] = r.Get<uint8_t>();
    } else if (type == 9) {
      const uint32_t elem = r.Get<uint32_t>();
      const uint64_t n = r.Get<uint64_t>();
      for (uint64_t k = 0; k < n; ++k) {
        if (elem == 8)
          g.string_arrays[key].push_back(r.Str());
        else
          r.Get<int32_t>();
      }
      g.numbers[key] = n;
    } else {
      ADD_FAILURE() << "unexpected type " << type << " of " << key;
      return g;
    }
  }
  std::vector<std::tuple<std::string, std::vector<uint64_t>, uint64_t>> infos;
  for (uint64_t i = 0; i < tensors; ++i) {
    std::string name = r.Str();
    std::vector<uint64_t> ne(r.Get<uint32_t>());
    for (uint64_t& n : ne) n = r.Get<uint64_t>();
    g.types[name] = r.Get<uint32_t>();
    infos.emplace_back(name, ne, r.Get<uint64_t>());
  }
  const size_t data = (r.at() + 31) / 32 * 32;
  for (const auto& [name, ne, offset] : infos) {
    g.tensors[name] = {ne, reinterpret_cast<const float*>(g.bytes.data() + data + offset)};
  }
  return g;
}

TEST(GgufTest, ByteStringsFollowGpt2sMap) {
  EXPECT_EQ(Gpt2TokenText("a"), "a");
  EXPECT_EQ(Gpt2TokenText(" the"), "\xc4\xa0the");               // U+0120
  EXPECT_EQ(Gpt2TokenText("\n"), "\xc4\x8a");                    // U+010A
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\x7f')), "\xc4\xa1");  // DEL: U+0121
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\xad')), "\xc5\x83");  // soft hyphen: U+0143
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\xe9')), "\xc3\xa9");  // kept: U+00E9
}

TEST(GgufTest, ACheckpointBecomesALlamaGgufFile) {
  train::TempDir dir;
  absl::StatusOr<ServingWeights> w = TrainedTinyWeights(dir, 2);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string path = dir.path() + "/m.gguf";
  ASSERT_TRUE(WriteGguf(*w, path, "tiny", 128).ok());
  const Gguf g = Read(path);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.strings.at("general.architecture"), "llama");
  EXPECT_EQ(g.strings.at("tokenizer.ggml.model"), "gpt2");
  const train::ModelShape& s = w->shape();
  EXPECT_EQ(g.numbers.at("llama.block_count"), uint64_t(s.num_layers));
  EXPECT_EQ(g.numbers.at("llama.attention.head_count_kv"), uint64_t(s.num_kv_heads));
  EXPECT_EQ(g.numbers.at("tokenizer.ggml.eos_token_id"), 299u);
  ASSERT_EQ(g.string_arrays.at("tokenizer.ggml.tokens").size(), 300u);
  EXPECT_EQ(g.string_arrays.at("tokenizer.ggml.tokens")[299], "<|endoftext|>");
  EXPECT_EQ(g.string_arrays.at("tokenizer.ggml.merges").size(), 300u - 257u);
  EXPECT_EQ(g.tensors.size(), 2u + 9u * s.num_layers + 1u);
  for (const auto& [name, type] : g.types) EXPECT_EQ(type, 0u) << name;  // F32

  const train::ParamLayout& layout = w->layout();
  const int64_t D = s.emb_dim, hd = s.head_dim, qw = s.num_query_heads * hd;
  // The embedding as is; the output projection transposed.
  const auto& [embd_ne, embd] = g.tensors.at("token_embd.weight");
  EXPECT_EQ(embd_ne, (std::vector<uint64_t>{uint64_t(D), 300}));
  EXPECT_EQ(std::memcmp(embd, w->block(0), sizeof(float) * D * 300), 0);
  const int hb = layout.head_block();
  const float* out = w->block(hb) + layout.block(hb).tensors[train::kOutput].offset;
  const float* gout = g.tensors.at("output.weight").second;
  for (int64_t v : {0, 17, 299}) {
    for (int64_t i = 0; i < D; ++i) ASSERT_EQ(gout[v * D + i], out[i * 300 + v]);
  }
  // Query rows: head h's j-th and (j + hd/2)-th become neighbours 2j, 2j + 1.
  const int b = layout.layer_block(1);
  const float* wq = w->block(b) + layout.block(b).tensors[train::kWq].offset;
  const auto& [q_ne, gq] = g.tensors.at("blk.1.attn_q.weight");
  EXPECT_EQ(q_ne, (std::vector<uint64_t>{uint64_t(D), uint64_t(qw)}));
  for (int64_t h = 0; h < s.num_query_heads; ++h) {
    for (int64_t j = 0; j < hd / 2; ++j) {
      for (int64_t i = 0; i < D; ++i) {
        ASSERT_EQ(gq[(h * hd + 2 * j) * D + i], wq[i * qw + h * hd + j]);
        ASSERT_EQ(gq[(h * hd + 2 * j + 1) * D + i], wq[i * qw + h * hd + j + hd / 2]);
      }
    }
  }
  absl::StatusOr<ServingWeights> bare = ServingWeights::Init(s, 1, 1, 0);
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(WriteGguf(*bare, path, "x", 128).ok());  // no tokenizer: refused, nothing written over
  EXPECT_EQ(Read(path).tensors.size(), 2u + 9u * s.num_layers + 1u);
}

TEST(GgufTest, HalfPrecisionRoundsToNearestEven) {
  EXPECT_EQ(RoundToFp16(1.0f), 0x3c00);
  EXPECT_EQ(RoundToFp16(-2.0f), 0xc000);
  EXPECT_EQ(RoundToFp16(0.1f), 0x2e66);
  EXPECT_EQ(RoundToFp16(1.0f / 3), 0x3555);
  EXPECT_EQ(RoundToFp16(1.0f + 1.0f / 2048), 0x3c00);  // a tie: to even
  EXPECT_EQ(RoundToFp16(1.0f + 3.0f / 2048), 0x3c02);  // a tie: to even
  EXPECT_EQ(RoundToFp16(65504.0f), 0x7bff);            // the largest
  EXPECT_EQ(RoundToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(RoundToFp16(65520.0f), 0x7c00);               // infinity
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -25)), 0x0000);  // a tie: to even
  EXPECT_EQ(RoundToFp16(std::ldexp(3.0f, -25)), 0x0002);  // a tie: to even
  EXPECT_EQ(RoundToFp16(std::ldexp(1023.0f, -24)), 0x03ff);
}

float Fp16Value(uint16_t h) {
  const float magnitude = (h & 0x7c00) == 0 ? std::ldexp(static_cast<float>(h & 0x3ff), -24)
                                            : std::ldexp(1.0f + (h & 0x3ff) / 1024.0f, ((h >> 10) & 0x1f) - 15);
  return h & 0x8000 ? -magnitude : magnitude;
}

// The projections and the output head in BF16 (the engine's rounding) and
// Q8_0 (blocks of 32 along a row: an fp16 scale, max |x| / 127, and int8s
// within half a scale of the F32 values); the embedding and norms as F32.
TEST(GgufTest, Bf16AndQ8_0HoldTheProjectionsAndTheRestStaysF32) {
  train::TempDir dir;
  absl::StatusOr<ServingWeights> w = TrainedTinyWeights(dir, 2);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/f32.gguf", "tiny", 128).ok());
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/bf16.gguf", "tiny", 128, GgufType::kBf16).ok());
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/q8_0.gguf", "tiny", 128, GgufType::kQ8_0).ok());
  const Gguf f32 = Read(dir.path() + "/f32.gguf"), bf16 = Read(dir.path() + "/bf16.gguf"),
             q8 = Read(dir.path() + "/q8_0.gguf");
  EXPECT_EQ(bf16.numbers.at("general.file_type"), 32u);  // llama.cpp's MOSTLY_BF16
  EXPECT_EQ(q8.numbers.at("general.file_type"), 7u);     // MOSTLY_Q8_0
  int linear = 0;
  for (const auto& [name, shaped] : f32.tensors) {
    const auto& [ne, want] = shaped;
    const bool is_linear = name == "output.weight" || absl::StrContains(name, "attn_q.") ||
                           absl::StrContains(name, "attn_k.") || absl::StrContains(name, "attn_v.") ||
                           absl::StrContains(name, "attn_output.") || absl::StrContains(name, "ffn_gate.") ||
                           absl::StrContains(name, "ffn_up.") || absl::StrContains(name, "ffn_down.");
    ASSERT_EQ(bf16.tensors.at(name).first, ne) << name;
    ASSERT_EQ(q8.tensors.at(name).first, ne) << name;
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    if (!is_linear) {
      EXPECT_EQ(bf16.types.at(name), 0u) << name;
      EXPECT_EQ(q8.types.at(name), 0u) << name;
      EXPECT_EQ(std::memcmp(q8.tensors.at(name).second, want, 4 * n), 0) << name;
      continue;
    }
    ++linear;
    EXPECT_EQ(bf16.types.at(name), 30u) << name;
    EXPECT_EQ(q8.types.at(name), 8u) << name;
    const auto* halves = reinterpret_cast<const uint16_t*>(bf16.tensors.at(name).second);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(halves[i], RoundToBf16(want[i])) << name << " at " << i;
    ASSERT_EQ(ne[0] % 32, 0u) << name;
    const auto* blocks = reinterpret_cast<const uint8_t*>(q8.tensors.at(name).second);
    for (uint64_t b = 0; b < n / 32; ++b) {
      const uint8_t* block = blocks + 34 * b;
      uint16_t half;
      std::memcpy(&half, block, 2);
      const float* x = want + 32 * b;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = Fp16Value(half);
      ASSERT_NEAR(d, amax / 127, amax / 127 / 2048) << name << " block " << b;
      int largest = 0;
      for (int j = 0; j < 32; ++j) {
        const int q = static_cast<int8_t>(block[2 + j]);
        largest = std::max(largest, std::abs(q));
        // Half a step, and the scale's own rounding over up to 127 steps.
        ASSERT_NEAR(q * d, x[j], d / 2 + 127 * std::fabs(d - amax / 127) + 1e-7f) << name << " block " << b;
      }
      if (amax > 0) ASSERT_EQ(largest, 127) << name << " block " << b;
    }
  }
  EXPECT_EQ(linear, 7 * w->shape().num_layers + 1);
}

// llama.cpp itself (npm's node-llama-cpp, installed by scripts/install_deps.sh)
// on the exports of a trained model: the same greedy tokens as the engine,
// from F32, BF16 and Q8_0 files.
TEST(GgufTest, LlamaCppContinuesAPromptAsTheEngineDoes) {
  // Where scripts/install_deps.sh puts it, unless NODE_LLAMA_CPP says.
  std::string module = std::getenv("NODE_LLAMA_CPP") ? std::getenv("NODE_LLAMA_CPP") : "";
  if (module.empty()) {
    const char* tools = std::getenv("MANTA_NODE_TOOLS");
    module = (tools ? std::string(tools) : std::string(std::getenv("HOME")) + "/.cache/manta/node_tools") +
             "/node_modules/node-llama-cpp";
  }
  ASSERT_TRUE(std::filesystem::exists(module + "/package.json")) << module << ": run scripts/install_deps.sh";
  train::TempDir dir;
  absl::StatusOr<ServingWeights> w = TrainedTinyWeights(dir, 20);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/m.gguf", "tiny", 512).ok());
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/bf16.gguf", "tiny", 512, GgufType::kBf16).ok());
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/q8_0.gguf", "tiny", 512, GgufType::kQ8_0).ok());
  const std::vector<int32_t> prompt = w->tokenizer()->Encode("the cat sat on");
  Engine engine(*w, {.slots = 1, .max_len = 64}, nullptr);
  std::vector<float> logits(engine.vocab());
  ASSERT_TRUE(engine.Prefill(0, prompt, logits.data()).ok());
  std::vector<int32_t> want;
  for (int i = 0; i < 24; ++i) {
    if (i > 0) {
      ASSERT_TRUE(engine.Decode({0}, {want.back()}, logits.data()).ok());
    }
    want.push_back(Argmax(logits.data(), engine.vocab()));
  }
  std::string prompt_json = "[";
  for (size_t i = 0; i < prompt.size(); ++i) prompt_json += (i ? "," : "") + std::to_string(prompt[i]);
  prompt_json += "]";
  SpawnOptions node;
  node.executable = "/usr/bin/node";
  node.env = {{"NODE_LLAMA_CPP", module}};
  node.args = {std::string(MANTA_SOURCE_DIR) + "/serve/export/llama_peer.mjs",
               dir.path() + "/m.gguf",
               prompt_json,
               "24",
               dir.path() + "/bf16.gguf",
               dir.path() + "/q8_0.gguf"};
  absl::StatusOr<CommandResult> r = RunAndCapture(node, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  std::string want_json = "[";
  for (size_t i = 0; i < want.size(); ++i) want_json += (i ? "," : "") + std::to_string(want[i]);
  want_json += "]";
  const std::vector<std::string> got = absl::StrSplit(r->out, '\n', absl::SkipEmpty());
  ASSERT_EQ(got.size(), 3u) << r->out;
  EXPECT_EQ(got[0], want_json) << "F32";
  EXPECT_EQ(got[1], want_json) << "BF16";
  EXPECT_EQ(got[2], want_json) << "Q8_0";
}

}  // namespace
}  // namespace manta::serve
