// matmul_q's AVX2 kernels (AVX2, FMA, F16C): CPUs without AVX-512 VNNI (Haswell to
// Alder Lake clients, Zen 1-3, Skylake-SP). This file alone is compiled with those
// instruction sets (kernels/CMakeLists.txt) and is entered only after
// active_isa() >= Isa::Avx2.
//
// The same plan as matmul_q_avx512.cpp with 256-bit registers and no VNNI:
// vpmaddubsw (unsigned x signed bytes to int16 pairs) then vpmaddwd (times int16
// scales, pairs summed to int32). With 16 registers the tile is 4 activation rows,
// and a k-quant block is walked 32 values at a time, each chunk of weights
// unpacked once and used by every row of the tile.
//  * 32-value types: activations are stored unsigned (q + 128). Weights that stay
//    small (Q4_0, Q5_0, Q4_1, Q5_1: |w| <= 31) meet them directly and the
//    128 * sum(w) this adds is subtracted (a per-block value); Q8_0 and IQ4_NL
//    (|w| up to 128) would saturate int16, so they take |w| and move w's sign onto
//    the signed activation instead.
//  * k-quants: unsigned weights, signed activations, minimums and offsets through
//    the activation sums per 16 values, as in the AVX-512 file; IQ4_XS's signed
//    code book uses the sign trick.
#include "kernels/cpu/matmul_q.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace kt::cpu::matmul_detail {
namespace {

constexpr int kTile = 4;  // activation rows per pass over a weight row

inline float load_fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// As in the AVX-512 file: several activation rows per block slow the loop enough
// that the hardware prefetchers fall behind; ask for the weights 2 KiB ahead.
inline void prefetch_ahead(const uint8_t* p, int bytes) {
  for (int l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + 2048 + l), _MM_HINT_T0);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Nibbles of 16 bytes: [low nibbles | high nibbles] = one 32-value block in order.
inline __m256i nibbles(const uint8_t* q) {
  const __m128i v = load128(q);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

// Bit j of a 32-bit word as byte j: 0x10 where set, 0 where clear.
inline __m256i bits_to_0x10(uint32_t bits) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), shuf);
  const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

template <class Kernel>
void drive(const uint8_t* w, uint64_t w_row_bytes, int64_t n, const uint8_t* xq, size_t ab, int64_t n_batch,
           float* y, int64_t ys, int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* row = w + uint64_t(o) * w_row_bytes;
    int64_t b = 0;
    for (; n_batch - b >= kTile; b += kTile)
      Kernel::template rows<kTile>(row, n, xq + size_t(b) * ab, ab, y + b * ys + o, ys);
    const uint8_t* x = xq + size_t(b) * ab;
    float* yb = y + b * ys + o;
    switch (n_batch - b) {
      case 3: Kernel::template rows<3>(row, n, x, ab, yb, ys); break;
      case 2: Kernel::template rows<2>(row, n, x, ab, yb, ys); break;
      case 1: Kernel::template rows<1>(row, n, x, ab, yb, ys); break;
      default: break;
    }
  }
}

// ---- float weights ---------------------------------------------------------------

template <GgmlType T>
struct KernelFloat {
  static constexpr int kElem = T == GgmlType::F32 ? 4 : 2;
  static __m256 load(const uint8_t* p) {
    if constexpr (T == GgmlType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    const __m128i h = load128(p);
    if constexpr (T == GgmlType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }

  // MR weight rows against NB activation rows; the tail of n (< 8 values) in scalar
  // float, added last so every split of [o0, o1) sums in the same order.
  template <int MR, int NB, int U>
  static void tile(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const float* xr[NB];
    const uint8_t* wrow[MR];
    __m256 acc[MR][NB][U];
#pragma GCC unroll 4
    for (int r = 0; r < NB; ++r) xr[r] = reinterpret_cast<const float*>(x + size_t(r) * xs);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      wrow[m] = w + uint64_t(m) * wr;
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) acc[m][r][u] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 8 * U <= n; i += 8 * U) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        __m256 wv[MR];
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) wv[m] = load(wrow[m] + (i + 8 * u) * kElem);
#pragma GCC unroll 4
        for (int r = 0; r < NB; ++r) {
          const __m256 xv = _mm256_loadu_ps(xr[r] + i + 8 * u);
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) acc[m][r][u] = _mm256_fmadd_ps(wv[m], xv, acc[m][r][u]);
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      __m256 wv[MR];
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) wv[m] = load(wrow[m] + i * kElem);
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r) {
        const __m256 xv = _mm256_loadu_ps(xr[r] + i);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) acc[m][r][0] = _mm256_fmadd_ps(wv[m], xv, acc[m][r][0]);
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r) {
        __m256 s = acc[m][r][0];
#pragma GCC unroll 4
        for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[m][r][u]);
        float t = hsum(s);
        for (int64_t j = i; j < n; ++j) {
          float wj;
          if constexpr (T == GgmlType::F32) {
            std::memcpy(&wj, wrow[m] + j * 4, 4);
          } else {
            const uint16_t h = load_u16(wrow[m] + j * 2);
            if constexpr (T == GgmlType::F16) {
              wj = _cvtsh_ss(h);
            } else {
              const uint32_t u = uint32_t(h) << 16;
              std::memcpy(&wj, &u, 4);
            }
          }
          t += wj * xr[r][j];
        }
        y[r * ys + m] = t;
      }
    }
  }

  template <int NB>
  static void rows_nb(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys,
                      int64_t o0, int64_t o1) {
    // U is the same for every NB (batch invariance: see matmul_q_avx512.cpp).
    constexpr int MR = NB == 2 ? 2 : 1;
    constexpr int U = 2;
    int64_t o = o0;
    for (; o + MR <= o1; o += MR) tile<MR, NB, U>(w + uint64_t(o) * wr, wr, n, x, xs, y + o, ys);
    for (; o < o1; ++o) tile<1, NB, U>(w + uint64_t(o) * wr, wr, n, x, xs, y + o, ys);
  }
};

