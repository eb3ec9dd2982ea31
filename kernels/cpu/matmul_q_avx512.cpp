// matmul_q's AVX-512 kernels (F, BW, DQ, VL, VNNI; BMI2 and F16C). This file alone
// is compiled with those instruction sets (kernels/CMakeLists.txt) and is entered
// only after active_isa() >= Isa::Avx512.
//
// Shape of the quantized kernels: one weight row at a time against a tile of up to
// 8 activation rows. Each weight block is loaded and unpacked to 8-bit integers
// once (the shared part) and then meets every row of the tile (the per-row part),
// so a batch of 8 reads the weights once, like a batch of 1. Per row:
//  * 32-value types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): two blocks per zmm.
//    Weights become signed int8, activations are stored unsigned (q + 128), so one
//    vpdpbusd computes sum (q_a + 128) * w; the 128 * sum(w) it adds is removed by
//    starting the accumulator at -128 * sum(w), a per-weight-block value shared by
//    every row. The two blocks' int32 lanes are scaled by d_w * d_a in float.
//  * Q2_K .. Q6_K: unsigned weights times signed activations with vpdpbusd, sums
//    of 4 packed to int16, the sub-block scales applied by vpdpwssd
//    (super_block_row_packed). Minimums and offsets (Q2_K/Q4_K/Q5_K's dmin * m,
//    Q3_K's -4, Q6_K's -32) meet the activation sums per 16 values (bsumf) in one
//    float FMA.
//  * IQ4_XS: the code book's magnitudes times activations carrying the weights'
//    signs (vpmaddubsw), then vpdpwssd with the scales.
// Each row keeps one float accumulator (16 lanes), summed once at the end. The
// float types (F32, F16, BF16) are matmul_q_avx512_float.cpp's.
#include "kernels/cpu/matmul_q.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__BMI2__) && defined(__F16C__)

#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the "don't care"
// operand and then warn about it at every inlined use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/quant_blocks.h"

namespace kt::cpu::matmul_detail {
namespace {

constexpr int kTile = 8;  // activation rows per pass over a weight row

// Weights stream from DRAM. With several activation rows per block the loop is
// slow enough that the hardware prefetchers fall behind (Q4_K, batch 4: 6.4 ms
// without, 3.7 ms with, on a Zen 4); this asks for the lines 2 KiB ahead.
constexpr int kPrefetchDistance = 2048;
inline void prefetch_ahead(const uint8_t* p, int bytes) {
  for (int l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchDistance + l), _MM_HINT_T0);
}

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

// Runs Kernel::rows<NB> for each weight row in [o0, o1) over tiles of <= 8 rows.
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
      case 7: Kernel::template rows<7>(row, n, x, ab, yb, ys); break;
      case 6: Kernel::template rows<6>(row, n, x, ab, yb, ys); break;
      case 5: Kernel::template rows<5>(row, n, x, ab, yb, ys); break;
      case 4: Kernel::template rows<4>(row, n, x, ab, yb, ys); break;
      case 3: Kernel::template rows<3>(row, n, x, ab, yb, ys); break;
      case 2: Kernel::template rows<2>(row, n, x, ab, yb, ys); break;
      case 1: Kernel::template rows<1>(row, n, x, ab, yb, ys); break;
      default: break;
    }
  }
}

template <int NB>
inline void store_sums(const __m512 (&acc)[NB], float* y, int64_t ys) {
#pragma GCC unroll 8
  for (int r = 0; r < NB; ++r) y[r * ys] = _mm512_reduce_add_ps(acc[r]);
}

// ---- 32-value block types against Q8_0 activations --------------------------------

// Nibbles of two 16-byte runs: [A low, A high, B low, B high] = blocks A and B in
// value order (value j of a block in the low nibble of byte j, j + 16 in the high).
inline __m512i nibbles2(const uint8_t* qa, const uint8_t* qb) {
  const __m512i aa = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qa)));
  const __m256i bb = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qb)));
  const __m512i z = _mm512_inserti64x4(aa, bb, 1);
  const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(z, sh), _mm512_set1_epi8(0x0F));
}

