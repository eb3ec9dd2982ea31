// AVX-512 versions of vec_f32.h's loops (compiled with -mavx512f -mf16c only
// for this file; called after the CPU check in vec_f32.cpp).
// GCC 12 reports its own AVX-512 intrinsics' placeholder operands as
// uninitialized (false positives inside avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/type_traits.h"

namespace kt::kern::vec::avx512 {

namespace {

inline __m512 load16(GgmlType type, const void* row, int64_t i) {
  switch (type) {
    case GgmlType::F16:
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i)));
    case GgmlType::BF16: {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    default:
      return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  }
}

inline __m512 load_masked(GgmlType type, const void* row, int64_t i, __mmask16 m) {
  switch (type) {
    case GgmlType::F16:
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + i));
    case GgmlType::BF16: {
      const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + i);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    default:
      return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + i);
  }
}

}  // namespace

float dot(GgmlType type, const void* row, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_fmadd_ps(load16(type, row, i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load16(type, row, i + 16), _mm512_loadu_ps(x + i + 16), a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    a0 = _mm512_fmadd_ps(load_masked(type, row, i, m), _mm512_maskz_loadu_ps(m, x + i), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

void axpy(GgmlType type, const void* row, float a, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, load16(type, row, i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load_masked(type, row, i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void to_f32(GgmlType type, const void* row, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16(type, row, i));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, load_masked(type, row, i, m));
  }
}

}  // namespace kt::kern::vec::avx512