template <GgmlType T>
void drive_float(const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab, int64_t n_batch, float* y,
                 int64_t ys, int64_t o0, int64_t o1) {
  using K = KernelFloat<T>;
  int64_t b = 0;
  for (; n_batch - b >= kTile; b += kTile) K::template rows_nb<kTile>(w, wr, n, xq + size_t(b) * ab, ab, y + b * ys, ys, o0, o1);
  const uint8_t* x = xq + size_t(b) * ab;
  float* yb = y + b * ys;
  switch (n_batch - b) {
    case 3: K::template rows_nb<3>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 2: K::template rows_nb<2>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    case 1: K::template rows_nb<1>(w, wr, n, x, ab, yb, ys, o0, o1); break;
    default: break;
  }
}

// ---- 32-value block types against Q8_0 activations --------------------------------

// kSign: |w| times the activation with w's sign (Q8_0, IQ4_NL); else w (|w| <= 31)
// times the unsigned activation, less 128 * sum(w).
struct Q4_0W {
  static constexpr int kBytes = 18;
  static constexpr bool kSign = false, kMin = false;
  static __m256i weights(const uint8_t* b) { return _mm256_sub_epi8(nibbles(b + 2), _mm256_set1_epi8(8)); }
};
struct Q4_1W {
  static constexpr int kBytes = 20;
  static constexpr bool kSign = false, kMin = true;
  static __m256i weights(const uint8_t* b) { return nibbles(b + 4); }
};
struct Q5_0W {
  static constexpr int kBytes = 22;
  static constexpr bool kSign = false, kMin = false;
  static __m256i weights(const uint8_t* b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(b + 6), bits_to_0x10(load_u32(b + 2))), _mm256_set1_epi8(16));
  }
};
struct Q5_1W {
  static constexpr int kBytes = 24;
  static constexpr bool kSign = false, kMin = true;
  static __m256i weights(const uint8_t* b) { return _mm256_or_si256(nibbles(b + 8), bits_to_0x10(load_u32(b + 4))); }
};
struct Q8_0W {
  static constexpr int kBytes = 34;
  static constexpr bool kSign = true, kMin = false;
  static __m256i weights(const uint8_t* b) { return load256(b + 2); }
};
struct Iq4_nlW {
  static constexpr int kBytes = 18;
  static constexpr bool kSign = true, kMin = false;
  static __m256i weights(const uint8_t* b) {
    const __m256i tbl = _mm256_broadcastsi128_si256(load128(kValuesIq4nl));
    return _mm256_shuffle_epi8(tbl, nibbles(b + 2));
  }
};

