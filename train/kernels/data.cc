#include "train/kernels/data.h"

#include <numeric>

namespace manta::train {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

SyntheticDataset::SyntheticDataset(uint64_t seed, int64_t vocab, int64_t seq_len)
    : seed_(seed), vocab_(vocab), seq_len_(seq_len), successor_(vocab) {
  std::iota(successor_.begin(), successor_.end(), 0);
  uint64_t state = Mix(seed ^ 0x5eed);
  for (int64_t i = vocab - 1; i > 0; --i) {
    state = Mix(state);
    std::swap(successor_[i], successor_[state % static_cast<uint64_t>(i + 1)]);
  }
}

void SyntheticDataset::Fill(int64_t step, int64_t global_batch, int64_t first_row, int64_t rows, int32_t* inputs,
                            int32_t* targets) const {
  std::vector<int32_t> seq(seq_len_ + 1);
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t state = Mix(seed_ * 0x100000001b3ULL ^ Mix(static_cast<uint64_t>(step * global_batch + first_row + r)));
    seq[0] = static_cast<int32_t>(state % static_cast<uint64_t>(vocab_));
    for (int64_t t = 1; t <= seq_len_; ++t) {
      state = Mix(state);
      if (state % 10 == 0) {
        seq[t] = static_cast<int32_t>((state >> 8) % static_cast<uint64_t>(vocab_));
      } else {
        seq[t] = successor_[seq[t - 1]];
      }
    }
    std::copy(seq.begin(), seq.end() - 1, inputs + r * seq_len_);
    std::copy(seq.begin() + 1, seq.end(), targets + r * seq_len_);
  }
}

}  // namespace manta::train
