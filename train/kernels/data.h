// The synthetic dataset: a deterministic stream of token sequences with
// structure a model can learn. Each sequence starts at a random token and
// mostly follows a fixed random permutation of the vocabulary (token ->
// successor); about one token in ten is random instead. The best possible
// loss is therefore far below log(vocab).
//
// Row r of the global batch at step s is a pure function of (seed, s, r),
// so every mesh sees the same global batch and a device reads only its rows.
#pragma once

#include <cstdint>
#include <vector>

namespace manta::train {

// SplitMix64's finalizer: a well-mixed 64-bit function of x (the datasets'
// seeded, stateless randomness).
uint64_t Mix(uint64_t x);

// Where a run's token sequences come from. Fill is const and may be called
// from every device thread at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  // Fills rows [first_row, first_row + rows) of the global batch at `step`:
  // inputs and targets are [rows, seq_len], targets shifted by one. Row r
  // of step s is global sample s * global_batch + r, whatever the mesh.
  virtual void Fill(int64_t step, int64_t global_batch, int64_t first_row, int64_t rows, int32_t* inputs,
                    int32_t* targets) const = 0;
};

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(uint64_t seed, int64_t vocab, int64_t seq_len);

  // Fills rows [first_row, first_row + rows) of the global batch at `step`:
  // inputs and targets are [rows, seq_len], targets shifted by one.
  void Fill(int64_t step, int64_t global_batch, int64_t first_row, int64_t rows, int32_t* inputs,
            int32_t* targets) const override;

 private:
  uint64_t seed_;
  int64_t vocab_, seq_len_;
  std::vector<int32_t> successor_;
};

}  // namespace manta::train