// Bit j of a Q5 block's 32-bit qh is the fifth bit of value j.
inline __mmask64 qh_mask2(const uint8_t* ha, const uint8_t* hb) {
  return _cvtu64_mask64(uint64_t(load_u32(ha)) | uint64_t(load_u32(hb)) << 32);
}

struct Q4_0W {
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static __m512i weights(const uint8_t* a, const uint8_t* b) {
    return _mm512_sub_epi8(nibbles2(a + 2, b + 2), _mm512_set1_epi8(8));
  }
};
struct Q4_1W {
  static constexpr int kBytes = 20;
  static constexpr bool kMin = true;
  static constexpr int kMinOffset = 2;
  static __m512i weights(const uint8_t* a, const uint8_t* b) { return nibbles2(a + 4, b + 4); }
};
struct Q5_0W {
  static constexpr int kBytes = 22;
  static constexpr bool kMin = false;
  static __m512i weights(const uint8_t* a, const uint8_t* b) {
    const __m512i n = nibbles2(a + 6, b + 6);
    // q - 16 where the fifth bit is clear; q | 16 - 16 = q where it is set.
    return _mm512_mask_sub_epi8(n, _knot_mask64(qh_mask2(a + 2, b + 2)), n, _mm512_set1_epi8(16));
  }
};
struct Q5_1W {
  static constexpr int kBytes = 24;
  static constexpr bool kMin = true;
  static constexpr int kMinOffset = 2;
  static __m512i weights(const uint8_t* a, const uint8_t* b) {
    const __m512i n = nibbles2(a + 8, b + 8);
    return _mm512_mask_add_epi8(n, qh_mask2(a + 4, b + 4), n, _mm512_set1_epi8(16));
  }
};
struct Q8_0W {
  static constexpr int kBytes = 34;
  static constexpr bool kMin = false;
  static __m512i weights(const uint8_t* a, const uint8_t* b) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
  }
};
struct Iq4_nlW {
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static __m512i weights(const uint8_t* a, const uint8_t* b) {
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl)));
    return _mm512_shuffle_epi8(tbl, nibbles2(a + 2, b + 2));
  }
};

// [d_a x 8, d_b x 8]: one block's scale for each of its eight vpdpbusd lanes.
inline __m512 scales2(uint16_t ha, uint16_t hb) {
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(int(uint32_t(ha) | uint32_t(hb) << 16)));
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_zextps128_ps512(f));
}

template <class T>
struct Kernel32 {
  template <int NB>
  static void rows(const uint8_t* w, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const int64_t nb = n / 32;
    ActQ8_0View a[NB];
    __m512 acc[NB];
    float mins[NB];
#pragma GCC unroll 8
    for (int r = 0; r < NB; ++r) {
      a[r] = act_q8_0(x + size_t(r) * xs, n);
      acc[r] = _mm512_setzero_ps();
      mins[r] = 0.0f;
    }
    const __m512i zero = _mm512_setzero_si512();
    const __m512i c128 = _mm512_set1_epi8(char(0x80));
    // One step: blocks k and k + 1 (or block k alone when `single`, its second
    // half masked to zero).
    auto step = [&]<bool single>(int64_t k) {
      const uint8_t* ba = w + k * T::kBytes;
      const uint8_t* bb = single ? ba : ba + T::kBytes;
      prefetch_ahead(ba, 2 * T::kBytes);
      __m512i wq = T::weights(ba, bb);
      const __mmask64 lanes = single ? __mmask64(0xFFFFFFFFull) : ~__mmask64(0);
      const __mmask16 flanes = single ? __mmask16(0x00FF) : __mmask16(0xFFFF);
      if constexpr (single) wq = _mm512_maskz_mov_epi8(lanes, wq);
      const __m512 ws = scales2(load_u16(ba), single ? uint16_t(0) : load_u16(bb));
      const __m512i init = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, c128, wq));
      float ma = 0.0f, mb = 0.0f;
      if constexpr (T::kMin) {
        ma = load_fp16(ba + T::kMinOffset);
        mb = single ? 0.0f : load_fp16(bb + T::kMinOffset);
      }
#pragma GCC unroll 8
      for (int r = 0; r < NB; ++r) {
        __m512i aq;
        __m512 da;
        if constexpr (single) {  // masked loads: nothing past the row's end is touched
          aq = _mm512_maskz_loadu_epi8(lanes, a[r].qs + 32 * k);
          da = _mm512_maskz_loadu_ps(flanes, a[r].dexp + 8 * k);
        } else {
          aq = _mm512_loadu_si512(a[r].qs + 32 * k);
          da = _mm512_loadu_ps(a[r].dexp + 8 * k);
        }
        const __m512i dot = _mm512_dpbusd_epi32(init, aq, wq);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws, da), acc[r]);
        if constexpr (T::kMin) {
          // The *_1 types' x = d * q + m adds m * d_a * sum(q_a) per block.
          mins[r] += ma * a[r].dexp[8 * k] * float(a[r].qsum[k]);
          if constexpr (!single) mins[r] += mb * a[r].dexp[8 * k + 8] * float(a[r].qsum[k + 1]);
        }
      }
    };
    int64_t k = 0;
    for (; k + 2 <= nb; k += 2) step.template operator()<false>(k);
    if (k < nb) step.template operator()<true>(k);
