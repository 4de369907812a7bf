#include "serve/engine/packed_matrix.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace manta::serve {
namespace {

using Isa = PackedMatrix::Isa;

std::atomic<Isa> isa_limit{Isa::kAvx512};

Isa ActiveIsa() { return std::min(PackedMatrix::BestIsa(), isa_limit.load()); }

int64_t WidthFor(Isa isa) { return isa == Isa::kAvx512 ? 64 : 32; }

int64_t ElementBytes(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBf16:
      return 2;
    case WeightFormat::kInt8:
      return 1;
    case WeightFormat::kF32:
      break;
  }
  return 4;
}

int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

float FromBf16(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline float ToFloat(float x) { return x; }
inline float ToFloat(uint16_t x) { return FromBf16(x); }
inline float ToFloat(int8_t x) { return static_cast<float>(x); }

// ---- AVX-512: panels of 64 columns, up to 6 rows x 4 vectors of sums ----

template <typename T>
__attribute__((target("avx512f"))) inline __m512 Load16(const T* p) {
  if constexpr (std::is_same_v<T, float>) return _mm512_loadu_ps(p);
  // The masked forms with every lane set: GCC 12 warns of the unmasked
  // ones' undefined source operand.
  constexpr __mmask16 kAll = 0xffff;
  if constexpr (std::is_same_v<T, uint16_t>) {
    const __m512i x = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, x, 16));
  } else {
    const __m512i x = _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_maskz_cvtepi32_ps(kAll, x);
  }
}

template <typename T, int R>
__attribute__((target("avx512f"))) void Panel512(int64_t k, const float* a, int64_t lda, const T* w, const float* scale,
                                                 float* c, int64_t ldc, int64_t valid) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p, w += 64) {
    const __m512 w0 = Load16(w), w1 = Load16(w + 16), w2 = Load16(w + 32), w3 = Load16(w + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(a[r * lda + p]);
      acc[r][0] = _mm512_fmadd_ps(b, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(b, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(b, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(b, w3, acc[r][3]);
    }
  }
  for (int q = 0; q < 4; ++q) {
    const int64_t left = std::clamp<int64_t>(valid - 16 * q, 0, 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
    const __m512 s = scale ? _mm512_maskz_loadu_ps(mask, scale + 16 * q) : _mm512_set1_ps(1.0f);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(c + r * ldc + 16 * q, mask, _mm512_mul_ps(acc[r][q], s));
  }
}

template <typename T>
__attribute__((target("avx512f"))) void Multiply512(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                    const T* panels, const float* scales, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += 64, panels += k * 64) {
    const float* s = scales ? scales + j : nullptr;
    const int64_t valid = std::min<int64_t>(64, n - j);
    int64_t i = 0;
    for (; i + 6 <= m; i += 6) Panel512<T, 6>(k, a + i * lda, lda, panels, s, c + i * ldc + j, ldc, valid);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc + j;
    switch (m - i) {
      case 5:
        Panel512<T, 5>(k, ai, lda, panels, s, ci, ldc, valid);
        break;
      case 4:
        Panel512<T, 4>(k, ai, lda, panels, s, ci, ldc, valid);
        break;
      case 3:
        Panel512<T, 3>(k, ai, lda, panels, s, ci, ldc, valid);
        break;
      case 2:
        Panel512<T, 2>(k, ai, lda, panels, s, ci, ldc, valid);
        break;
      case 1:
        Panel512<T, 1>(k, ai, lda, panels, s, ci, ldc, valid);
        break;
      default:
        break;
    }
  }
}

// ---- AVX2 with FMA: panels of 32 columns, up to 3 rows x 4 vectors ----

template <typename T>
__attribute__((target("avx2,fma"))) inline __m256 Load8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  } else {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
}

template <typename T, int R>
__attribute__((target("avx2,fma"))) void Panel256(int64_t k, const float* a, int64_t lda, const T* w,
                                                  const float* scale, float* c, int64_t ldc, int64_t valid) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p, w += 32) {
    const __m256 w0 = Load8(w), w1 = Load8(w + 8), w2 = Load8(w + 16), w3 = Load8(w + 24);
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_broadcast_ss(a + r * lda + p);
      acc[r][0] = _mm256_fmadd_ps(b, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(b, w1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(b, w2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(b, w3, acc[r][3]);
    }
  }
  alignas(32) float tile[32];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < 4; ++q) {
      const __m256 s = scale ? _mm256_loadu_ps(scale + 8 * q) : _mm256_set1_ps(1.0f);
      _mm256_store_ps(tile + 8 * q, _mm256_mul_ps(acc[r][q], s));
    }
    std::memcpy(c + r * ldc, tile, sizeof(float) * valid);
  }
}

template <typename T>
__attribute__((target("avx2,fma"))) void Multiply256(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                     const T* panels, const float* scales, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += 32, panels += k * 32) {
    const float* s = scales ? scales + j : nullptr;
    const int64_t valid = std::min<int64_t>(32, n - j);
    int64_t i = 0;
    for (; i + 3 <= m; i += 3) Panel256<T, 3>(k, a + i * lda, lda, panels, s, c + i * ldc + j, ldc, valid);
    if (m - i == 2) Panel256<T, 2>(k, a + i * lda, lda, panels, s, c + i * ldc + j, ldc, valid);
    if (m - i == 1) Panel256<T, 1>(k, a + i * lda, lda, panels, s, c + i * ldc + j, ldc, valid);
  }
}

