// matmul_bf16 (matmul_bf16.h): GGUF weights decoded per call into a BF16 panel
// of 32 rows, multiplied by AMX-BF16 tiles (or their AVX-512 emulation) that
// accumulate in float over the whole row.
//
// Shapes. One tile product (tdpbf16ps) is
//   C[16 weight rows][16 tokens] += A[16 rows][32 values] . B[16 pairs][16 tokens x 2]
// A is the panel as decoded (row-major: weights need no interleaving), B the
// activations in pairs of values per token, packed once per call. Four C tiles
// hold 32 rows x 32 tokens; they are read back once, after the last value.
//
// Decoding is the cost that scales with the weights, so the types the MoE
// recipes use get their own decoders straight to BF16: Q4_K and Q5_0 through a
// table of the 16 or 32 values a sub-block's codes stand for (computed as the
// reference decoder computes each value, then rounded once, and looked up with
// vpermw), Q8_0 by conversion; every other type through vec::dequant (floats,
// bit for bit the reference's) and a rounding pass. The rounding is to nearest
// even: in integer arithmetic, the same bits as float_ref's f32_to_bf16 for
// finite values on any AVX-512 CPU, or vcvtne2ps2bf16 where the CPU has
// AVX512-BF16 (every CPU with AMX does).
//
// Compiled with -ffp-contract=off: a table value is d * q - m as two roundings,
// like the reference decoder; a fused multiply-subtract would differ in the last
// bit and so, sometimes, in the BF16 rounding.
#include <immintrin.h>

// GCC 12 warns that the intrinsics' unused pass-through operands
// (_mm512_undefined_*) "may be used uninitialized" when inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/vec_f32.h"

namespace kt::cpu {
namespace {

using matmul_detail::amx_thread_buffer;
using matmul_detail::TileConfig;

constexpr int64_t kTok = 16;  // tokens per tile
constexpr int kRows = 32;     // weight rows per panel (two A tiles)

int64_t pad32(int64_t n) { return (n + 31) / 32 * 32; }
// Panel rows are 64 bytes longer than the values: rows a multiple of 4 KB apart
// would fall in one L1 set and evict each other under a 16-row tile load.
int64_t panel_stride(int64_t n) { return pad32(n) + 32; }  // in BF16 values

float f16(uint16_t h) { return _cvtsh_ss(h); }
uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ---- rounding to BF16 ------------------------------------------------------------
// Lanes keep the BF16 in their upper half: u + 0x7FFF + (bit 16 of u), nearest even.
[[gnu::always_inline]] inline __m512i rne_hi(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
}
alignas(64) constexpr uint16_t kUpperHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                                   33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
// 32 BF16 values in order: a's 16, then b's. kNe: with AVX512-BF16's
// vcvtne2ps2bf16 (the same bits for every finite value above the denormals,
// which it flushes, as the tiles' products do), else in integer arithmetic.
template <bool kNe>
[[gnu::always_inline]] inline __m512i bf16x32(__m512 a, __m512 b) {
  if constexpr (kNe) return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
  return _mm512_permutex2var_epi16(rne_hi(a), _mm512_load_si512(kUpperHalves), rne_hi(b));
}
// The floats p[0, min(32, left)) (zeros past them) as 32 BF16 values.
template <bool kNe>
[[gnu::always_inline]] inline __m512i bf16x32_from(const float* p, int64_t left) {
  const __mmask16 m0 = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  const __mmask16 m1 = left >= 32 ? __mmask16(0xFFFF) : left > 16 ? __mmask16((1u << (left - 16)) - 1) : 0;
  return bf16x32<kNe>(_mm512_maskz_loadu_ps(m0, p), _mm512_maskz_loadu_ps(m1, p + 16));
}
void store32(uint16_t* p, __m512i v) { _mm512_storeu_si512(p, v); }

// ---- decoding one row into the panel -----------------------------------------------
alignas(64) constexpr float kIota[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                         16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

// Q4_K: value v of sub-block s is dl * q - ml (dl = d * sc, ml = dmin * m), q the
// nibble; sub-blocks 2i and 2i+1 share 32 bytes (low, high nibbles).
template <bool kNe>
void decode_q4_k(const uint8_t* row, int64_t n, uint16_t* out) {
  const __m512 iota = _mm512_load_ps(kIota);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  alignas(32) float dl[8], ml[8];
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ4_K);
    const float d = f16(u16_at(blk + offsetof(BlockQ4_K, d))), dmin = f16(u16_at(blk + offsetof(BlockQ4_K, dmin)));
    // ggml's get_scale_min_k4 for all 8 sub-blocks at once, 4 bytes per word;
    // dl = d * sc and ml = dmin * m in float, as the reference decoder rounds them.
    uint32_t w[3];
    std::memcpy(w, blk + offsetof(BlockQ4_K, scales), 12);
    const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
    const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
    auto floats = [](uint32_t lo, uint32_t hi) {
      return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(hi), int(lo))));
    };
    _mm256_store_ps(dl, _mm256_mul_ps(floats(sc_lo, sc_hi), _mm256_set1_ps(d)));
    _mm256_store_ps(ml, _mm256_mul_ps(floats(m_lo, m_hi), _mm256_set1_ps(dmin)));
    const uint8_t* qs = blk + offsetof(BlockQ4_K, qs);
    for (int i = 0; i < 4; ++i) {
      const __m512 t0 = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dl[2 * i]), iota), _mm512_set1_ps(ml[2 * i]));
      const __m512 t1 =
          _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dl[2 * i + 1]), iota), _mm512_set1_ps(ml[2 * i + 1]));
      const __m512i table = bf16x32<kNe>(t0, t1);  // words 0-15: sub-block 2i's values, 16-31: 2i+1's
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * i));
      const __m512i lo = _mm512_cvtepu8_epi16(_mm256_and_si256(v, low4));
      const __m512i hi = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4)),
                                         _mm512_set1_epi16(16));
      store32(out + 256 * b + 64 * i, _mm512_permutexvar_epi16(lo, table));
      store32(out + 256 * b + 64 * i + 32, _mm512_permutexvar_epi16(hi, table));
    }
  }
}