#pragma GCC unroll 8
    for (int r = 0; r < NB; ++r) y[r * ys] = _mm512_reduce_add_ps(acc[r]) + mins[r];
  }
};

// ---- 256-value super-blocks against Q8_K activations ------------------------------

// vpmaddubsw's int16 lane l covers values 2l, 2l + 1 of its 64; these indices
// spread 16-bit scales so that lane l gets the scale of its sub-block.
inline __m512i spread_index(int first, int lanes_per_scale) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = int16_t(first + l / lanes_per_scale);
  return _mm512_load_si512(idx);
}

// Q4_K/Q5_K: the 12 bytes of 6-bit scales and mins unpacked (ggml's
// get_scale_min_k4, four at a time): bytes 0-7 scales, 8-15 mins.
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

// Per row, the k-quant step shared by Q4_K, Q5_K, Q6_K and IQ4_XS: four 64-value
// products (weights wq[i], activations at aq + 64 i, int16 scales sc[i]) summed
// into int32 lanes, then acc += d_w * d_a * that. With `neg`, the weights are
// magnitudes and the activations take their signs (IQ4_XS).
template <bool kSigned>
inline __m512 super_block_row(const __m512i (&wq)[4], const __m512i (&sc)[4], const __mmask64 (&neg)[4],
                              const int8_t* aq, float da, __m512 dv, __m512 acc) {
  __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    __m512i av = _mm512_loadu_si512(aq + 64 * i);
    if constexpr (kSigned) av = _mm512_mask_sub_epi8(av, neg[i], _mm512_setzero_si512(), av);
    const __m512i p = _mm512_maddubs_epi16(wq[i], av);
    s = i == 0 ? _mm512_madd_epi16(p, sc[i]) : _mm512_dpwssd_epi32(s, p, sc[i]);
  }
  return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(da)), dv, acc);
}

// Q2_K .. Q6_K: unsigned weights of at most 63, so vpdpbusd's sums of 4
// products (|v| <= 4 * 63 * 127 = 32004) fit int16: two zmm of int32 pack
// (vpackssdw, a shuffle, no saturation) into one of int16 and a single vpdpwssd
// applies the scales to both. Per row 4 vpdpbusd + 2 vpdpwssd (6 multiplies)
// instead of 4 vpmaddubsw + 4 vpmaddwd/vpdpwssd (8): on Intel the multiplies all
// go to port 0, the packs to port 5 (on a Zen 4, batch 8 from cache: 5.0 -> 5.6
// GB/s for Q4_K, 7.7 -> 8.0 for Q6_K). sc[0] and sc[1] hold the scales in
// vpackssdw's order (pack_index).
inline __m512 super_block_row_packed(const __m512i (&wq)[4], const __m512i (&sc)[4], const int8_t* aq, float da,
                                     __m512 dv, __m512 acc) {
  const __m512i z = _mm512_setzero_si512();
  __m512i v[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) v[i] = _mm512_dpbusd_epi32(z, wq[i], _mm512_loadu_si512(aq + 64 * i));
  __m512i s = _mm512_madd_epi16(_mm512_packs_epi32(v[0], v[1]), sc[0]);
  s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(v[2], v[3]), sc[1]);
  return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(da)), dv, acc);
}