// ---- Anything else: the same sums in plain C++ ----

template <typename T>
void MultiplyScalar(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const T* panels, const float* scales,
                    float* c, int64_t ldc) {
  constexpr int64_t kW = 32;
  for (int64_t j = 0; j < n; j += kW, panels += k * kW) {
    const int64_t valid = std::min<int64_t>(kW, n - j);
    for (int64_t i = 0; i < m; ++i) {
      float acc[kW] = {};
      for (int64_t p = 0; p < k; ++p) {
        const float x = a[i * lda + p];
        for (int64_t q = 0; q < kW; ++q) acc[q] += x * ToFloat(panels[p * kW + q]);
      }
      for (int64_t q = 0; q < valid; ++q) c[i * ldc + j + q] = acc[q] * (scales ? scales[j + q] : 1.0f);
    }
  }
}

template <typename T>
void MultiplyAs(Isa isa, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const T* panels,
                const float* scales, float* c, int64_t ldc) {
  switch (isa) {
    case Isa::kAvx512:
      Multiply512(m, n, k, a, lda, panels, scales, c, ldc);
      return;
    case Isa::kAvx2:
      Multiply256(m, n, k, a, lda, panels, scales, c, ldc);
      return;
    case Isa::kScalar:
      MultiplyScalar(m, n, k, a, lda, panels, scales, c, ldc);
      return;
  }
}

}  // namespace

bool ParseWeightFormat(const char* name, WeightFormat* out) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBf16, WeightFormat::kInt8}) {
    if (std::strcmp(name, WeightFormatName(f)) == 0) {
      *out = f;
      return true;
    }
  }
  return false;
}

const char* WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBf16:
      return "bfloat16";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kF32:
      break;
  }
  return "float32";
}

uint16_t RoundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>(bits >> 16);
}

PackedMatrix::Isa PackedMatrix::BestIsa() {
  static const Isa best = __builtin_cpu_supports("avx512f")                                 ? Isa::kAvx512
                          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::kAvx2
                                                                                            : Isa::kScalar;
  return best;
}

void PackedMatrix::SetIsaForTesting(Isa isa) { isa_limit = isa; }

PackedMatrix::Layout::Layout(int64_t k, int64_t n, WeightFormat format) {
  width = WidthFor(ActiveIsa());
  panels = (n + width - 1) / width;
  panel_elements = k * width;
  scale_offset = RoundUp64(panels * panel_elements * ElementBytes(format));
  bytes = scale_offset + (format == WeightFormat::kInt8 ? RoundUp64(panels * width * 4) : 0);
}

PackedMatrix::PackedMatrix(const float* w, int64_t k, int64_t n, WeightFormat format, uint8_t* arena)
    : k_(k), n_(n), format_(format), isa_(ActiveIsa()), panels_(arena) {
  const Layout layout(k, n, format);
  const int64_t width = layout.width;
  // Column scales first (int8): the largest magnitude of each column maps to 127.
  float* scales = nullptr;
  if (format == WeightFormat::kInt8) {
    scales = reinterpret_cast<float*>(arena + layout.scale_offset);
    std::fill(scales, scales + layout.panels * width, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) scales[j] = std::max(scales[j], std::fabs(w[p * n + j]));
    }
    for (int64_t j = 0; j < n; ++j) scales[j] /= 127.0f;
    scales_ = scales;
  }
  for (int64_t panel = 0; panel < layout.panels; ++panel) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t at = panel * layout.panel_elements + p * width;
      for (int64_t q = 0; q < width; ++q) {
        const int64_t j = panel * width + q;
        const float x = j < n ? w[p * n + j] : 0.0f;
        switch (format) {
          case WeightFormat::kF32:
            reinterpret_cast<float*>(arena)[at + q] = x;
            break;
          case WeightFormat::kBf16:
            reinterpret_cast<uint16_t*>(arena)[at + q] = RoundToBf16(x);
            break;
          case WeightFormat::kInt8: {
            const float s = j < n ? scales[j] : 0.0f;
            const float v = s > 0 ? std::nearbyint(x / s) : 0.0f;
            reinterpret_cast<int8_t*>(arena)[at + q] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
            break;
          }
        }
      }
    }
  }
}

void PackedMatrix::Multiply(int64_t m, const float* in, int64_t ld_in, float* out, int64_t ld_out) const {
  switch (format_) {
    case WeightFormat::kF32:
      MultiplyAs(isa_, m, n_, k_, in, ld_in, reinterpret_cast<const float*>(panels_), nullptr, out, ld_out);
      return;
    case WeightFormat::kBf16:
      MultiplyAs(isa_, m, n_, k_, in, ld_in, reinterpret_cast<const uint16_t*>(panels_), nullptr, out, ld_out);
      return;
    case WeightFormat::kInt8:
      MultiplyAs(isa_, m, n_, k_, in, ld_in, reinterpret_cast<const int8_t*>(panels_), scales_, out, ld_out);
      return;
  }
}

}  // namespace manta::serve
