// matmul_q's activation quantizers with AVX-512 (F, BW, DQ, VL; F16C): the
// scalar ones (matmul_q.cpp) 16 values at a time, with the same float operations
// in the same order, so the bytes are identical. Compiled with those instruction
// sets alone (kernels/CMakeLists.txt) and entered only after active_isa() >=
// Isa::Avx512.
#include "kernels/cpu/matmul_q.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__F16C__)

#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the "don't care"
// operand and then warn about it at every inlined use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kt::cpu::matmul_detail {

namespace {

// std::round: nearest, halves away from zero (x - trunc(x) is exact).
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(v, t);
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_and_ps(frac, abs_mask), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_andnot_ps(abs_mask, v), _mm512_set1_ps(1.0f));  // copysign(1, v)
  return _mm512_mask_add_ps(t, up, t, one);
}

inline __m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

void quantize_row_q8_0_avx512(const float* x, int64_t n, uint8_t* dst) {
  const int64_t nb = n / 32;
  const auto [qs, dexp, qsum] = act_q8_0_rows(dst, n);
  for (int64_t k = 0; k < nb; ++k) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * k), v1 = _mm512_loadu_ps(x + 32 * k + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_ps(v0), abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float d16 = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v0, vid)));
    const __m512i q1 = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v1, vid)));
    const __m128i c128 = _mm_set1_epi8(char(0x80));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * k), _mm_add_epi8(_mm512_cvtsepi32_epi8(q0), c128));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * k + 16), _mm_add_epi8(_mm512_cvtsepi32_epi8(q1), c128));
    _mm256_storeu_ps(dexp + 8 * k, _mm256_set1_ps(d16));
    qsum[k] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

void quantize_row_q8_k_avx512(GgmlType t, const float* x, int64_t n, uint8_t* dst) {
  const int64_t nb = n / 256;
  const auto [qs, bsumf, bsum, dd] = act_q8_k_rows(dst, n);
  const bool iq4xs = t == GgmlType::IQ4_XS;
  for (int64_t k = 0; k < nb; ++k) {
    const float* xb = x + 256 * k;
    int8_t* out = qs + 256 * k;
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) m = _mm512_max_ps(m, abs_ps(_mm512_loadu_ps(xb + 16 * i)));
    const float amax = _mm512_reduce_max_ps(m);
    float d = 0.0f;
    __m512i s = _mm512_setzero_si512();  // lane i: sum of values 16 i .. 16 i + 15
    if (amax == 0.0f) {
      std::memset(out, 0, 256);
    } else {
      // The first value of largest magnitude sets the sign of the scale.
      float max = 0.0f;
      for (int i = 0; i < 16; ++i) {
        const __m512 v = _mm512_loadu_ps(xb + 16 * i);
        const __mmask16 hit = _mm512_cmp_ps_mask(abs_ps(v), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (hit) {
          max = xb[16 * i + __builtin_ctz(hit)];
          break;
        }
      }
      const float iscale = -127.0f / max;
      d = 1.0f / iscale;
      const __m512 vis = _mm512_set1_ps(iscale);
      for (int i = 0; i < 16; ++i) {
        const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(vis, _mm512_loadu_ps(xb + 16 * i)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i qi = _mm512_cvttps_epi32(_mm512_min_ps(r, _mm512_set1_ps(127.0f)));
        // Values 16 i .. 16 i + 15 stay together in either order (iq4xs_act_pos).
        const int pos = iq4xs ? iq4xs_act_pos(16 * i) : 16 * i;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + pos), _mm512_cvtsepi32_epi8(qi));
        s = _mm512_mask_set1_epi32(s, __mmask16(1u << i), _mm512_reduce_add_epi32(qi));
      }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bsum + 16 * k), _mm512_cvtepi32_epi16(s));
    _mm512_storeu_ps(bsumf + 16 * k, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(s)));
    dd[k] = d;
  }
}

void quantize_row_float_avx512(GgmlType t, const float* x, int64_t n, uint8_t* dst) {
  float* out = reinterpret_cast<float*>(dst);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 r = v;
    if (t == GgmlType::F16) {
      r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else if (t == GgmlType::BF16) {
      // float_ref's f32_to_bf16: round to nearest even; NaN stays NaN (quieted).
      const __m512i u = _mm512_castps_si512(v);
      const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i b = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
      const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      b = _mm512_mask_or_epi32(b, nan, u, _mm512_set1_epi32(0x00400000));
      r = _mm512_castsi512_ps(_mm512_and_si512(b, _mm512_set1_epi32(int(0xffff0000u))));
    }
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

}  // namespace

bool quantize_acts_avx512(GgmlType t, const float* x, int64_t x_stride, int64_t n_rows, int64_t n, uint8_t* dst,
                          size_t ab) {
  const ActKind kind = act_kind(t);
  if (kind == ActKind::None) return false;
  const size_t used = act_payload_bytes(kind, n);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * x_stride;
    uint8_t* o = dst + size_t(r) * ab;
    if (kind == ActKind::Float) quantize_row_float_avx512(t, xr, n, o);
    else if (kind == ActKind::Q8_0) quantize_row_q8_0_avx512(xr, n, o);
    else quantize_row_q8_k_avx512(t, xr, n, o);
    std::memset(o + used, 0, ab - used);
  }
  return true;
}

}  // namespace kt::cpu::matmul_detail

#else  // not built with AVX-512: the dispatcher never gets here

namespace kt::cpu::matmul_detail {
bool quantize_acts_avx512(GgmlType, const float*, int64_t, int64_t, int64_t, uint8_t*, size_t) { return false; }
}  // namespace kt::cpu::matmul_detail

#endif
