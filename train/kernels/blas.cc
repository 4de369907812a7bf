#include "train/kernels/blas.h"

#include <cblas.h>
#include <immintrin.h>

namespace manta::train {
namespace {

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Rows [i, i + kRows) of C, columns [j, j + kCols): each row of A dotted
// with kCols rows of Bt, kRows x kCols sums in registers.
template <int kRows, int kCols>
__attribute__((target("avx2,fma"))) inline void Dots(int64_t k, const float* a, int64_t lda, const float* w,
                                                     int64_t ldw, float* c, int64_t ldc) {
  __m256 acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) acc[r][q] = _mm256_setzero_ps();
  }
  const int64_t whole = k / 8 * 8;
  for (int64_t p = 0; p < whole; p += 8) {
    __m256 wv[kCols];
    for (int q = 0; q < kCols; ++q) wv[q] = _mm256_loadu_ps(w + q * ldw + p);
    for (int r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_loadu_ps(a + r * lda + p);
      for (int q = 0; q < kCols; ++q) acc[r][q] = _mm256_fmadd_ps(av, wv[q], acc[r][q]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) {
      float sum = HorizontalSum(acc[r][q]);
      for (int64_t p = whole; p < k; ++p) sum += a[r * lda + p] * w[q * ldw + p];
      c[r * ldc + q] = sum;
    }
  }
}

__attribute__((target("avx2,fma"))) void FewRowsAvx2(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                     const float* bt, int64_t ldbt, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 3 <= n; j += 3) {
    const float* w = bt + j * ldbt;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) Dots<4, 3>(k, a + i * lda, lda, w, ldbt, c + i * ldc + j, ldc);
    for (; i < m; ++i) Dots<1, 3>(k, a + i * lda, lda, w, ldbt, c + i * ldc + j, ldc);
  }
  for (; j < n; ++j) {
    const float* w = bt + j * ldbt;
    for (int64_t i = 0; i < m; ++i) Dots<1, 1>(k, a + i * lda, lda, w, ldbt, c + i * ldc + j, ldc);
  }
}

bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

void GemmFewRows(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* bt, int64_t ldbt,
                 float* c, int64_t ldc) {
  if (m > 1 && m <= kFewRows && HasAvx2Fma()) {
    FewRowsAvx2(m, n, k, a, lda, bt, ldbt, c, ldc);
    return;
  }
  Gemm(false, true, m, n, k, 1.0f, a, lda, bt, ldbt, 0.0f, c, ldc);
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  if (m == 1 && !trans_a) {
    // One row (a decode step, one query's attention): a matrix-vector
    // product streams B once, where sgemm would pack it first. c = op(B)^T a.
    cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, static_cast<blasint>(trans_b ? n : k),
                static_cast<blasint>(trans_b ? k : n), alpha, b, static_cast<blasint>(ldb), a, 1, beta, c, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

int BlasThreads() { return openblas_get_num_threads(); }

}  // namespace manta::train
