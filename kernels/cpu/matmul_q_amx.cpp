// matmul_q with AMX-INT8 tiles, for many activation rows at once (prefill, the
// MoE operator's experts with 16 or more tokens): Q4_K, Q5_K and Q6_K weights
// against Q8_K activations, and Q8_0, Q5_0, Q4_0, IQ4_NL (the 32-value blocks
// llama.cpp's recipes fall back to where a row is no multiple of 256, such as
// DeepSeek-V2-Lite's 1408-wide expert down matrices) against Q8_0 activations,
// computing what the scalar and AVX-512 kernels do (the same integer block
// sums, scaled and added in float).
//
// Why this shape. A k-quant weight is d * sc * q (- dmin * m, or - 32 d sc for
// Q6_K) with a scale per sub-block of 32 (Q4_K, Q5_K) or 16 (Q6_K) values, and
// a 32-value type's is d * q per block, so an integer sum may run over one
// sub-block only. One tile product (tdpbssd) is
//   C[16 weight rows][16 tokens] = A[16 rows][SUB bytes] . B[SUB/4][16 tokens x 4]:
// A holds the weights' q as signed bytes, unpacked per chunk of 256 values
// into a small panel (no repacked copy of the model is kept); B the tokens'
// int8 activations in the tiles' 4-byte-interleaved layout, packed once per
// call. After each sub-block the int32 tile is stored, converted and scaled
// into 16 float vectors (one per weight row, lanes are tokens):
//   s[r] += C[r] * d sc[r] - bsum * mn[r]
// and after each super-block the token scales apply: acc[r] += s[r] * d_act (the
// 32-value types have a token scale per block instead: s[r] += C[r] d_act d[r]).
// Sub-block j's product runs in C tile j % 4 while sub-block j - 2 is scaled.
//
// What bounds it (measured on the device machine's Xeon, see README): the
// store, conversion and scaling of a C tile per 32 values, and the tile loads
// (two per product), not the products themselves. Folding the sub-block
// scales into the weights (int8 q * sc does not fit) or keeping the C tiles
// over a whole super-block would need a repacked copy of the weights. Folding
// them per call was tried (2026-11-27): w = sc * q split into two bytes (64 hi
// + lo) and a byte plane of mins, three products per 64 values, C read once
// per super-block. It was slower on the device's Xeon (Q4_K 1408 x 2048, one
// core: 196 vs 362 GFLOP/s at 48 tokens, 261 vs 398 at 256): unpacking three
// byte planes per weight per call cost more than the reads of C it saved.
//
// The tile operations go through a backend: AmxHw (the instructions) or AmxEmu
// (plain C++ with the instructions' semantics), so the layouts and the
// arithmetic are tested on CPUs without AMX too (matmul_q_test's
// MatmulQAmxEmulated).
#include <immintrin.h>

// GCC 12 warns that _mm512_cvtepi32_ps's unused pass-through operand
// (_mm512_undefined_ps) "may be used uninitialized" when inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/quant_blocks.h"