// vpackssdw(a, b) puts, in 128-bit lane L, a's int32 lanes 4L..4L+3 then b's:
// int16 position p of the pair comes from lane 4L + p % 4 of a (p % 8 < 4) or b.
// sub(which, int32_lane) names the scale of that lane's values.
template <class F>
inline __m512i pack_index(F sub) {
  alignas(64) int16_t idx[32];
  for (int p = 0; p < 32; ++p) idx[p] = int16_t(sub(p % 8 < 4 ? 0 : 1, 4 * (p / 8) + p % 4));
  return _mm512_load_si512(idx);
}

template <class T>
struct KernelK {
  template <int NB>
  static void rows(const uint8_t* w, int64_t n, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const int64_t nb = n / 256;
    ActQ8_KView a[NB];
    __m512 acc[NB];
#pragma GCC unroll 8
    for (int r = 0; r < NB; ++r) {
      a[r] = act_q8_k(x + size_t(r) * xs, n);
      acc[r] = _mm512_setzero_ps();
    }
    const T t;
    for (int64_t k = 0; k < nb; ++k) {
      __m512i wq[4], sc[4];
      __mmask64 neg[4] = {0, 0, 0, 0};
      __m512 dv, mv;
      const uint8_t* blk = w + k * T::kBytes;
      prefetch_ahead(blk, T::kBytes);
      t.unpack(blk, wq, sc, neg, &dv, &mv);
#pragma GCC unroll 8
      for (int r = 0; r < NB; ++r) {
        if constexpr (T::kPacked) {
          acc[r] = super_block_row_packed(wq, sc, a[r].qs + 256 * k, a[r].d[k], dv, acc[r]);
        } else {
          acc[r] = super_block_row<T::kSigned>(wq, sc, neg, a[r].qs + 256 * k, a[r].d[k], dv, acc[r]);
        }
        if constexpr (T::kBsums) acc[r] = _mm512_fmadd_ps(mv, _mm512_loadu_ps(a[r].bsumf + 16 * k), acc[r]);
      }
    }
    store_sums<NB>(acc, y, ys);
  }
};

// Q4_K and Q5_K: x = d * sc * q - dmin * m over 8 sub-blocks of 32. A 32-byte run
// of qs holds two sub-blocks (low nibbles, then high): broadcast to both halves
// of a zmm and shifted by 0 and 4 per half, it is 64 values in order.
template <bool kQ5>
struct KernelQ45K {
  static constexpr int kBytes = kQ5 ? 176 : 144;
  static constexpr bool kSigned = false;
  static constexpr bool kBsums = true;
  static constexpr bool kPacked = true;
  // zmm i holds sub-blocks 2i (int32 lanes 0-7) and 2i + 1 (8-15).
  __m512i idx[4] = {
      kPacked ? pack_index([](int which, int l) { return 2 * which + l / 8; }) : spread_index(0, 16),
      kPacked ? pack_index([](int which, int l) { return 4 + 2 * which + l / 8; }) : spread_index(2, 16),
      spread_index(4, 16), spread_index(6, 16)};
  __m512i nib_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  __m512i min_dup = _mm512_zextsi128_si512(_mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
  // Q5_K: where bit s of qh[l] (the fifth bit of value 32 s + l) lands at bit 4.
  __m512i qh_sl[2] = {_mm512_set_epi64(3, 3, 3, 3, 4, 4, 4, 4), _mm512_set_epi64(1, 1, 1, 1, 2, 2, 2, 2)};
  __m512i qh_sr[2] = {_mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0), _mm512_set_epi64(3, 3, 3, 3, 2, 2, 2, 2)};

