#include "train/kernels/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "train/kernels/checkpoint.h"

namespace manta::train {
namespace {

constexpr char kFormat[] = "manta-byte-bpe";

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

enum class ByteClass { kSpace, kLetter, kDigit, kOther };

ByteClass Classify(unsigned char c) {
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') return ByteClass::kSpace;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::kLetter;
  if (c >= '0' && c <= '9') return ByteClass::kDigit;
  return ByteClass::kOther;
}

// A word of the training corpus: its current symbols and how often it occurs.
struct Word {
  std::vector<int32_t> ids;
  int64_t count = 0;
};

void CountPairs(const Word& w, int64_t sign, absl::flat_hash_map<uint64_t, int64_t>* counts) {
  for (size_t i = 0; i + 1 < w.ids.size(); ++i) {
    int64_t& c = (*counts)[PairKey(w.ids[i], w.ids[i + 1])];
    c += sign * w.count;
  }
}

// Replaces every (a, b) in `ids` by `merged`, left to right.
bool MergeInPlace(std::vector<int32_t>* ids, int32_t a, int32_t b, int32_t merged) {
  size_t out = 0;
  bool changed = false;
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i + 1 < ids->size() && (*ids)[i] == a && (*ids)[i + 1] == b) {
      (*ids)[out++] = merged;
      ++i;
      changed = true;
    } else {
      (*ids)[out++] = (*ids)[i];
    }
  }
  ids->resize(out);
  return changed;
}

}  // namespace

std::vector<std::string_view> Tokenizer::SplitWords(std::string_view text) {
  auto cls = [&](size_t i) { return Classify(static_cast<unsigned char>(text[i])); };
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    auto fits = [&] { return i < text.size() && i - start < kMaxWordBytes; };
    if (text[i] == ' ' && i + 1 < text.size() && cls(i + 1) != ByteClass::kSpace) {
      const ByteClass c = cls(++i);  // a single space joins the word after it: " the"
      while (fits() && cls(i) == c) ++i;
    } else if (cls(i) == ByteClass::kSpace) {
      // A run of whitespace, leaving a last space before a word to that word.
      ++i;
      while (fits() && cls(i) == ByteClass::kSpace &&
             !(text[i] == ' ' && i + 1 < text.size() && cls(i + 1) != ByteClass::kSpace)) {
        ++i;
      }
    } else {
      const ByteClass c = cls(i);
      while (fits() && cls(i) == c) ++i;
    }
    words.push_back(text.substr(start, i - start));
  }
  return words;
}

Tokenizer::Tokenizer(std::vector<std::pair<int32_t, int32_t>> merges) : merges_(std::move(merges)) {
  bytes_.reserve(256 + merges_.size());
  for (int c = 0; c < 256; ++c) bytes_.push_back(std::string(1, static_cast<char>(c)));
  for (const auto& [a, b] : merges_) {
    merged_id_[PairKey(a, b)] = static_cast<int32_t>(bytes_.size());
    bytes_.push_back(bytes_[a] + bytes_[b]);
  }
}