namespace kt::cpu::matmul_detail {
namespace {

constexpr int kTok = 16;  // tokens per tile (C's columns, B's 4-byte groups)

float f16(uint16_t h) { return _cvtsh_ss(h); }  // exact, subnormals included

// ---- tile configuration and the two backends -----------------------------------
// Tiles: 0..3 C (16 x 16 int32, four so that a sub-block's product runs while
// an earlier one is scaled); 4, 5 A (16 weight rows x SUB bytes); 6, 7 B
// (SUB / 4 rows x 64 bytes). C tile c multiplies A 4 + c % 2 by B 6 + c % 2.
TileConfig tile_config(int sub) {
  TileConfig c;
  for (int t : {0, 1, 2, 3}) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t : {4, 5}) c.rows[t] = 16, c.colsb[t] = uint16_t(sub);
  for (int t : {6, 7}) c.rows[t] = uint8_t(sub / 4), c.colsb[t] = 64;
  return c;
}

// Tile loads and stores with the memory they touch named (GCC's intrinsics
// either say nothing, for loads, or clobber all memory, for stores, which
// would force the 16 accumulators out of registers at every sub-block). The
// tile numbers are literal tokens in the assembly, hence the macros.
using Region4k = char[4096];  // an A tile: 16 rows, stride 256
using Region1k = char[1024];  // a B or C tile: at most 16 rows of 64 bytes
#define KT_TILE_LOAD(T, REGION, p, stride)                                         \
  asm volatile("tileloadd (%1,%2,1), %%tmm" #T ::"m"(*reinterpret_cast<const REGION*>(p)), "r"(p), \
               "r"(int64_t(stride)))
#define KT_TILE_STORE(T, p)                                                               \
  asm volatile("tilestored %%tmm" #T ", (%1,%2,1)" : "=m"(*reinterpret_cast<Region1k*>(p)) : "r"(p), \
               "r"(int64_t(64)))

struct AmxHw {
  static void configure(const TileConfig& c) { asm volatile("ldtilecfg %0" ::"m"(c)); }
  static void release() { _tile_release(); }
  template <int C>  // C += A . B for C tile c, loading its A and B first
  static void product(const int8_t* a, const int8_t* b) {
    if constexpr (C % 2 == 0) {
      KT_TILE_LOAD(4, Region4k, a, 256);
      KT_TILE_LOAD(6, Region1k, b, 64);
    } else {
      KT_TILE_LOAD(5, Region4k, a, 256);
      KT_TILE_LOAD(7, Region1k, b, 64);
    }
    if constexpr (C == 0) {
      _tile_zero(0);
      _tile_dpbssd(0, 4, 6);
    } else if constexpr (C == 1) {
      _tile_zero(1);
      _tile_dpbssd(1, 5, 7);
    } else if constexpr (C == 2) {
      _tile_zero(2);
      _tile_dpbssd(2, 4, 6);
    } else {
      _tile_zero(3);
      _tile_dpbssd(3, 5, 7);
    }
  }
  template <int C>
  static void store(int32_t* p) {
    if constexpr (C == 0) KT_TILE_STORE(0, p);
    else if constexpr (C == 1) KT_TILE_STORE(1, p);
    else if constexpr (C == 2) KT_TILE_STORE(2, p);
    else KT_TILE_STORE(3, p);
  }
};

struct AmxEmu {
  struct State {
    TileConfig cfg;
    alignas(64) uint8_t t[8][16][64];
  };
  static State& st() {
    thread_local State s;
    return s;
  }
  static void configure(const TileConfig& c) {
    st().cfg = c;
    std::memset(st().t, 0, sizeof(st().t));
  }
  static void release() {}
  static void load(int t, const void* p, int64_t stride) {
    State& s = st();
    for (int r = 0; r < s.cfg.rows[t]; ++r)
      std::memcpy(s.t[t][r], static_cast<const uint8_t*>(p) + r * stride, s.cfg.colsb[t]);
  }
  template <int C>
  static void product(const int8_t* a, const int8_t* b) {
    State& s = st();
    constexpr int A = 4 + C % 2, B = 6 + C % 2;
    load(A, a, 256);
    load(B, b, 64);
    std::memset(s.t[C], 0, sizeof(s.t[C]));
    const int m_rows = s.cfg.rows[A], k_bytes = s.cfg.colsb[A], n = s.cfg.colsb[C] / 4;
    for (int m = 0; m < m_rows; ++m)
      for (int j = 0; j < n; ++j) {
        int32_t acc = 0;
        for (int k = 0; k < k_bytes; ++k)
          acc += int32_t(int8_t(s.t[A][m][k])) * int32_t(int8_t(s.t[B][k / 4][4 * j + k % 4]));
        std::memcpy(&s.t[C][m][4 * j], &acc, 4);
      }
  }
  template <int C>
  static void store(int32_t* p) {
    State& s = st();
    for (int r = 0; r < s.cfg.rows[C]; ++r) std::memcpy(reinterpret_cast<uint8_t*>(p) + r * 64, s.t[C][r], 64);
  }
};

// ---- weights: one super-block of 16 rows, unpacked -------------------------------
struct alignas(64) Panel {
  int8_t q[16][256];  // row r's 256 values of q, natural order
  float sc[16][16];   // [row][sub-block]: d * scale
  float mn[16][16];   // [row][sub-block]: what the sub-block's activation sum is multiplied by and subtracted
};

// Q4_K / Q5_K: 4 runs of 32 bytes, low nibbles then high nibbles (+ qh's bit s << 4).
// The blocks' bytes are read where they lie (unaligned loads; a copy into a
// local struct first would stall each 32-byte load on store forwarding).
uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

template <bool kQ5>
void unpack_q45k(const uint8_t* blk, int r, Panel& p) {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const float d = f16(u16_at(blk + offsetof(Block, d))), dmin = f16(u16_at(blk + offsetof(Block, dmin)));
  uint8_t scales[12];
  std::memcpy(scales, blk + offsetof(Block, scales), 12);
  const uint8_t* qs = blk + offsetof(Block, qs);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kQ5) qh = load32(blk + offsetof(BlockQ5_K, qh));
  for (int j = 0; j < 4; ++j) {
    const __m256i v = load32(qs + 32 * j);
    __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kQ5) {
      const __m256i b0 = _mm256_set1_epi8(char(1 << (2 * j))), b1 = _mm256_set1_epi8(char(1 << (2 * j + 1)));
      const __m256i sixteen = _mm256_set1_epi8(16);
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen));
      hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[r] + 64 * j), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[r] + 64 * j + 32), hi);
  }
  // ggml's get_scale_min_k4 for all 8 sub-blocks at once, 4 bytes per word.
  uint32_t w[3];
  std::memcpy(w, scales, 12);
  const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
  auto floats = [](uint32_t lo, uint32_t hi) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(hi), int(lo))));
  };
  _mm256_store_ps(p.sc[r], _mm256_mul_ps(floats(sc_lo, sc_hi), _mm256_set1_ps(d)));
  _mm256_store_ps(p.mn[r], _mm256_mul_ps(floats(m_lo, m_hi), _mm256_set1_ps(dmin)));
}