  void unpack(const uint8_t* b, __m512i (&wq)[4], __m512i (&sc)[4], __mmask64 (&)[4], __m512* dv,
              __m512* mv) const {
    const __m128i scm = scales_mins_k4(b + 4);
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(scm));
#pragma GCC unroll 4
    for (int p = 0; p < (kPacked ? 2 : 4); ++p) sc[p] = _mm512_permutexvar_epi16(idx[p], sc16);
    *dv = _mm512_set1_ps(load_fp16(b));
    // Lane t of the sums of 16 activations meets -dmin * m[t / 2].
    const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_shuffle_epi8(scm, _mm512_castsi512_si128(min_dup))));
    *mv = _mm512_mul_ps(m, _mm512_set1_ps(-load_fp16(b + 2)));
    const uint8_t* qs = b + (kQ5 ? 48 : 16);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i qh;
    if constexpr (kQ5) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p)));
      wq[p] = _mm512_and_si512(_mm512_srlv_epi64(q, nib_shift), m4);
      if constexpr (kQ5) {
        const __m512i h = p < 2 ? _mm512_sllv_epi64(qh, qh_sl[p]) : _mm512_srlv_epi64(qh, qh_sr[p - 2]);
        wq[p] = _mm512_ternarylogic_epi64(wq[p], h, _mm512_set1_epi8(0x10), 0xF8);  // a | (b & c)
      }
    }
  }
};

// Q6_K: x = d * sc * (q - 32) over 16 sub-blocks of 16; q = 4 bits of ql and 2 of
// qh. One 64-byte run of ql gives 128 values (low nibbles: values 0-63 of the
// half, high nibbles: 64-127), qh's 32 bytes their high bits.
struct KernelQ6K {
  static constexpr int kBytes = 210;
  static constexpr bool kSigned = false;
  static constexpr bool kBsums = true;
  static constexpr bool kPacked = true;
  // zmm i holds sub-blocks 4i + l / 4 (int32 lane l).
  __m512i idx[4] = {
      kPacked ? pack_index([](int which, int l) { return 4 * which + l / 4; }) : spread_index(0, 8),
      kPacked ? pack_index([](int which, int l) { return 8 + 4 * which + l / 4; }) : spread_index(4, 8),
      spread_index(8, 8), spread_index(12, 8)};

  void unpack(const uint8_t* b, __m512i (&wq)[4], __m512i (&sc)[4], __mmask64 (&)[4], __m512* dv,
              __m512* mv) const {
    const float d = load_fp16(b + 208);
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(s8));
#pragma GCC unroll 4
    for (int i = 0; i < (kPacked ? 2 : 4); ++i) sc[i] = _mm512_permutexvar_epi16(idx[i], sc16);
    *dv = _mm512_set1_ps(d);
    // The -32 offset: -32 * d * sc[t] against the sums of 16 activations.
    *mv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_set1_ps(-32.0f * d));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      // [qh, qh >> 2]: quarter k's two high bits at bits 2k (k = 0, 1) and 2k + 4 (k = 2, 3).
      const __m512i hx = _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      wq[2 * h] = _mm512_ternarylogic_epi64(_mm512_and_si512(ql, m4), _mm512_slli_epi16(hx, 4), m30, 0xF8);
      wq[2 * h + 1] = _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hx, m30, 0xF8);
    }
  }
};

// Q2_K and Q3_K: 16 sub-blocks of 16 like Q6_K (same scale spreading), 2-bit
// values in qs: byte l of half h holds quarter k's value l in bits 2k, 2k + 1.
// Broadcast to both halves of a zmm and shifted by 2k per half, 32 bytes give 64
// values in order.
inline __m512i q2_quarters(__m256i q, int first) {
  const __m512i sh = _mm512_set_epi64(2 * first + 2, 2 * first + 2, 2 * first + 2, 2 * first + 2, 2 * first,
                                      2 * first, 2 * first, 2 * first);
  return _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i64x4(q), sh), _mm512_set1_epi8(3));
}

