// A byte-level BPE tokenizer, trained on the corpus a run learns from and
// saved with its checkpoints, so a served model reads and writes text the
// way it was trained.
//
// Ids 0..255 are the bytes; merge r makes id 256 + r from two earlier ids;
// the last id (vocab_size - 1) is the end-of-text token that separates
// documents. Any byte string encodes, and Decode(Encode(s)) == s.
//
// Text is first cut into words (an optional leading space, then a run of
// letters, of digits, or of other non-space bytes; other whitespace on its
// own; no word longer than kMaxWordBytes) and merges never cross a word, so
// encoding is a pure function of each word and long inputs cost linear time.
//
//   ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Train(documents, 1024));
//   std::vector<int32_t> ids = tok.Encode("Hello, world");
//   RETURN_IF_ERROR(tok.Save(dir + "/tokenizer.json"));
//
// Immutable once built: every const method may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace manta::train {

class Tokenizer {
 public:
  static constexpr int64_t kMinVocab = 257;  // the bytes and end-of-text
  static constexpr int64_t kMaxVocab = 1 << 20;
  static constexpr size_t kMaxWordBytes = 64;

  // Learns vocab_size - 257 merges from the documents, most frequent pair
  // first (ties: the smallest ids). Deterministic: the same documents give
  // the same tokenizer on every host.
  static absl::StatusOr<Tokenizer> Train(const std::vector<std::string>& documents, int64_t vocab_size);

  // The JSON of ToJson(); anything else is an error saying what is wrong.
  static absl::StatusOr<Tokenizer> FromJson(std::string_view text);
  static absl::StatusOr<Tokenizer> Load(const std::string& path);

  std::string ToJson() const;
  // Writes ToJson() to `path` atomically (a temporary file, then rename).
  absl::Status Save(const std::string& path) const;

  std::vector<int32_t> Encode(std::string_view text) const;
  // The bytes of `ids`; end-of-text and ids out of range give no bytes.
  std::string Decode(const std::vector<int32_t>& ids) const;
  // The bytes of one id ("" for end-of-text or out of range).
  const std::string& TokenBytes(int32_t id) const;

  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()) + 1; }
  int32_t eos_id() const { return static_cast<int32_t>(bytes_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

  // Cuts text into the words BPE works within (views into `text`).
  static std::vector<std::string_view> SplitWords(std::string_view text);

 private:
  explicit Tokenizer(std::vector<std::pair<int32_t, int32_t>> merges);
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  std::vector<std::pair<int32_t, int32_t>> merges_;
  absl::flat_hash_map<uint64_t, int32_t> merged_id_;  // (a << 32 | b) -> id
  std::vector<std::string> bytes_;                    // id -> bytes, without end-of-text
};

}  // namespace manta::train