template <class T>
struct Kernel32 {
  template <int NB>
  static void rows(const uint8_t* w, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const int64_t nb = n / 32;
    ActQ8_0View a[NB];
    __m256 acc[NB];
    float mins[NB];
#pragma GCC unroll 4
    for (int r = 0; r < NB; ++r) {
      a[r] = act_q8_0(x + size_t(r) * xs, n);
      acc[r] = _mm256_setzero_ps();
      mins[r] = 0.0f;
    }
    const __m256i ones16 = _mm256_set1_epi16(1);
    const __m256i c80 = _mm256_set1_epi8(char(0x80));
    for (int64_t k = 0; k < nb; ++k) {
      const uint8_t* b = w + k * T::kBytes;
      if (k % 2 == 0) prefetch_ahead(b, 2 * T::kBytes);
      const __m256i wq = T::weights(b);
      const __m256 ws = _mm256_set1_ps(load_fp16(b));
      __m256i aw, corr;
      if constexpr (T::kSign) {
        aw = _mm256_sign_epi8(wq, wq);  // |w|
      } else {
        corr = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), wq), ones16), 7);
      }
      float m = 0.0f;
      if constexpr (T::kMin) m = load_fp16(b + 2);
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r) {
        const __m256i av = load256(a[r].qs + 32 * k);
        __m256i dot;
        if constexpr (T::kSign) {
          const __m256i as = _mm256_sign_epi8(_mm256_xor_si256(av, c80), wq);
          dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, as), ones16);
        } else {
          dot = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(av, wq), ones16), corr);
        }
        const __m256 da = _mm256_loadu_ps(a[r].dexp + 8 * k);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(ws, da), acc[r]);
        if constexpr (T::kMin) mins[r] += m * a[r].dexp[8 * k] * float(a[r].qsum[k]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NB; ++r) y[r * ys] = hsum(acc[r]) + mins[r];
  }
};

// ---- 256-value super-blocks against Q8_K activations ------------------------------

// The shared state of one unpacked super-block: int16 scales per 32-value chunk,
// d, and (Q4_K, Q5_K, Q6_K) the float factors of the activation sums per 16.
struct Unpacked {
  __m256i sc[8];
  __m256 dv;
  __m256 mv[2];
};

inline __m128i scales_mins_k4(const uint8_t* p) {
  uint32_t u[4];
  std::memcpy(u, p, 12);
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t m03 = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = m03;
  u[0] &= kmask1;
  // From registers: a 16-byte load of four 4-byte stores would miss store forwarding.
  return _mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3]));
}

// Q4_K and Q5_K: chunk s is sub-block s; 32 bytes of qs hold chunks 2p (low
// nibbles) and 2p + 1 (high).
template <bool kQ5>
struct KernelQ45K {
  static constexpr int kBytes = kQ5 ? 176 : 144;
  static constexpr bool kSigned = false, kBsums = true;
  static void unpack(const uint8_t* b, Unpacked* u) {
    const __m128i scm = scales_mins_k4(b + 4);
    alignas(16) uint8_t sm[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(sm), scm);
    for (int s = 0; s < 8; ++s) u->sc[s] = _mm256_set1_epi16(sm[s]);
    u->dv = _mm256_set1_ps(load_fp16(b));
    const __m256 ndmin = _mm256_set1_ps(-load_fp16(b + 2));
    const __m128i dup = _mm_shuffle_epi8(scm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
    u->mv[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(dup)), ndmin);
    u->mv[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(dup, 8))), ndmin);
  }
  static __m256i chunk(const uint8_t* b, int s) {
    const __m256i q = load256(b + (kQ5 ? 48 : 16) + 32 * (s / 2));
    __m256i v = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0F));
    if constexpr (kQ5) {
      // The fifth bit of value 32 s + l is bit s of qh[l].
      const __m256i qh = load256(b + 16);
      const __m256i h = s <= 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
      v = _mm256_or_si256(v, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
    }
    return v;
  }
  static __m256i acts(const int8_t* aq, int s) { return load256(aq + 32 * s); }
};

// Q6_K: chunk j = quarter j % 4 of half j / 4 (sub-blocks 2j and 2j + 1 of 16).
struct KernelQ6K {
  static constexpr int kBytes = 210;
  static constexpr bool kSigned = false, kBsums = true;
  static void unpack(const uint8_t* b, Unpacked* u) {
    const float d = load_fp16(b + 208);
    const __m128i s8 = load128(b + 192);
    const __m256i s16 = _mm256_cvtepi8_epi16(s8);
    // [sc[2j] x 8 | sc[2j + 1] x 8]: the int32 holding both to every lane, then bytes 0-1 / 2-3 per half.
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                          2, 3, 2, 3, 2, 3);
    for (int j = 0; j < 8; ++j)
      u->sc[j] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(j)), pick);
    u->dv = _mm256_set1_ps(d);
    const __m256 m32 = _mm256_set1_ps(-32.0f * d);
    u->mv[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), m32);
    u->mv[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), m32);
  }
  static __m256i chunk(const uint8_t* b, int j) {
    const int h = j / 4, k = j % 4;
    const __m256i ql = load256(b + 64 * h + 32 * (k % 2));
    const __m256i qh = load256(b + 128 + 32 * h);
    const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    // Bits 2k, 2k + 1 of qh to bits 4, 5.
    const __m256i hi = k == 0 ? _mm256_slli_epi16(qh, 4)
                       : k == 1 ? _mm256_slli_epi16(qh, 2)
                       : k == 2 ? qh
                                : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
  }
  static __m256i acts(const int8_t* aq, int j) { return load256(aq + 32 * j); }
};