// Q6_K: q = 4 bits of ql | 2 bits of qh << 4, stored +32 (the -32 goes with the
// activation sums per 16 values, like the AVX-512 kernel).
void unpack_q6k(const uint8_t* blk, int r, Panel& p) {
  const float d = f16(u16_at(blk + offsetof(BlockQ6_K, d)));
  const auto* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
  const uint8_t *ql = blk + offsetof(BlockQ6_K, ql), *qhp = blk + offsetof(BlockQ6_K, qh);
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = load32(ql + 64 * h), l1 = load32(ql + 64 * h + 32), qh = load32(qhp + 32 * h);
    auto high = [&](int shift) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two), 4);
    };
    int8_t* out = p.q[r] + 128 * h;
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_or_si256(_mm256_and_si256(l0, low4), high(0)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32),
                       _mm256_or_si256(_mm256_and_si256(l1, low4), high(2)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64),
                       _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), high(4)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 96),
                       _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), high(6)));
  }
  const __m512 scf = _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)))),
      _mm512_set1_ps(d));
  _mm512_store_ps(p.sc[r], scf);
  _mm512_store_ps(p.mn[r], _mm512_mul_ps(scf, _mm512_set1_ps(32.0f)));
}

// The 32-value types as signed values (offsets and code book applied) times d:
// 16 bytes of nibbles -> values 0..15 from the low nibbles, 16..31 from the high.
__m256i nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), low4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4), _mm_and_si128(v, low4));
}
void unpack_legacy(GgmlType t, const uint8_t* blk, int r, int j, Panel& p) {
  __m256i v;
  if (t == GgmlType::Q8_0) {
    v = load32(blk + offsetof(BlockQ8_0, qs));
  } else if (t == GgmlType::Q4_0) {
    v = _mm256_sub_epi8(nibbles(blk + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8));
  } else if (t == GgmlType::Q5_0) {
    uint32_t qh;
    std::memcpy(&qh, blk + offsetof(BlockQ5_0, qh), 4);
    // byte j of the 32 gets bit j of qh: spread qh's bytes 8 to a lane, test each bit.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                                          _mm256_set1_epi8(16));
    v = _mm256_sub_epi8(_mm256_or_si256(nibbles(blk + offsetof(BlockQ5_0, qs)), high), _mm256_set1_epi8(16));
  } else {  // IQ4_NL
    const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl)));
    v = _mm256_shuffle_epi8(book, nibbles(blk + offsetof(BlockIq4_nl, qs)));
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(p.q[r] + 32 * j), v);
  p.sc[r][j] = f16(u16_at(blk));  // d leads every 32-value block
}

