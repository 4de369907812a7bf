// Packed products against a plain triple loop, on every instruction set the
// CPU has, with shapes that leave partial panels and row groups.
#include "serve/engine/packed_matrix.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace manta::serve {
namespace {

using Isa = PackedMatrix::Isa;

struct Packed {
  std::vector<uint8_t> arena;
  PackedMatrix matrix;
  Packed(const std::vector<float>& w, int64_t k, int64_t n, WeightFormat format)
      : arena(PackedMatrix::Layout(k, n, format).bytes + 64) {
    uint8_t* at = arena.data() + (64 - reinterpret_cast<uintptr_t>(arena.data()) % 64) % 64;
    matrix = PackedMatrix(w.data(), k, n, format, at);
  }
};

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> Plain(const std::vector<float>& a, const std::vector<float>& w, int64_t m, int64_t k, int64_t n) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[i * k + p]) * w[p * n + j];
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

float Bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

class PackedMatrixTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > PackedMatrix::BestIsa()) GTEST_SKIP() << "the CPU lacks these instructions";
    PackedMatrix::SetIsaForTesting(GetParam());
  }
  void TearDown() override { PackedMatrix::SetIsaForTesting(Isa::kAvx512); }
};

TEST_P(PackedMatrixTest, F32EqualsThePlainProductForAnyRowsAndColumns) {
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {64, 64}, {40, 100}, {129, 70}}) {
    const std::vector<float> w = Random(k * n, 1), a = Random(13 * k, 2);
    const Packed packed(w, k, n, WeightFormat::kF32);
    for (int64_t m = 1; m <= 13; ++m) {
      const std::vector<float> want = Plain(a, w, m, k, n);
      // Rows m..m+1 of the output are a guard: nothing is written past n columns or m rows.
      std::vector<float> got((m + 1) * (n + 3), -7.0f);
      packed.matrix.Multiply(m, a.data(), k, got.data(), n + 3);
      for (int64_t i = 0; i < m + 1; ++i) {
        for (int64_t j = 0; j < n + 3; ++j) {
          if (i < m && j < n) {
            ASSERT_NEAR(got[i * (n + 3) + j], want[i * n + j], 1e-4 * std::sqrt(k)) << k << "x" << n << " m=" << m;
          } else {
            ASSERT_EQ(got[i * (n + 3) + j], -7.0f) << "wrote outside the output at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST_P(PackedMatrixTest, ARowsSumsDoNotDependOnTheRowsBesideIt) {
  const int64_t k = 96, n = 130;
  const std::vector<float> w = Random(k * n, 3), a = Random(16 * k, 4);
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kBf16, WeightFormat::kInt8}) {
    const Packed packed(w, k, n, format);
    std::vector<float> all(16 * n), one(n);
    packed.matrix.Multiply(16, a.data(), k, all.data(), n);
    for (int64_t i = 0; i < 16; ++i) {
      packed.matrix.Multiply(1, a.data() + i * k, k, one.data(), n);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(one[j], all[i * n + j]) << WeightFormatName(format);
    }
  }
}

TEST_P(PackedMatrixTest, Bf16IsTheProductOfTheRoundedWeights) {
  const int64_t k = 200, n = 90, m = 5;
  const std::vector<float> w = Random(k * n, 5), a = Random(m * k, 6);
  std::vector<float> rounded(w);
  for (float& x : rounded) x = Bf16(x);
  const std::vector<float> want = Plain(a, rounded, m, k, n);
  std::vector<float> got(m * n);
  Packed(w, k, n, WeightFormat::kBf16).matrix.Multiply(m, a.data(), k, got.data(), n);
  for (int64_t i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], want[i], 1e-3);
}

TEST_P(PackedMatrixTest, Int8IsWithinHalfAStepOfEachColumnsScale) {
  const int64_t k = 256, n = 75, m = 3;
  std::vector<float> w = Random(k * n, 7);
  w[5 * n + 3] = 40.0f;                                 // one outlier coarsens only its own column
  for (int64_t p = 0; p < k; ++p) w[p * n + 9] = 0.0f;  // an all-zero column
  const std::vector<float> a = Random(m * k, 8);
  const std::vector<float> want = Plain(a, w, m, k, n);
  std::vector<float> got(m * n);
  Packed(w, k, n, WeightFormat::kInt8).matrix.Multiply(m, a.data(), k, got.data(), n);
  for (int64_t j = 0; j < n; ++j) {
    float max_w = 0;
    for (int64_t p = 0; p < k; ++p) max_w = std::max(max_w, std::fabs(w[p * n + j]));
    for (int64_t i = 0; i < m; ++i) {
      // Each weight is off by at most half its column's step, max |w| / 127 / 2.
      double bound = 0;
      for (int64_t p = 0; p < k; ++p) bound += std::fabs(a[i * k + p]);
      bound *= 0.5 * max_w / 127 * 1.01;
      ASSERT_NEAR(got[i * n + j], want[i * n + j], bound + 1e-4) << "column " << j;
      if (j == 9) {
        EXPECT_EQ(got[i * n + j], 0.0f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, PackedMatrixTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return info.param == Isa::kAvx512 ? "Avx512" : info.param == Isa::kAvx2 ? "Avx2" : "Scalar";
                         });

TEST(WeightFormatTest, NamesRoundTrip) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBf16, WeightFormat::kInt8}) {
    WeightFormat back;
    ASSERT_TRUE(ParseWeightFormat(WeightFormatName(f), &back));
    EXPECT_EQ(back, f);
  }
  WeightFormat unused;
  EXPECT_FALSE(ParseWeightFormat("float16", &unused));
}

}  // namespace
}  // namespace manta::serve