// Q2_K: x = d * (scales[t] & 15) * q - dmin * (scales[t] >> 4), q in 0..3.
struct KernelQ2K {
  static constexpr int kBytes = 84;
  static constexpr bool kSigned = false;
  static constexpr bool kBsums = true;
  static constexpr bool kPacked = true;
  __m512i idx[2] = {pack_index([](int which, int l) { return 4 * which + l / 4; }),
                    pack_index([](int which, int l) { return 8 + 4 * which + l / 4; })};

  void unpack(const uint8_t* b, __m512i (&wq)[4], __m512i (&sc)[4], __mmask64 (&)[4], __m512* dv,
              __m512* mv) const {
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))));
    sc[0] = _mm512_permutexvar_epi16(idx[0], sc16);
    sc[1] = _mm512_permutexvar_epi16(idx[1], sc16);
    *dv = _mm512_set1_ps(load_fp16(b + 80));
    // -dmin * m[t] against the sums of 16 activations.
    const __m512i m = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
    *mv = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(-load_fp16(b + 82)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * h));
      wq[2 * h] = q2_quarters(q, 0);
      wq[2 * h + 1] = q2_quarters(q, 2);
    }
  }
};

// Q3_K: x = d * (sc[t] - 32) * (q2 - 4 * !hbit), with the third bit of value
// 32 j + l (j = 4 h + k) at bit j of hmask[l]. The weights are taken unsigned,
// q2 + 4 * hbit in 0..7, and the -4 goes with the activation sums like Q6_K's -32.
struct KernelQ3K {
  static constexpr int kBytes = 110;
  static constexpr bool kSigned = false;
  static constexpr bool kBsums = true;
  static constexpr bool kPacked = true;
  __m512i idx[2] = {pack_index([](int which, int l) { return 4 * which + l / 4; }),
                    pack_index([](int which, int l) { return 8 + 4 * which + l / 4; })};
  // Bits 4h + k and 4h + k + 1 of hmask to bit 2, for the zmm of quarters k, k + 1.
  __m512i left01 = _mm512_set_epi64(1, 1, 1, 1, 2, 2, 2, 2);
  __m512i right[3] = {_mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0), _mm512_set_epi64(3, 3, 3, 3, 2, 2, 2, 2),
                      _mm512_set_epi64(5, 5, 5, 5, 4, 4, 4, 4)};

  void unpack(const uint8_t* b, __m512i (&wq)[4], __m512i (&sc)[4], __mmask64 (&)[4], __m512* dv,
              __m512* mv) const {
    // ggml's unpacking of the 16 six-bit scales (q3_scale in quant_ref_kquants.cpp,
    // four at a time): low 4 bits from bytes 0-7, high 2 bits from bytes 8-11.
    uint32_t aux[4];
    std::memcpy(aux, b + 96, 12);
    constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    const __m128i s8 = _mm_sub_epi8(_mm_setr_epi32(int(aux[0]), int(aux[1]), int(aux[2]), int(aux[3])),
                                    _mm_set1_epi8(32));
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(s8));
    sc[0] = _mm512_permutexvar_epi16(idx[0], sc16);
    sc[1] = _mm512_permutexvar_epi16(idx[1], sc16);
    const float d = load_fp16(b + 108);
    *dv = _mm512_set1_ps(d);
    *mv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_set1_ps(-4.0f * d));
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
    const __m512i bit2 = _mm512_set1_epi8(0x04);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 + 32 * h));
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int z = 2 * h + half;  // quarters 2 half, 2 half + 1 of half h: hmask bits 2z, 2z + 1
        const __m512i hb = z == 0 ? _mm512_sllv_epi64(hm, left01) : _mm512_srlv_epi64(hm, right[z - 1]);
        wq[z] = _mm512_ternarylogic_epi64(q2_quarters(q, 2 * half), hb, bit2, 0xF8);  // a | (b & c)
      }
    }
  }
};