bool is_legacy(GgmlType t) { return t != GgmlType::Q4_K && t != GgmlType::Q5_K && t != GgmlType::Q6_K; }
int sub_values(GgmlType t) { return t == GgmlType::Q6_K ? 16 : 32; }

// Chunk c of 16 rows: 256 values (a super-block, or 8 blocks of 32; the last
// chunk of a 32-value type may hold fewer blocks, `subs`).
void unpack(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t c, int subs, int rows, Panel& p) {
  const size_t bb = type_traits(t).type_size;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = w + uint64_t(r) * w_row_bytes;
    if (t == GgmlType::Q4_K) unpack_q45k<false>(row + size_t(c) * bb, r, p);
    else if (t == GgmlType::Q5_K) unpack_q45k<true>(row + size_t(c) * bb, r, p);
    else if (t == GgmlType::Q6_K) unpack_q6k(row + size_t(c) * bb, r, p);
    else {
      for (int j = 0; j < subs; ++j) unpack_legacy(t, row + size_t(8 * c + j) * bb, r, j, p);
      for (int j = subs; j < 8; ++j) {  // a short last chunk: blocks of zeros
        std::memset(p.q[r] + 32 * j, 0, 32);
        p.sc[r][j] = 0.0f;
      }
    }
  }
  for (int r = rows; r < 16; ++r) {  // rows past the range: zeros, never written out
    std::memset(p.q[r], 0, 256);
    std::memset(p.sc[r], 0, sizeof(p.sc[r]));
    std::memset(p.mn[r], 0, sizeof(p.mn[r]));
  }
}

// ---- activations: tiles of 16 tokens ----------------------------------------------
// Per tile, for n values:
//   int8  q[n / 4][16][4]     value 4i + j of token t at [i][t][j] (B's layout)
// then for the k-quants (nsb = n / 256 super-blocks)
//   float d[nsb][16]          each token's Q8_K scale (0 for a missing token)
//   float bsum[nsb][16][16]   [super-block][group of 16 values][token]: the group's sum of q
// or for the 32-value types
//   float d[n / 32][16]       each token's block scale
// (n rounded up to whole chunks of 256 values, the padding zeros: a short last
// chunk of a 32-value type runs as a whole one.)
int64_t padded(int64_t n) { return (n + 255) / 256 * 256; }
size_t tile_bytes(bool legacy, int64_t n) {
  const int64_t np = padded(n);
  return size_t(np) * 16 + (legacy ? size_t(np / 32) * 64 : size_t(np / 256) * (16 + 256) * 4);
}