// IQ4_XS: chunk s is sub-block s; returns code book values (signed), used with the
// sign trick. Its activations are stored in iq4xs_act_pos order: the 16 low-half
// values of sub-block s at 128 (s / 4) + 16 (s % 4), the high half 64 further.
struct KernelIq4Xs {
  static constexpr int kBytes = 136;
  static constexpr bool kSigned = true, kBsums = false;
  static void unpack(const uint8_t* b, Unpacked* u) {
    const uint16_t sh = load_u16(b + 2);
    const uint32_t sl = load_u32(b + 4);
    for (int s = 0; s < 8; ++s) {
      const int ls = int(((sl >> (4 * s)) & 0xF) | (((sh >> (2 * s)) & 3) << 4)) - 32;
      u->sc[s] = _mm256_set1_epi16(int16_t(ls));
    }
    u->dv = _mm256_set1_ps(load_fp16(b));
  }
  static __m256i chunk(const uint8_t* b, int s) {
    const __m256i tbl = _mm256_broadcastsi128_si256(load128(kValuesIq4nl));
    return _mm256_shuffle_epi8(tbl, nibbles(b + 8 + 16 * s));
  }
  static __m256i acts(const int8_t* aq, int s) {
    const int8_t* lo = aq + 128 * (s / 4) + 16 * (s % 4);
    return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(lo + 64), reinterpret_cast<const __m128i*>(lo));
  }
};

template <class T>
struct KernelK {
  template <int NB>
  static void rows(const uint8_t* w, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const int64_t nb = n / 256;
    ActQ8_KView a[NB];
    __m256 acc[NB];
#pragma GCC unroll 4
    for (int r = 0; r < NB; ++r) {
      a[r] = act_q8_k(x + size_t(r) * xs, n);
      acc[r] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < nb; ++k) {
      const uint8_t* b = w + k * T::kBytes;
      prefetch_ahead(b, T::kBytes);
      Unpacked u;
      T::unpack(b, &u);
      __m256i isum[NB];
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i wq = T::chunk(b, j);
        __m256i aw = wq;
        if constexpr (T::kSigned) aw = _mm256_sign_epi8(wq, wq);
#pragma GCC unroll 4
        for (int r = 0; r < NB; ++r) {
          __m256i av = T::acts(a[r].qs + 256 * k, j);
          if constexpr (T::kSigned) av = _mm256_sign_epi8(av, wq);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, av), u.sc[j]));
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < NB; ++r) {
        const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(a[r].d[k]));
        acc[r] = _mm256_fmadd_ps(f, u.dv, acc[r]);
        if constexpr (T::kBsums) {
          acc[r] = _mm256_fmadd_ps(u.mv[0], _mm256_loadu_ps(a[r].bsumf + 16 * k), acc[r]);
          acc[r] = _mm256_fmadd_ps(u.mv[1], _mm256_loadu_ps(a[r].bsumf + 16 * k + 8), acc[r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NB; ++r) y[r * ys] = hsum(acc[r]);
  }
};

}  // namespace

bool matmul_q_avx2_covers(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool matmul_q_avx2(GgmlType t, const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab, int64_t nbt,
                   float* y, int64_t ys, int64_t o0, int64_t o1) {
  switch (t) {
    case GgmlType::F32: drive_float<GgmlType::F32>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::F16: drive_float<GgmlType::F16>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::BF16: drive_float<GgmlType::BF16>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q4_0: drive<Kernel32<Q4_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q4_1: drive<Kernel32<Q4_1W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_0: drive<Kernel32<Q5_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_1: drive<Kernel32<Q5_1W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q8_0: drive<Kernel32<Q8_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::IQ4_NL: drive<Kernel32<Iq4_nlW>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q4_K: drive<KernelK<KernelQ45K<false>>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_K: drive<KernelK<KernelQ45K<true>>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q6_K: drive<KernelK<KernelQ6K>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::IQ4_XS: drive<KernelK<KernelIq4Xs>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    default: return false;
  }
}

}  // namespace kt::cpu::matmul_detail

#else  // not built with AVX2: the dispatcher never gets here

namespace kt::cpu::matmul_detail {
bool matmul_q_avx2_covers(GgmlType) { return false; }
bool matmul_q_avx2(GgmlType, const uint8_t*, uint64_t, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t,
                   int64_t, int64_t) {
  return false;
}
}  // namespace kt::cpu::matmul_detail

#endif
