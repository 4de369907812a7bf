// The text dataset (dataset_type=text). The documents at dataset_path are
// tokenized, each followed by end-of-text, into one stream of N tokens, cut
// into W = (N - 1) / seq_len windows of seq_len + 1 tokens (neighbours share
// one token). Global sample g reads window P_e(g mod W) of epoch e = g / W,
// where P_e is a permutation of the windows drawn from (seed, e): a sample
// is a pure function of (seed, g), whatever the mesh, its resizes or the
// process reading it, and an epoch reads every window once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/kernels/config.h"
#include "train/kernels/data.h"
#include "train/kernels/tokenizer.h"

namespace manta::train {

// The documents at `path`: a file is one document; a folder gives each
// regular file directly inside it, by name, skipping symlinks and files
// that are not UTF-8 text (a NUL byte, an invalid sequence). An error names
// the path when nothing is left or the corpus is over 1 GiB.
absl::StatusOr<std::vector<std::string>> ReadTextCorpus(const std::string& path);

class TextDataset : public Dataset {
 public:
  static absl::StatusOr<std::unique_ptr<TextDataset>> Create(std::vector<int32_t> tokens, int64_t seq_len,
                                                             uint64_t seed);

  void Fill(int64_t step, int64_t global_batch, int64_t first_row, int64_t rows, int32_t* inputs,
            int32_t* targets) const override;

  int64_t windows() const { return windows_; }
  int64_t tokens() const { return static_cast<int64_t>(tokens_.size()); }
  // The window global sample `sample` reads.
  int64_t WindowOf(int64_t sample) const;

 private:
  TextDataset(std::vector<int32_t> tokens, int64_t seq_len, uint64_t seed);

  std::vector<int32_t> tokens_;
  int64_t seq_len_, windows_;
  uint64_t seed_;
  int half_bits_;  // the permutation's domain is 2^(2 * half_bits_) >= windows_
};

// A run's data: the dataset its config names and, for text, its tokenizer.
struct RunData {
  std::unique_ptr<Dataset> dataset;
  std::optional<Tokenizer> tokenizer;
};

// The run's tokenizer file: <base_output_directory>/<run_name>/tokenizer.json.
std::string RunTokenizerPath(const Config& config);

// Builds the config's dataset. For text: the tokenizer is tokenizer_path if
// set, else the run's file if it exists (a resumed run), else one trained
// on the corpus and saved there; its vocabulary must be vocab_size.
absl::StatusOr<RunData> MakeRunData(const Config& config);

}  // namespace manta::train