// One tile of n_tok (<= 16) tokens: B's 4-byte groups gathered from the 16
// activation rows, 64 bytes (16 tokens) at a time; missing tokens are zeros.
void pack_tile(bool legacy, const uint8_t* xq, size_t act_bytes, int64_t n_tok, int64_t n, uint8_t* dst) {
  auto* d = reinterpret_cast<float*>(dst + padded(n) * 16);
  const __mmask16 real = __mmask16((1u << n_tok) - 1);
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(int(act_bytes)));
  const __m512i flip = _mm512_set1_epi32(legacy ? int(0x80808080u) : 0);  // Q8_0 kind keeps q + 128
  for (int64_t i = 0; i < n / 4; ++i) {
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), real, rows, xq + 4 * i, 1);
    _mm512_store_si512(dst + 64 * i, _mm512_maskz_xor_epi32(real, g, flip));
  }
  std::memset(dst + n * 16, 0, size_t(padded(n) - n) * 16);
  if (legacy) {
    std::memset(d, 0, size_t(padded(n) / 32) * 64);
    for (int64_t t = 0; t < n_tok; ++t) {
      const ActQ8_0View a = act_q8_0(xq + size_t(t) * act_bytes, n);
      for (int64_t k = 0; k < n / 32; ++k) d[k * 16 + t] = a.dexp[8 * k];
    }
    return;
  }
  const int64_t nsb = n / 256;
  float* bs = d + nsb * 16;
  std::memset(d, 0, size_t(nsb) * (16 + 256) * 4);
  for (int64_t t = 0; t < n_tok; ++t) {
    const ActQ8_KView a = act_q8_k(xq + size_t(t) * act_bytes, n);
    for (int64_t k = 0; k < nsb; ++k) {
      d[k * 16 + t] = a.d[k];
      for (int g = 0; g < 16; ++g) bs[(k * 16 + g) * 16 + t] = float(a.bsum[k * 16 + g]);
    }
  }
}

// ---- the tiles ------------------------------------------------------------------
// Sub-block j's product: C tile C (= j % 4) from the panel and the tile of tokens.
template <class T, int C, int SUB>
[[gnu::always_inline]] inline void issue(const Panel& p, const int8_t* bq, int j) {
  T::template product<C>(p.q[0] + j * SUB, bq + j * SUB * 16);
}

// Sub-block j's C tile into the 16 accumulators s0..s15 (one per weight row,
// lanes are tokens). Macros, not functions: GCC keeps an array of vectors that
// a helper takes by reference in memory, 16 loads and stores per sub-block.
#define KT_ROWS16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define KT_ROW_LEGACY(r)                                                                          \
  s##r = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cj + 16 * r)), dj), \
                         _mm512_set1_ps(p.sc[r][jj]), s##r);
#define KT_ROW_K(r)                                                                                              \
  s##r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cj + 16 * r)), _mm512_set1_ps(p.sc[r][jj]), s##r); \
  s##r = _mm512_fnmadd_ps(bs, _mm512_set1_ps(p.mn[r][jj]), s##r);
#define KT_DRAIN(C, J)                                                                                     \
  do {                                                                                                     \
    T::template store<C>(c[C]);                                                                            \
    const int32_t* cj = c[C];                                                                              \
    const int jj = (J);                                                                                    \
    if constexpr (kLegacy) {                                                                               \
      const __m512 dj = _mm512_load_ps(dv + 16 * jj);                                                      \
      KT_ROWS16(KT_ROW_LEGACY)                                                                             \
    } else {                                                                                               \
      const __m512 bs = SUB == 32 ? _mm512_add_ps(_mm512_load_ps(bsum + 32 * jj), _mm512_load_ps(bsum + 32 * jj + 16)) \
                                  : _mm512_load_ps(bsum + 16 * jj);                                        \
      KT_ROWS16(KT_ROW_K)                                                                                  \
    }                                                                                                      \
  } while (0)
#define KT_ZERO(r) __m512 s##r = _mm512_setzero_ps();
#define KT_ACC(r) _mm512_store_ps(a + 16 * r, _mm512_fmadd_ps(s##r, dvec, _mm512_load_ps(a + 16 * r)));