// IQ4_XS: x = d * (ls - 32) * kValuesIq4nl[q] over 8 sub-blocks of 32; 16 bytes
// per sub-block (values i, 16 + i in byte i). The activations are stored in the
// matching order (iq4xs_act_pos).
struct KernelIq4Xs {
  static constexpr int kBytes = 136;
  static constexpr bool kSigned = true;
  static constexpr bool kBsums = false;
  static constexpr bool kPacked = false;  // |w| up to 127: sums of 4 overflow int16
  __m512i idx[2] = {spread_index(0, 8), spread_index(4, 8)};
  __m512i mag = _mm512_broadcast_i32x4(_mm_setr_epi8(127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113));

  void unpack(const uint8_t* b, __m512i (&wq)[4], __m512i (&sc)[4], __mmask64 (&neg)[4], __m512* dv,
              __m512*) const {
    *dv = _mm512_set1_ps(load_fp16(b));
    const uint64_t lo = _pdep_u64(load_u32(b + 4), 0x0F0F0F0F0F0F0F0Full);
    const uint64_t hi = _pdep_u64(load_u16(b + 2), 0x0303030303030303ull);
    const __m128i ls = _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(lo | hi << 4))), _mm_set1_epi16(32));
    const __m512i ls512 = _mm512_zextsi128_si512(ls);
    sc[0] = sc[1] = _mm512_permutexvar_epi16(idx[0], ls512);
    sc[2] = sc[3] = _mm512_permutexvar_epi16(idx[1], ls512);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i c8 = _mm512_set1_epi8(8);
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      const __m512i q = _mm512_loadu_si512(b + 8 + 64 * j);
      const __m512i nlo = _mm512_and_si512(q, m4);
      const __m512i nhi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      // Code book entries 0-7 are negative, 8-15 positive.
      neg[2 * j] = _mm512_testn_epi8_mask(nlo, c8);
      neg[2 * j + 1] = _mm512_testn_epi8_mask(nhi, c8);
      wq[2 * j] = _mm512_shuffle_epi8(mag, nlo);
      wq[2 * j + 1] = _mm512_shuffle_epi8(mag, nhi);
    }
  }
};

}  // namespace

bool matmul_q_avx512_covers(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::Q2_K: case GgmlType::Q3_K:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool matmul_q_avx512(GgmlType t, const uint8_t* w, uint64_t wr, int64_t n, const uint8_t* xq, size_t ab,
                     int64_t nbt, float* y, int64_t ys, int64_t o0, int64_t o1) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
      return matmul_float_avx512(t, w, wr, n, xq, ab, nbt, y, ys, o0, o1);
    case GgmlType::Q4_0: drive<Kernel32<Q4_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q4_1: drive<Kernel32<Q4_1W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_0: drive<Kernel32<Q5_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_1: drive<Kernel32<Q5_1W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q8_0: drive<Kernel32<Q8_0W>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::IQ4_NL: drive<Kernel32<Iq4_nlW>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q2_K: drive<KernelK<KernelQ2K>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q3_K: drive<KernelK<KernelQ3K>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q4_K: drive<KernelK<KernelQ45K<false>>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q5_K: drive<KernelK<KernelQ45K<true>>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::Q6_K: drive<KernelK<KernelQ6K>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    case GgmlType::IQ4_XS: drive<KernelK<KernelIq4Xs>>(w, wr, n, xq, ab, nbt, y, ys, o0, o1); return true;
    default: return false;
  }
}

}  // namespace kt::cpu::matmul_detail

#else  // not built with AVX-512: the dispatcher never gets here (no cpuid check passes to it)

namespace kt::cpu::matmul_detail {
bool matmul_q_avx512_covers(GgmlType) { return false; }
bool matmul_q_avx512(GgmlType, const uint8_t*, uint64_t, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t,
                     int64_t, int64_t) {
  return false;
}
}  // namespace kt::cpu::matmul_detail

#endif
