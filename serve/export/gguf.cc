#include "serve/export/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "serve/engine/packed_matrix.h"
#include "train/kernels/checkpoint.h"

namespace manta::serve {
namespace {

constexpr uint32_t kTypeUint32 = 4, kTypeInt32 = 5, kTypeFloat32 = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9;
// ggml's tensor types, llama.cpp's file types ("mostly" that type).
constexpr uint32_t kGgmlF32 = 0, kGgmlQ8_0 = 8, kGgmlBf16 = 30;
constexpr uint32_t kFileF32 = 0, kFileQ8_0 = 7, kFileBf16 = 32;
constexpr int64_t kQ8Block = 32;                 // values of a Q8_0 block
constexpr int64_t kQ8BlockBytes = 2 + kQ8Block;  // fp16 scale, 32 x int8
constexpr uint64_t kAlignment = 32;

// Appends little-endian values and GGUF strings to a buffer.
class Writer {
 public:
  template <typename T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void Str(const std::string& s) {
    Put<uint64_t>(s.size());
    out_ += s;
  }
  void Key(const std::string& key, uint32_t type) {
    Str(key);
    Put<uint32_t>(type);
    ++kv_count_;
  }
  void U32(const std::string& key, uint32_t v) {
    Key(key, kTypeUint32);
    Put(v);
  }
  void F32(const std::string& key, float v) {
    Key(key, kTypeFloat32);
    Put(v);
  }
  void Bool(const std::string& key, bool v) {
    Key(key, kTypeBool);
    Put<uint8_t>(v ? 1 : 0);
  }
  void String(const std::string& key, const std::string& v) {
    Key(key, kTypeString);
    Str(v);
  }
  void Strings(const std::string& key, const std::vector<std::string>& v) {
    Key(key, kTypeArray);
    Put(kTypeString);
    Put<uint64_t>(v.size());
    for (const std::string& s : v) Str(s);
  }
  void Int32s(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, kTypeArray);
    Put(kTypeInt32);
    Put<uint64_t>(v.size());
    for (int32_t x : v) Put(x);
  }
  void Pad() { out_.append((kAlignment - out_.size() % kAlignment) % kAlignment, '\0'); }
  std::string& out() { return out_; }
  uint64_t kv_count() const { return kv_count_; }

 private:
  std::string out_;
  uint64_t kv_count_ = 0;
};

struct Tensor {
  std::string name;
  std::vector<uint64_t> ne;  // GGUF order: ne[0] varies fastest
  std::vector<float> data;
  bool linear = false;  // a projection or the output head: stored in the export's type
};

uint32_t GgmlType(const Tensor& t, GgufType type) {
  if (!t.linear) return kGgmlF32;
  switch (type) {
    case GgufType::kBf16:
      return kGgmlBf16;
    case GgufType::kQ8_0:
      return kGgmlQ8_0;
    case GgufType::kF32:
      break;
  }
  return kGgmlF32;
}

uint64_t EncodedBytes(const Tensor& t, uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlBf16:
      return 2 * t.data.size();
    case kGgmlQ8_0:
      return t.data.size() / kQ8Block * kQ8BlockBytes;
    default:
      return 4 * t.data.size();
  }
}

// Appends t's values as ggml_type stores them. Q8_0 as ggml's reference
// quantizer: per block of 32 along a row, d = max |x| / 127, each value
// round(x / d) (halves away from zero), d kept as fp16.
void AppendEncoded(const Tensor& t, uint32_t ggml_type, std::string& out) {
  const size_t n = t.data.size();
  if (ggml_type == kGgmlF32) {
    out.append(reinterpret_cast<const char*>(t.data.data()), n * sizeof(float));
    return;
  }
  if (ggml_type == kGgmlBf16) {
    for (float x : t.data) {
      const uint16_t h = RoundToBf16(x);
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
    return;
  }
  for (size_t b = 0; b < n; b += kQ8Block) {
    float amax = 0;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(t.data[b + j]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    const uint16_t half = RoundToFp16(d);
    char block[kQ8BlockBytes];
    std::memcpy(block, &half, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      block[2 + j] = static_cast<char>(static_cast<int8_t>(std::round(t.data[b + j] * id)));
    }
    out.append(block, kQ8BlockBytes);
  }
}

// [rows, cols] row-major -> [cols, rows] row-major.
std::vector<float> Transpose(const float* w, int64_t rows, int64_t cols) {
  std::vector<float> t(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = w[r * cols + c];
  }
  return t;
}

// Rows of each head of a [heads * hd, D] matrix from rotate-half order to
// neighbour order: row j -> 2j, row j + hd/2 -> 2j + 1.
std::vector<float> Interleave(std::vector<float> w, int64_t heads, int64_t hd, int64_t d) {
  std::vector<float> out(w.size());
  const int64_t half = hd / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < hd; ++j) {
      const int64_t to = j < half ? 2 * j : 2 * (j - half) + 1;
      std::memcpy(&out[(h * hd + to) * d], &w[(h * hd + j) * d], sizeof(float) * d);
    }
  }
  return out;
}