// acc[tt][r][t] (16 x 16 floats per tile of tokens) = the 16 rows at w (rows of
// them real) against every tile of tokens, over all n values.
template <class T, int SUB, bool kLegacy>
void row_tile(GgmlType type, const uint8_t* w, uint64_t w_row_bytes, int64_t n, int rows, const uint8_t* packed,
              int64_t n_tiles, float* acc, Panel& p) {
  constexpr int kSubs = 256 / SUB;  // a multiple of 4: the pipeline below
  const int64_t n_chunks = padded(n) / 256;
  const size_t tb = tile_bytes(kLegacy, n);
  alignas(64) int32_t c[4][256];
  std::memset(acc, 0, size_t(n_tiles) * 256 * sizeof(float));
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const int subs = int(std::min<int64_t>(256, n - 256 * ch) / SUB);
    unpack(type, w, w_row_bytes, ch, subs, rows, p);
    for (int64_t tt = 0; tt < n_tiles; ++tt) {
      const uint8_t* tile = packed + size_t(tt) * tb;
      const int8_t* bq = reinterpret_cast<const int8_t*>(tile) + ch * 256 * 16;  // 64 bytes per 4 values
      const float* dv = reinterpret_cast<const float*>(tile + padded(n) * 16) + (kLegacy ? ch * 8 * 16 : ch * 16);
      const float* bsum = reinterpret_cast<const float*>(tile + padded(n) * 16) + n_chunks * 16 + ch * 256;
      KT_ROWS16(KT_ZERO)
      // Sub-block j's product goes to C tile j % 4 and is scaled two sub-blocks
      // later, so the tiles compute while the vector units scale.
      issue<T, 0, SUB>(p, bq, 0);
      issue<T, 1, SUB>(p, bq, 1);
      for (int j = 0; j < kSubs; j += 4) {
        issue<T, 2, SUB>(p, bq, j + 2);
        KT_DRAIN(0, j);
        issue<T, 3, SUB>(p, bq, j + 3);
        KT_DRAIN(1, j + 1);
        if (j + 4 < kSubs) {
          issue<T, 0, SUB>(p, bq, j + 4);
          KT_DRAIN(2, j + 2);
          issue<T, 1, SUB>(p, bq, j + 5);
          KT_DRAIN(3, j + 3);
        } else {
          KT_DRAIN(2, j + 2);
          KT_DRAIN(3, j + 3);
        }
      }
      float* a = acc + tt * 256;
      // The 32-value types applied their token scales per block (dvec = 1).
      const __m512 dvec = kLegacy ? _mm512_set1_ps(1.0f) : _mm512_load_ps(dv);
      KT_ROWS16(KT_ACC)
    }
  }
}

// Tokens are taken 8 tiles (128) at a time: their packed activations (~115 KB
// per tile at n = 7168) stay in L2 while every row tile of the range passes
// over them, and the buffer stays small however long the prompt.
constexpr int64_t kGroupTiles = 8;

// Rows [o_begin, o_end) against the n_tok tokens (at most kGroupTiles tiles)
// whose tiles are at `tiles`, written to y's rows [0, n_tok).
template <class T>
void group(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n, const uint8_t* tiles, int64_t n_tok,
           float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, float* acc, Panel& panel) {
  const bool legacy = is_legacy(t);
  const int sub = sub_values(t);
  const int64_t n_tiles = (n_tok + kTok - 1) / kTok;
  for (int64_t o = o_begin; o < o_end; o += 16) {
    const int rows = int(std::min<int64_t>(16, o_end - o));
    const uint8_t* wr = w + uint64_t(o) * w_row_bytes;
    if (legacy) row_tile<T, 32, true>(t, wr, w_row_bytes, n, rows, tiles, n_tiles, acc, panel);
    else if (sub == 32) row_tile<T, 32, false>(t, wr, w_row_bytes, n, rows, tiles, n_tiles, acc, panel);
    else row_tile<T, 16, false>(t, wr, w_row_bytes, n, rows, tiles, n_tiles, acc, panel);
    for (int64_t tt = 0; tt < n_tiles; ++tt) {
      const int64_t nt = std::min<int64_t>(kTok, n_tok - tt * kTok);
      const float* a = acc + tt * 256;
      for (int r = 0; r < rows; ++r)
        for (int64_t k = 0; k < nt; ++k) y[(tt * kTok + k) * y_stride + o + r] = a[16 * r + k];
    }
  }
}