// Q5_0: value j is (q - 16) * d, q 5 bits: a table of 32.
template <bool kNe>
void decode_q5_0(const uint8_t* row, int64_t n, uint16_t* out) {
  const __m512 lo16 = _mm512_sub_ps(_mm512_load_ps(kIota), _mm512_set1_ps(16.0f));
  const __m512 hi16 = _mm512_sub_ps(_mm512_load_ps(kIota + 16), _mm512_set1_ps(16.0f));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i spread_idx = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ5_0);
    const __m512 d = _mm512_set1_ps(f16(u16_at(blk + offsetof(BlockQ5_0, d))));
    // float(q - 16) * d, as the reference (exact small integers, one rounding).
    const __m512i table = bf16x32<kNe>(_mm512_mul_ps(lo16, d), _mm512_mul_ps(hi16, d));
    uint32_t qh;
    std::memcpy(&qh, blk + offsetof(BlockQ5_0, qh), 4);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + offsetof(BlockQ5_0, qs)));
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
    // byte j of the 32 gets bit j of qh: spread qh's bytes 8 to a lane, test each bit.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)), spread_idx);
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
    store32(out + 32 * b, _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm256_or_si256(nib, high)), table));
  }
}

// Q8_0: value j is q * d.
template <bool kNe>
void decode_q8_0(const uint8_t* row, int64_t n, uint16_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    const __m512 d = _mm512_set1_ps(f16(u16_at(blk + offsetof(BlockQ8_0, d))));
    const uint8_t* qs = blk + offsetof(BlockQ8_0, qs);
    auto part = [&](int h) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h));
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
    };
    store32(out + 32 * b, bf16x32<kNe>(part(0), part(1)));
  }
}

// Any type: floats from vec::dequant (the reference decoders' bits), then rounded.
template <bool kNe>
void decode_floats(GgmlType t, const uint8_t* row, int64_t n, uint16_t* out) {
  const TypeTraits& tt = type_traits(t);
  alignas(64) float tmp[256];
  const int64_t step = std::max<int64_t>(tt.block_size, 256) / tt.block_size * tt.block_size;
  for (int64_t k0 = 0; k0 < n; k0 += step) {
    const int64_t len = std::min(step, n - k0);
    kern::vec::dequant(t, row + (k0 / tt.block_size) * tt.type_size, tmp, len);
    // Whole groups of 32 (k0 is a multiple of 256): the last one's zeros pad the row.
    for (int64_t k = 0; k < len; k += 32) store32(out + k0 + k, bf16x32_from<kNe>(tmp + k, len - k));
  }
}

