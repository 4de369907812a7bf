// The GGUF export: the file's structure, the tensors' layout (transposed,
// query and key heads interleaved for llama.cpp's rotary embedding), and
// the tokenizer's strings.
#include "serve/export/gguf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/process.h"
#include "gtest/gtest.h"
#include "serve/engine/engine.h"
#include "serve/engine/sampler.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {
namespace {

// The parts of a GGUF file the checks read.
struct Gguf {
  uint32_t version = 0;
  std::map<std::string, std::string> strings;
  std::map<std::string, uint64_t> numbers;
  std::map<std::string, std::vector<std::string>> string_arrays;
  std::map<std::string, std::pair<std::vector<uint64_t>, const float*>> tensors;
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
        if (elem == 8) g.string_arrays[key].push_back(r.Str());
        else r.Get<int32_t>();
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
    EXPECT_EQ(r.Get<uint32_t>(), 0u);  // F32
    infos.emplace_back(name, ne, r.Get<uint64_t>());
  }
  const size_t data = (r.at() + 31) / 32 * 32;
  for (const auto& [name, ne, offset] : infos) {
    g.tensors[name] = {ne, reinterpret_cast<const float*>(g.bytes.data() + data + offset)};
  }
  return g;
}

// The tiny model trained `steps` steps on a small text corpus in `dir`.
absl::StatusOr<ServingWeights> TrainTiny(const train::TempDir& dir, int steps) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on the mat " + std::to_string(i * 7919 % 1000) + "\n";
  std::ofstream(dir.path() + "/corpus.txt") << text;
  const std::string n = std::to_string(steps);
  train::RunOrDie(train::TinyConfig({"override_model_config=true", "vocab_size=300", "dataset_type=text",
                                     "dataset_path=" + dir.path() + "/corpus.txt", "run_name=g",
                                     "base_output_directory=" + dir.path(), "enable_checkpointing=true",
                                     "checkpoint_period=" + n, "steps=" + n}),
                  train::LocalEnv(1));
  return ServingWeights::Load(dir.path() + "/g/checkpoints/" + n, 1, 0);
}

TEST(GgufTest, ByteStringsFollowGpt2sMap) {
  EXPECT_EQ(Gpt2TokenText("a"), "a");
  EXPECT_EQ(Gpt2TokenText(" the"), "\xc4\xa0the");  // U+0120
  EXPECT_EQ(Gpt2TokenText("\n"), "\xc4\x8a");       // U+010A
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\x7f')), "\xc4\xa1");  // DEL: U+0121
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\xad')), "\xc5\x83");  // soft hyphen: U+0143
  EXPECT_EQ(Gpt2TokenText(std::string(1, '\xe9')), "\xc3\xa9");  // kept: U+00E9
}

TEST(GgufTest, ACheckpointBecomesALlamaGgufFile) {
  train::TempDir dir;
  absl::StatusOr<ServingWeights> w = TrainTiny(dir, 2);
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

// llama.cpp itself (npm's node-llama-cpp, installed by scripts/install_deps.sh)
// on the export of a trained model: the same greedy tokens as the engine.
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
  absl::StatusOr<ServingWeights> w = TrainTiny(dir, 20);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(WriteGguf(*w, dir.path() + "/m.gguf", "tiny", 512).ok());
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
  node.args = {std::string(MANTA_SOURCE_DIR) + "/serve/export/llama_peer.mjs", dir.path() + "/m.gguf", prompt_json,
               "24"};
  absl::StatusOr<CommandResult> r = RunAndCapture(node, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  std::string got = r->out.substr(0, r->out.find('\n'));
  std::string want_json = "[";
  for (size_t i = 0; i < want.size(); ++i) want_json += (i ? "," : "") + std::to_string(want[i]);
  want_json += "]";
  EXPECT_EQ(got, want_json);
}

}  // namespace
}  // namespace manta::serve