// tiles: the activations already packed (amx_pack_tiles), or nullptr to pack
// each group of xq's rows here.
template <class T>
void run(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n, const uint8_t* xq, size_t act_bytes,
         const uint8_t* tiles, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end) {
  const bool legacy = is_legacy(t);
  const size_t tb = tile_bytes(legacy, n);
  const int64_t max_tiles = std::min<int64_t>(kGroupTiles, (n_batch + kTok - 1) / kTok);
  static_assert(sizeof(Panel) % 64 == 0);
  const size_t packed_bytes = tiles ? 0 : size_t(max_tiles) * tb;
  auto* packed = static_cast<uint8_t*>(amx_thread_buffer(packed_bytes + size_t(max_tiles) * 1024 + sizeof(Panel)));
  auto* acc = reinterpret_cast<float*>(packed + packed_bytes);
  auto* panel = reinterpret_cast<Panel*>(acc + max_tiles * 256);
  T::configure(tile_config(sub_values(t)));
  for (int64_t b0 = 0; b0 < n_batch; b0 += kGroupTiles * kTok) {
    const int64_t nb = std::min<int64_t>(kGroupTiles * kTok, n_batch - b0);
    if (!tiles) amx_pack_tiles(t, xq + size_t(b0) * act_bytes, act_bytes, n, nb, packed);
    const uint8_t* g = tiles ? tiles + size_t(b0 / kTok) * tb : packed;
    group<T>(t, w, w_row_bytes, n, g, nb, y + b0 * y_stride, y_stride, o_begin, o_end, acc, *panel);
  }
  T::release();
}

}  // namespace

bool matmul_q_amx_covers(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::Q8_0: case GgmlType::Q5_0: case GgmlType::Q4_0: case GgmlType::IQ4_NL:
      return true;
    default:
      return false;
  }
}

bool matmul_q_amx(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* xq,
                  size_t act_bytes, int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end,
                  bool emulate) {
  if (!matmul_q_amx_covers(t) || n_in % type_traits(t).block_size != 0) return false;
  if (emulate) run<AmxEmu>(t, w, w_row_bytes, n_in, xq, act_bytes, nullptr, n_batch, y, y_stride, o_begin, o_end);
  else run<AmxHw>(t, w, w_row_bytes, n_in, xq, act_bytes, nullptr, n_batch, y, y_stride, o_begin, o_end);
  return true;
}

size_t amx_tiles_bytes(GgmlType t, int64_t n_in, int64_t n_batch) {
  if (!matmul_q_amx_covers(t) || n_in % type_traits(t).block_size != 0) return 0;
  return size_t((n_batch + kTok - 1) / kTok) * tile_bytes(is_legacy(t), n_in);
}

void amx_pack_tiles(GgmlType t, const uint8_t* xq, size_t act_bytes, int64_t n_in, int64_t n_batch, uint8_t* dst) {
  const bool legacy = is_legacy(t);
  const size_t tb = tile_bytes(legacy, n_in);
  for (int64_t b = 0; b < n_batch; b += kTok)
    pack_tile(legacy, xq + size_t(b) * act_bytes, act_bytes, std::min<int64_t>(kTok, n_batch - b), n_in,
              dst + size_t(b / kTok) * tb);
}

void matmul_q_amx_tiles(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* tiles,
                        int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool emulate) {
  if (emulate) run<AmxEmu>(t, w, w_row_bytes, n_in, nullptr, 0, tiles, n_batch, y, y_stride, o_begin, o_end);
  else run<AmxHw>(t, w, w_row_bytes, n_in, nullptr, 0, tiles, n_batch, y, y_stride, o_begin, o_end);
}

}  // namespace kt::cpu::matmul_detail