absl::StatusOr<Tokenizer> Tokenizer::Train(const std::vector<std::string>& documents, int64_t vocab_size) {
  if (vocab_size < kMinVocab || vocab_size > kMaxVocab) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer vocab_size must be in [", kMinVocab, ", ", kMaxVocab,
                                                   "] (256 bytes and end-of-text), got ", vocab_size));
  }
  absl::flat_hash_map<std::string_view, int64_t> word_counts;
  for (const std::string& doc : documents) {
    for (std::string_view w : SplitWords(doc)) ++word_counts[w];
  }
  std::vector<Word> words;
  words.reserve(word_counts.size());
  for (const auto& [text, count] : word_counts) {
    Word w;
    w.count = count;
    for (unsigned char c : text) w.ids.push_back(c);
    words.push_back(std::move(w));
  }
  // The order words are visited in does not change any count: sort anyway,
  // so nothing depends on the hash map's layout.
  std::sort(words.begin(), words.end(), [](const Word& x, const Word& y) { return x.ids < y.ids; });
  absl::flat_hash_map<uint64_t, int64_t> counts;
  for (const Word& w : words) CountPairs(w, +1, &counts);

  std::vector<std::pair<int32_t, int32_t>> merges;
  const int64_t wanted = vocab_size - kMinVocab;
  while (static_cast<int64_t>(merges.size()) < wanted) {
    uint64_t best = 0;
    int64_t best_count = 0;
    for (const auto& [key, count] : counts) {
      if (count > best_count || (count == best_count && count > 0 && key < best)) {
        best = key;
        best_count = count;
      }
    }
    if (best_count <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("the corpus is too small for a tokenizer of vocab_size ",
                                                     vocab_size, ": it allows only ", kMinVocab + merges.size()));
    }
    const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
    const int32_t merged = static_cast<int32_t>(256 + merges.size());
    for (Word& w : words) {
      bool has = false;
      for (size_t i = 0; i + 1 < w.ids.size() && !has; ++i) has = w.ids[i] == a && w.ids[i + 1] == b;
      if (!has) continue;
      CountPairs(w, -1, &counts);
      MergeInPlace(&w.ids, a, b, merged);
      CountPairs(w, +1, &counts);
    }
    absl::erase_if(counts, [](const auto& kv) { return kv.second == 0; });
    merges.emplace_back(a, b);
  }
  return Tokenizer(std::move(merges));
}

absl::StatusOr<Tokenizer> Tokenizer::FromJson(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("tokenizer: not a JSON object");
  if (!j.contains("format") || j["format"] != kFormat) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: \"format\" must be \"", kFormat, "\""));
  }
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer() || !j.contains("merges") ||
      !j["merges"].is_array()) {
    return absl::InvalidArgumentError("tokenizer: needs an integer \"vocab_size\" and a \"merges\" array");
  }
  const int64_t vocab = j["vocab_size"].get<int64_t>();
  const nlohmann::json& list = j["merges"];
  if (vocab < kMinVocab || vocab > kMaxVocab || static_cast<int64_t>(list.size()) != vocab - kMinVocab) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: vocab_size ", vocab, " needs ", vocab - kMinVocab,
                                                   " merges, the file has ", list.size()));
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(list.size());
  for (size_t r = 0; r < list.size(); ++r) {
    const nlohmann::json& m = list[r];
    const int64_t limit = 256 + static_cast<int64_t>(r);  // a merge uses only earlier ids
    if (!m.is_array() || m.size() != 2 || !m[0].is_number_integer() || !m[1].is_number_integer() ||
        m[0].get<int64_t>() < 0 || m[0].get<int64_t>() >= limit || m[1].get<int64_t>() < 0 ||
        m[1].get<int64_t>() >= limit) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", r, " must be two ids below ", limit));
    }
    merges.emplace_back(m[0].get<int32_t>(), m[1].get<int32_t>());
  }
  return Tokenizer(std::move(merges));
}

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("tokenizer: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<Tokenizer> t = FromJson(text.str());
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(t.status().message(), " (", path, ")"));
  return t;
}

std::string Tokenizer::ToJson() const {
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [a, b] : merges_) merges.push_back({a, b});
  const nlohmann::json j = {
      {"format", kFormat}, {"vocab_size", vocab_size()}, {"eos_id", eos_id()}, {"merges", merges}};
  return j.dump() + "\n";
}

absl::Status Tokenizer::Save(const std::string& path) const { return WriteSmallFileAtomic(path, ToJson()); }

void Tokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<int32_t> ids(word.begin(), word.end());
  for (int32_t& id : ids) id = static_cast<unsigned char>(id);
  // Apply the earliest-learned merge present, until none applies.
  while (ids.size() > 1) {
    int32_t best = -1;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = merged_id_.find(PairKey(ids[i], ids[i + 1]));
      if (it != merged_id_.end() && (best < 0 || it->second < best)) best = it->second;
    }
    if (best < 0) break;
    const auto& [a, b] = merges_[best - 256];
    MergeInPlace(&ids, a, b, best);
  }
  out->insert(out->end(), ids.begin(), ids.end());
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  for (std::string_view w : SplitWords(text)) EncodeWord(w, &out);
  return out;
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  static const std::string kNone;
  if (id < 0 || id >= static_cast<int32_t>(bytes_.size())) return kNone;
  return bytes_[id];
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  return out;
}

}  // namespace manta::train