std::vector<Tensor> Tensors(const ServingWeights& w) {
  const train::ModelShape& s = w.shape();
  const train::ParamLayout& layout = w.layout();
  const int64_t D = s.emb_dim, hd = s.head_dim;
  auto tensor = [&](int block, int index) { return w.block(block) + layout.block(block).tensors[index].offset; };
  std::vector<Tensor> out;
  const float* embed = w.block(train::ParamLayout::embed_block());
  out.push_back({"token_embd.weight",
                 {uint64_t(D), uint64_t(s.vocab_size)},
                 std::vector<float>(embed, embed + D * s.vocab_size)});
  for (int l = 0; l < s.num_layers; ++l) {
    const int b = layout.layer_block(l);
    const std::string p = absl::StrCat("blk.", l, ".");
    // A linear layer [in, out] in Manta is GGUF's ne = [in, out] after a transpose.
    auto linear = [&](const std::string& name, train::LayerTensor t, int64_t in, int64_t outs) {
      return Tensor{p + name, {uint64_t(in), uint64_t(outs)}, Transpose(tensor(b, t), in, outs), true};
    };
    const float* an = tensor(b, train::kAttnNorm);
    out.push_back({p + "attn_norm.weight", {uint64_t(D)}, std::vector<float>(an, an + D)});
    Tensor q = linear("attn_q.weight", train::kWq, D, s.num_query_heads * hd);
    q.data = Interleave(std::move(q.data), s.num_query_heads, hd, D);
    Tensor k = linear("attn_k.weight", train::kWk, D, s.num_kv_heads * hd);
    k.data = Interleave(std::move(k.data), s.num_kv_heads, hd, D);
    out.push_back(std::move(q));
    out.push_back(std::move(k));
    out.push_back(linear("attn_v.weight", train::kWv, D, s.num_kv_heads * hd));
    out.push_back(linear("attn_output.weight", train::kWo, s.num_query_heads * hd, D));
    const float* mn = tensor(b, train::kMlpNorm);
    out.push_back({p + "ffn_norm.weight", {uint64_t(D)}, std::vector<float>(mn, mn + D)});
    out.push_back(linear("ffn_gate.weight", train::kWGate, D, s.mlp_dim));
    out.push_back(linear("ffn_up.weight", train::kWUp, D, s.mlp_dim));
    out.push_back(linear("ffn_down.weight", train::kWDown, s.mlp_dim, D));
  }
  const int hb = layout.head_block();
  const float* fnorm = tensor(hb, train::kFinalNorm);
  out.push_back({"output_norm.weight", {uint64_t(D)}, std::vector<float>(fnorm, fnorm + D)});
  out.push_back({"output.weight",
                 {uint64_t(D), uint64_t(s.vocab_size)},
                 Transpose(tensor(hb, train::kOutput), D, s.vocab_size),
                 true});
  return out;
}

