// A projection of the serving engine, W[k, n] (out = in * W), stored for
// streaming: column panels of width() columns, each panel its k rows one
// after another, so one product reads the matrix front to back once.
//
//   PackedMatrix::Layout layout(k, n, WeightFormat::kF32);
//   std::vector<uint8_t> arena(layout.bytes);          // 64-byte aligned
//   PackedMatrix wq(w, k, n, WeightFormat::kF32, arena.data());
//   wq.Multiply(rows, in, k, out, n);
//
// A product keeps up to six rows' sums of one panel in registers (AVX-512;
// three with AVX2), so a decode step of 1 to 6 sequences reads each weight
// once from memory and a larger batch or a prompt re-reads a panel from
// cache. Every output is summed over k in order, one accumulator per
// column, whatever the number of rows: a sequence's logits do not depend on
// the batch it is decoded in.
//
// Formats: F32; bf16 (the top half of each float, rounded to nearest even);
// int8 weight-only with one scale per output column (max |w| / 127). The
// products accumulate in F32.
//
// Immutable once packed: Multiply may run from any thread.
#pragma once

#include <cstdint>

namespace manta::serve {

enum class WeightFormat { kF32, kBf16, kInt8 };

// "float32", "bfloat16", "int8": the values of manta_serve's --weights.
// False for any other name.
bool ParseWeightFormat(const char* name, WeightFormat* out);
const char* WeightFormatName(WeightFormat format);

// A float's bf16 (its top 16 bits, rounded to nearest even; NaN stays NaN),
// as kBf16 packs it.
uint16_t RoundToBf16(float x);

class PackedMatrix {
 public:
  // Where a matrix of this shape and format goes in an arena: the packed
  // panels, then (int8) the column scales. `bytes` is a multiple of 64.
  struct Layout {
    Layout(int64_t k, int64_t n, WeightFormat format);
    int64_t width = 0, panels = 0, panel_elements = 0, scale_offset = 0, bytes = 0;
  };

  PackedMatrix() = default;
  // Packs w[k, n] (row-major) into `arena`, which must hold Layout(k, n,
  // format).bytes bytes from a 64-byte boundary and outlive the matrix.
  PackedMatrix(const float* w, int64_t k, int64_t n, WeightFormat format, uint8_t* arena);

  // out[i, :] = in[i, :] * W for the m rows of `in` (ld_in floats apart);
  // out rows are ld_out floats apart.
  void Multiply(int64_t m, const float* in, int64_t ld_in, float* out, int64_t ld_out) const;

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  WeightFormat format() const { return format_; }

  // The instructions products use: the best the CPU has, unless a test
  // asks for less. Matrices keep the set they were packed for (it sets the
  // panel width: 64 columns with AVX-512, 32 otherwise).
  enum class Isa { kScalar, kAvx2, kAvx512 };
  static Isa BestIsa();
  static void SetIsaForTesting(Isa isa);  // kAvx512 back to the best; not while others pack

 private:
  int64_t k_ = 0, n_ = 0;
  WeightFormat format_ = WeightFormat::kF32;
  Isa isa_ = Isa::kScalar;
  const uint8_t* panels_ = nullptr;
  const float* scales_ = nullptr;  // kInt8 only: one per column, padded to whole panels
};

}  // namespace manta::serve