// Row of n values into out[0, pad32(n)) (zeros past n).
template <bool kNe>
void decode_row(GgmlType t, const uint8_t* row, int64_t n, uint16_t* out) {
  if (t == GgmlType::Q4_K) decode_q4_k<kNe>(row, n, out);
  else if (t == GgmlType::Q5_0) decode_q5_0<kNe>(row, n, out);
  else if (t == GgmlType::Q8_0) decode_q8_0<kNe>(row, n, out);
  else decode_floats<kNe>(t, row, n, out);  // the table decoders' types come in whole groups of 32
}

// ---- the tiles ----------------------------------------------------------------------
// C tile 2 * rt + tt multiplies A tile rt (panel rows 16 rt..) by B tile tt.
// Tiles: 0-3 C, 4-5 A, 6-7 B; all 16 rows of 64 bytes.

struct AmxHw {
  static void configure() {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
    _tile_loadconfig(&c);
  }
  static void release() { _tile_release(); }
  // c[2 * rt + tt][16 rows][16 tokens] = panel rows 16 rt.. . B tile tt, over k values.
  template <int RT, int TT>
  static void block(const uint16_t* panel, int64_t pstride, const uint8_t* b0, const uint8_t* b1, int64_t k,
                    float* c) {
    const int64_t ps = pstride * 2;
    _tile_zero(0);
    if constexpr (TT == 2) _tile_zero(1);
    if constexpr (RT == 2) _tile_zero(2);
    if constexpr (RT == 2 && TT == 2) _tile_zero(3);
    for (int64_t i = 0; i < k; i += 32) {
      _tile_loadd(4, panel + i, ps);
      _tile_loadd(6, b0 + i * 32, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (TT == 2) {
        _tile_loadd(7, b1 + i * 32, 64);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (RT == 2) {
        _tile_loadd(5, panel + 16 * pstride + i, ps);
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (TT == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
    _tile_stored(0, c, 64);
    if constexpr (TT == 2) _tile_stored(1, c + 256, 64);
    if constexpr (RT == 2) _tile_stored(2, c + 512, 64);
    if constexpr (RT == 2 && TT == 2) _tile_stored(3, c + 768, 64);
  }
};

// The same products with AVX-512 FMAs (a product of two BF16 is exact in float):
// tokens in lanes, one accumulator per weight row.
struct AmxEmu {
  static void configure() {}
  static void release() {}
  template <int RT, int TT>
  static void block(const uint16_t* panel, int64_t pstride, const uint8_t* b0, const uint8_t* b1, int64_t k,
                    float* c) {
    const __m512i upper = _mm512_set1_epi32(int(0xFFFF0000u));
    for (int rt = 0; rt < RT; ++rt)
      for (int tt = 0; tt < TT; ++tt) {
        const uint8_t* b = tt == 0 ? b0 : b1;
        const uint16_t* a = panel + 16 * rt * pstride;
        __m512 acc[16];
        for (__m512& v : acc) v = _mm512_setzero_ps();
        for (int64_t p = 0; p < k / 2; ++p) {
          const __m512i bv = _mm512_loadu_si512(b + p * 64);
          const __m512 be = _mm512_castsi512_ps(_mm512_slli_epi32(bv, 16));
          const __m512 bo = _mm512_castsi512_ps(_mm512_and_si512(bv, upper));
          for (int r = 0; r < 16; ++r) {
            uint32_t pair;
            std::memcpy(&pair, a + r * pstride + 2 * p, 4);
            const uint32_t even = pair << 16, odd = pair & 0xFFFF0000u;
            float fe, fo;
            std::memcpy(&fe, &even, 4);
            std::memcpy(&fo, &odd, 4);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(fe), be, acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(fo), bo, acc[r]);
          }
        }
        for (int r = 0; r < 16; ++r) _mm512_store_ps(c + (2 * rt + tt) * 256 + 16 * r, acc[r]);
      }
  }
};

template <class T, bool kNe>
void run(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n, const uint8_t* acts, int64_t n_batch,
         float* y, int64_t y_stride, int64_t o_begin, int64_t o_end) {
  const int64_t kp = pad32(n), ps = panel_stride(n), tile_bytes = kp * 32;
  const int64_t n_tiles = (n_batch + kTok - 1) / kTok;
  const size_t panel_bytes = (size_t(kRows * ps) * 2 + 63) / 64 * 64;
  auto* base = static_cast<uint8_t*>(amx_thread_buffer(panel_bytes + 4 * 256 * sizeof(float)));
  auto* panel = reinterpret_cast<uint16_t*>(base);
  auto* c = reinterpret_cast<float*>(base + panel_bytes);
  T::configure();
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int rows = int(std::min<int64_t>(kRows, o_end - o));
    const int rt = rows > 16 ? 2 : 1;
    for (int r = 0; r < rows; ++r) decode_row<kNe>(t, w + uint64_t(o + r) * w_row_bytes, n, panel + r * ps);
    for (int r = rows; r < 16 * rt; ++r) std::fill(panel + r * ps, panel + r * ps + kp, uint16_t(0));
    for (int64_t tt = 0; tt < n_tiles; tt += 2) {
      const uint8_t* b0 = acts + tt * tile_bytes;
      const bool two = tt + 1 < n_tiles;
      const uint8_t* b1 = two ? b0 + tile_bytes : nullptr;
      if (rt == 2 && two) T::template block<2, 2>(panel, ps, b0, b1, kp, c);
      else if (rt == 2) T::template block<2, 1>(panel, ps, b0, b1, kp, c);
      else if (two) T::template block<1, 2>(panel, ps, b0, b1, kp, c);
      else T::template block<1, 1>(panel, ps, b0, b1, kp, c);
      for (int h = 0; h < (two ? 2 : 1); ++h) {
        const int64_t t0 = (tt + h) * kTok, nt = std::min<int64_t>(kTok, n_batch - t0);
        for (int r = 0; r < rows; ++r) {
          const float* cr = c + (2 * (r / 16) + h) * 256 + 16 * (r % 16);
          for (int64_t j = 0; j < nt; ++j) y[(t0 + j) * y_stride + o + r] = cr[j];
        }
      }
    }
  }
  T::release();
}

}  // namespace

namespace matmul_detail {

// Tile of 16 tokens: the pair (2p, 2p+1) of token j at 32-bit word p * 16 + j.
// 32 values of a token rounded at once are 16 such pairs in order, scattered
// 64 bytes apart.
void bf16_pack(const float* x, int64_t x_stride, int64_t n, int64_t n_batch, void* dst) {
  const int64_t kp = pad32(n), tile_bytes = kp * 32;
  auto* out = static_cast<uint8_t*>(dst);
  const __m512i apart = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(64));
  for (int64_t t0 = 0; t0 < n_batch; t0 += kTok) {
    uint8_t* tile = out + (t0 / kTok) * tile_bytes;
    const int64_t nt = std::min<int64_t>(kTok, n_batch - t0);
    if (nt < kTok || kp != n) std::memset(tile, 0, size_t(tile_bytes));
    for (int64_t j = 0; j < nt; ++j) {
      const float* row = x + (t0 + j) * x_stride;
      for (int64_t k = 0; k < n; k += 32) {
        const int64_t left = n - k;
        const __m512i v = bf16x32_from<false>(row + k, left);
        const __mmask16 pairs = left >= 32 ? __mmask16(0xFFFF) : __mmask16((1u << ((left + 1) / 2)) - 1);
        _mm512_mask_i32scatter_epi32(tile + k * 32 + 4 * j, pairs, apart, v, 1);
      }
    }
  }
}

void bf16_run(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* acts, int64_t n_batch,
              float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool tiles, bool ne) {
  if (tiles) run<AmxHw, true>(t, w, w_row_bytes, n_in, acts, n_batch, y, y_stride, o_begin, o_end);
  else if (ne) run<AmxEmu, true>(t, w, w_row_bytes, n_in, acts, n_batch, y, y_stride, o_begin, o_end);
  else run<AmxEmu, false>(t, w, w_row_bytes, n_in, acts, n_batch, y, y_stride, o_begin, o_end);
}

}  // namespace matmul_detail
}  // namespace kt::cpu
