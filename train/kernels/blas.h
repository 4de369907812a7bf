// Row-major matrix products through OpenBLAS.
#pragma once

#include <cstdint>

namespace manta::train {

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all row-major with
// leading dimensions lda, ldb, ldc (elements between consecutive rows).
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Sets the number of threads OpenBLAS uses for one product (process-wide).
void SetBlasThreads(int threads);
int BlasThreads();

}  // namespace manta::train