void Metadata(const ServingWeights& w, const std::string& name, int64_t context_length, GgufType type, Writer& m) {
  const train::ModelShape& s = w.shape();
  m.String("general.architecture", "llama");
  m.String("general.name", name);
  m.U32("general.alignment", kAlignment);
  m.U32("general.file_type", type == GgufType::kQ8_0 ? kFileQ8_0 : type == GgufType::kBf16 ? kFileBf16 : kFileF32);
  m.U32("llama.context_length", static_cast<uint32_t>(context_length));
  m.U32("llama.embedding_length", static_cast<uint32_t>(s.emb_dim));
  m.U32("llama.block_count", static_cast<uint32_t>(s.num_layers));
  m.U32("llama.feed_forward_length", static_cast<uint32_t>(s.mlp_dim));
  m.U32("llama.attention.head_count", static_cast<uint32_t>(s.num_query_heads));
  m.U32("llama.attention.head_count_kv", static_cast<uint32_t>(s.num_kv_heads));
  m.U32("llama.attention.key_length", static_cast<uint32_t>(s.head_dim));
  m.U32("llama.attention.value_length", static_cast<uint32_t>(s.head_dim));
  m.U32("llama.rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  m.F32("llama.rope.freq_base", s.rope_max_timescale);
  m.F32("llama.attention.layer_norm_rms_epsilon", s.norm_eps);
  m.U32("llama.vocab_size", static_cast<uint32_t>(s.vocab_size));
  const train::Tokenizer& tok = *w.tokenizer();
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int32_t id = 0; id < tok.eos_id(); ++id) {
    tokens.push_back(Gpt2TokenText(tok.TokenBytes(id)));
    types.push_back(1);  // normal
  }
  tokens.push_back("<|endoftext|>");
  types.push_back(3);  // control
  std::vector<std::string> merges;
  for (const auto& [a, b] : tok.merges()) merges.push_back(tokens[a] + " " + tokens[b]);
  m.String("tokenizer.ggml.model", "gpt2");
  m.String("tokenizer.ggml.pre", "default");
  m.Strings("tokenizer.ggml.tokens", tokens);
  m.Int32s("tokenizer.ggml.token_type", types);
  m.Strings("tokenizer.ggml.merges", merges);
  m.U32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tok.eos_id()));
  m.U32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tok.eos_id()));
  m.Bool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

std::string Gpt2TokenText(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    // GPT-2 keeps printable Latin-1 as itself and moves the rest (controls,
    // space, DEL, NBSP, soft hyphen) to U+0100 onwards, in byte order.
    uint32_t cp;
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174) {
      cp = c;
    } else {
      cp = 256 + (c <= 32 ? c : c <= 160 ? c - 127 + 33 : 33 + 34);
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

bool ParseGgufType(const std::string& name, GgufType* out) {
  for (GgufType t : {GgufType::kF32, GgufType::kBf16, GgufType::kQ8_0}) {
    if (name == GgufTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kBf16:
      return "BF16";
    case GgufType::kQ8_0:
      return "Q8_0";
    case GgufType::kF32:
      break;
  }
  return "F32";
}

uint16_t RoundToFp16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // 65520 and up round to infinity
  if (abs < 0x38800000) {                       // below 2^-14: a subnormal, in units of 2^-24
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  // Exponent rebiased from 127 to 15, 23 mantissa bits to 10, ties to even
  // (a carry into the exponent is the right answer).
  uint32_t half = (abs - 0x38000000) >> 13;
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

absl::Status WriteGguf(const ServingWeights& weights, const std::string& path, const std::string& name,
                       int64_t context_length, GgufType type) {
  if (weights.layout().tensor() != 1) return absl::InvalidArgumentError("export the whole model (tensor 1)");
  if (!weights.tokenizer()) return absl::FailedPreconditionError("the checkpoint holds no tokenizer");
  if (weights.shape().head_dim % 2 != 0) return absl::InvalidArgumentError("head_dim must be even");
  const std::vector<Tensor> tensors = Tensors(weights);
  for (const Tensor& t : tensors) {
    if (GgmlType(t, type) == kGgmlQ8_0 && t.ne[0] % kQ8Block != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Q8_0 needs rows of a multiple of 32 values: ", t.name, " has ", t.ne[0]));
    }
  }
  Writer meta;
  Metadata(weights, name, context_length, type, meta);
  Writer head;
  head.Put<uint32_t>(0x46554747);  // "GGUF"
  head.Put<uint32_t>(3);
  head.Put<uint64_t>(tensors.size());
  head.Put<uint64_t>(meta.kv_count());
  head.out() += meta.out();
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    head.Str(t.name);
    head.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) head.Put(n);
    head.Put(GgmlType(t, type));
    head.Put(offset);
    offset += (EncodedBytes(t, GgmlType(t, type)) + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.Pad();
  std::string& file = head.out();
  for (const Tensor& t : tensors) {
    AppendEncoded(t, GgmlType(t, type), file);
    file.append((kAlignment - file.size() % kAlignment) % kAlignment, '\0');
  }
  return train::WriteSmallFileAtomic(path, file);
}

}  // namespace manta::serve
