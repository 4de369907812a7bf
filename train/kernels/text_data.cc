#include "train/kernels/text_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace manta::train {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxCorpusBytes = int64_t{1} << 30;

bool IsUtf8Text(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra;
    if (c == 0) return false;
    if (c < 0x80)
      extra = 0;
    else if (c >= 0xc2 && c <= 0xdf)
      extra = 1;
    else if (c >= 0xe0 && c <= 0xef)
      extra = 2;
    else if (c >= 0xf0 && c <= 0xf4)
      extra = 3;
    else
      return false;
    if (s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += 1 + extra;
  }
  return true;
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTextCorpus(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("config key 'dataset_path': no such file or folder: ", path));
  }
  std::vector<std::string> files;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
    }
    if (ec) return absl::InternalError(absl::StrCat("cannot list ", path, ": ", ec.message()));
    std::sort(files.begin(), files.end());
  } else if (S_ISREG(st.st_mode)) {
    files.push_back(path);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("config key 'dataset_path': not a regular file or folder: ", path));
  }
  std::vector<std::string> docs;
  int64_t total = 0;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string text, ReadWhole(f));
    if (text.empty() || !IsUtf8Text(text)) continue;
    total += static_cast<int64_t>(text.size());
    if (total > kMaxCorpusBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key 'dataset_path': the corpus at ", path, " is over ", kMaxCorpusBytes >> 30, " GiB"));
    }
    docs.push_back(std::move(text));
  }
  if (docs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'dataset_path': no UTF-8 text files at ", path));
  }
  return docs;
}

TextDataset::TextDataset(std::vector<int32_t> tokens, int64_t seq_len, uint64_t seed)
    : tokens_(std::move(tokens)), seq_len_(seq_len), seed_(seed) {
  windows_ = (static_cast<int64_t>(tokens_.size()) - 1) / seq_len_;
  half_bits_ = 1;
  while ((int64_t{1} << (2 * half_bits_)) < windows_) ++half_bits_;
}

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Create(std::vector<int32_t> tokens, int64_t seq_len,
                                                                 uint64_t seed) {
  if (seq_len <= 0) return absl::InvalidArgumentError("text dataset: seq_len must be positive");
  if (static_cast<int64_t>(tokens.size()) < seq_len + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'dataset_path': the corpus has ", tokens.size(),
                     " tokens, fewer than one sequence of max_target_length + 1 = ", seq_len + 1));
  }
  return std::unique_ptr<TextDataset>(new TextDataset(std::move(tokens), seq_len, seed));
}

int64_t TextDataset::WindowOf(int64_t sample) const {
  const uint64_t epoch = static_cast<uint64_t>(sample / windows_);
  const uint64_t key = Mix(seed_ ^ Mix(epoch + 0x7e47));
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  // A 4-round Feistel network permutes [0, 2^(2h)); walking the cycle until
  // the value falls below W permutes [0, W).
  uint64_t x = static_cast<uint64_t>(sample % windows_);
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t next = left ^ (Mix(key ^ (round << 56) ^ right) & mask);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(windows_));
  return static_cast<int64_t>(x);
}

void TextDataset::Fill(int64_t step, int64_t global_batch, int64_t first_row, int64_t rows, int32_t* inputs,
                       int32_t* targets) const {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* window = tokens_.data() + WindowOf(step * global_batch + first_row + r) * seq_len_;
    std::copy(window, window + seq_len_, inputs + r * seq_len_);
    std::copy(window + 1, window + seq_len_ + 1, targets + r * seq_len_);
  }
}

std::string RunTokenizerPath(const Config& config) {
  return absl::StrCat(config.base_output_directory, "/", config.run_name, "/tokenizer.json");
}

namespace {

absl::StatusOr<Tokenizer> RunTokenizer(const Config& config, const std::vector<std::string>& docs) {
  std::error_code ec;
  std::string from = config.tokenizer_path;
  if (from.empty() && fs::exists(RunTokenizerPath(config), ec)) from = RunTokenizerPath(config);
  if (!from.empty()) {
    ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(from));
    if (tok.vocab_size() != config.model.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("config key 'vocab_size' is ", config.model.vocab_size,
                                                     " but the tokenizer ", from, " has ", tok.vocab_size(), " ids"));
    }
    return tok;
  }
  ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Train(docs, config.model.vocab_size));
  const std::string path = RunTokenizerPath(config);
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create the folder of ", path, ": ", ec.message()));
  RETURN_IF_ERROR(tok.Save(path));
  return tok;
}

}  // namespace

absl::StatusOr<RunData> MakeRunData(const Config& config) {
  RunData data;
  if (config.dataset_type != "text") {
    data.dataset =
        std::make_unique<SyntheticDataset>(config.data_shuffle_seed, config.model.vocab_size, config.max_target_length);
    return data;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> docs, ReadTextCorpus(config.dataset_path));
  ASSIGN_OR_RETURN(Tokenizer tok, RunTokenizer(config, docs));
  std::vector<int32_t> tokens;
  for (const std::string& doc : docs) {
    std::vector<int32_t> ids = tok.Encode(doc);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.push_back(tok.eos_id());
  }
  ASSIGN_OR_RETURN(data.dataset,
                   TextDataset::Create(std::move(tokens), config.max_target_length, config.data_shuffle_seed));
  data.tokenizer = std::move(tok);
  return data;
}

}  // namespace manta::train
