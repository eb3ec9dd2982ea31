// AVX-512 versions of vec_f32.h's loops (compiled with -mavx512f -mf16c only
// for this file; called after the CPU check in vec_f32.cpp).
// GCC 12 reports its own AVX-512 intrinsics' placeholder operands as
// uninitialized (false positives inside avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

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

// gemm_nt in blocks of MI rows of A by NJ rows of B: MI * NJ accumulators,
// MI + NJ loads per MI * NJ multiply-adds, one reduction per output.
namespace {
inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

template <int MI, int NJ>
void nt_block(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k,
              bool accumulate) {
  __m512 s[MI][NJ];
  for (int i = 0; i < MI; ++i)
    for (int j = 0; j < NJ; ++j) s[i][j] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < k; kk += 16) {
    const __mmask16 m = tail_mask(k - kk);
    __m512 bv[NJ];
    for (int j = 0; j < NJ; ++j) bv[j] = _mm512_maskz_loadu_ps(m, b + j * ldb + kk);
    for (int i = 0; i < MI; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(m, a + i * lda + kk);
      for (int j = 0; j < NJ; ++j) s[i][j] = _mm512_fmadd_ps(av, bv[j], s[i][j]);
    }
  }
  for (int i = 0; i < MI; ++i)
    for (int j = 0; j < NJ; ++j) {
      const float d = _mm512_reduce_add_ps(s[i][j]);
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + d : d;
    }
}

template <int MI>
void nt_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n, int64_t k,
             bool accumulate) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) nt_block<MI, 2>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate);
  if (j < n) nt_block<MI, 1>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate);
}

// gemm_nn for MI rows of C: per 16 columns, MI accumulators, one load of B's
// row segment and MI broadcasts of A per step of j.
template <int MI>
void nn_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n, int64_t k,
             const float* c_scale) {
  for (int64_t l = 0; l < n; l += 16) {
    const __mmask16 m = tail_mask(n - l);
    __m512 acc[MI];
    for (int i = 0; i < MI; ++i) {
      acc[i] = _mm512_maskz_loadu_ps(m, c + i * ldc + l);
      if (c_scale) acc[i] = _mm512_mul_ps(acc[i], _mm512_set1_ps(c_scale[i]));
    }
    for (int64_t j = 0; j < k; ++j) {
      const __m512 bv = _mm512_maskz_loadu_ps(m, b + j * ldb + l);
      for (int i = 0; i < MI; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i * lda + j]), bv, acc[i]);
    }
    for (int i = 0; i < MI; ++i) _mm512_mask_storeu_ps(c + i * ldc + l, m, acc[i]);
  }
}
}  // namespace

void gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) nt_rows<4>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, k, accumulate);
  for (; i < m; ++i) nt_rows<1>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, k, accumulate);
}

void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, const float* c_scale) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    nn_rows<8>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, k, c_scale ? c_scale + i : nullptr);
  for (; i < m; ++i) nn_rows<1>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, k, c_scale ? c_scale + i : nullptr);
}

// silu(g) * u in float: exp by range reduction (t = k ln2 + r, |r| <= ln2/2),
// Cephes' degree-6 polynomial and _mm512_scalef_ps for 2^k (which gives inf
// and 0 past float's range, so silu is -0 and g there). ~2 ulp from the
// reference's double computation; exp_shift uses the same exp. The tail runs the same vector code under a
// mask, so an element's bits do not depend on where it sits in the row.
namespace {
// exp(t) for t in [-104, 89] (callers clamp): range reduction t = k ln2 + r,
// Cephes' polynomial for exp(r), _mm512_scalef_ps for 2^k.
inline __m512 exp16(__m512 t) {
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, k);
}

inline __m512 clamp_exp_arg(__m512 t) {
  return _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
}

inline __m512 silu_mul16(__m512 g, __m512 u) {
  // exp(-g), the argument held to [-104, 89]: past those ends exp is 0 or inf
  // in float anyway, and the reduction stays exact (a NaN g is kept by the
  // division).
  const __m512 e = exp16(clamp_exp_arg(_mm512_sub_ps(_mm512_setzero_ps(), g)));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}
}  // namespace

void round_f16(const float* x, float* y, int64_t n) {
  auto r16 = [](__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, r16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, r16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// Two passes: the maximum (four vectors of running maxima, so the loads are not
// one dependent chain), then the first value equal to it.
int64_t argmax(const float* x, int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m[4] = {lowest, lowest, lowest, lowest};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 4; ++k) m[k] = _mm512_max_ps(m[k], _mm512_loadu_ps(x + i + 16 * k));
  for (; i + 16 <= n; i += 16) m[0] = _mm512_max_ps(m[0], _mm512_loadu_ps(x + i));
  if (i < n) m[0] = _mm512_max_ps(m[0], _mm512_mask_loadu_ps(lowest, __mmask16((1u << (n - i)) - 1), x + i));
  const float best = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
  const __m512 bv = _mm512_set1_ps(best);
  for (i = 0; i < n; i += 16) {
    const __mmask16 in = i + 16 <= n ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(in, _mm512_maskz_loadu_ps(in, x + i), bv, _CMP_EQ_OQ);
    if (eq) return i + __builtin_ctz(eq);
  }
  return 0;  // unreachable without NaN: best is one of the values
}

void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, silu_mul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, silu_mul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

float exp_shift(float* x, int64_t n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp16(clamp_exp_arg(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv)));
    _mm512_mask_storeu_ps(x + i, k, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  return _mm512_reduce_add_ps(sum);
}

// Latent attention with heads in lanes (vec_f32.h attend_lanes): a block of NB
// rows keeps NB score vectors in registers while the queries stream once; the
// attended rows take 16 columns at a time, each a vector of the heads.
namespace {
template <int NB>
void attend_block(const float* qt, int64_t k, const float* rows, int64_t ld, int64_t kv, float scale, float* m,
                  float* l, float* ot) {
  // Each score sums kSpan values at a time into its own total: one lane
  // summing all k values in a row lost ~4x the accuracy of the dot products
  // it replaced (16 partial sums each).
  // (The totals live in memory, added to once a span: kept in registers
  // beside the spans' sums they made the compiler spill inside the loop.)
  constexpr int64_t kSpan = 32;
  alignas(64) float total[NB][16] = {};
  for (int64_t c0 = 0; c0 < k; c0 += kSpan) {
    __m512 part[NB];
    for (int j = 0; j < NB; ++j) part[j] = _mm512_setzero_ps();
    const int64_t c1 = std::min(k, c0 + kSpan);
    for (int64_t c = c0; c < c1; ++c) {
      const __m512 q = _mm512_loadu_ps(qt + c * 16);
      for (int j = 0; j < NB; ++j) part[j] = _mm512_fmadd_ps(q, _mm512_set1_ps(rows[j * ld + c]), part[j]);
    }
    for (int j = 0; j < NB; ++j) _mm512_store_ps(total[j], _mm512_add_ps(_mm512_load_ps(total[j]), part[j]));
  }
  __m512 s[NB];
  for (int j = 0; j < NB; ++j) s[j] = _mm512_load_ps(total[j]);
  const __m512 sc = _mm512_set1_ps(scale);
  const __m512 m_old = _mm512_loadu_ps(m);
  __m512 m_new = m_old;
  for (int j = 0; j < NB; ++j) m_new = _mm512_max_ps(m_new, s[j] = _mm512_mul_ps(s[j], sc));
  const __m512 alpha = exp16(clamp_exp_arg(_mm512_sub_ps(m_old, m_new)));  // ~0 from m = -inf
  alignas(64) float p[NB][16];
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < NB; ++j) {
    const __m512 e = exp16(clamp_exp_arg(_mm512_sub_ps(s[j], m_new)));
    sum = _mm512_add_ps(sum, e);
    _mm512_store_ps(p[j], e);
  }
  _mm512_storeu_ps(l, _mm512_fmadd_ps(alpha, _mm512_loadu_ps(l), sum));
  _mm512_storeu_ps(m, m_new);
  int64_t c = 0;
  for (; c + 16 <= kv; c += 16) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_mul_ps(alpha, _mm512_loadu_ps(ot + (c + i) * 16));
    for (int j = 0; j < NB; ++j) {
      const __m512 pj = _mm512_load_ps(p[j]);
      const float* rj = rows + j * ld + c;
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(pj, _mm512_set1_ps(rj[i]), acc[i]);
    }
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(ot + (c + i) * 16, acc[i]);
  }
  for (; c < kv; ++c) {
    __m512 acc = _mm512_mul_ps(alpha, _mm512_loadu_ps(ot + c * 16));
    for (int j = 0; j < NB; ++j) acc = _mm512_fmadd_ps(_mm512_load_ps(p[j]), _mm512_set1_ps(rows[j * ld + c]), acc);
    _mm512_storeu_ps(ot + c * 16, acc);
  }
}

using AttendBlock = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float, float*, float*, float*);
template <size_t... I>
constexpr std::array<AttendBlock, sizeof...(I)> attend_table(std::index_sequence<I...>) {
  return {&attend_block<int(I) + 1>...};
}
constexpr auto kAttendBlocks = attend_table(std::make_index_sequence<16>());
}  // namespace

void attend_lanes(const float* qt, int64_t k, const float* rows, int64_t ld, int64_t nb, int64_t kv, float scale,
                  float* m, float* l, float* ot) {
  if (nb > 0) kAttendBlocks[size_t(nb - 1)](qt, k, rows, ld, kv, scale, m, l, ot);
}

void merge_lanes(const float* part0, int64_t stride, int64_t n_parts, const float* f, int64_t n, float* o,
                 int64_t ldo, int64_t nh) {
  const __mmask16 heads = nh >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nh) - 1);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int32_t(ldo)));
  for (int64_t c = 0; c < n; ++c) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_parts; ++i)
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(f + i * 16), _mm512_loadu_ps(part0 + i * stride + c * 16), acc);
    _mm512_mask_i32scatter_ps(o + c, heads, idx, acc, 4);
  }
}

}  // namespace kt::kern::vec::avx512
