// matmul_i8 (matmul_i8.h) with AMX-INT8 tiles. The weights are already int8 in
// blocks of 16 rows x 256 values (row stride 256), so an A tile is loaded
// straight from the repacked matrix; the activations are laid out once per
// call (or once per expert by the caller) in B's 4-byte-interleaved layout:
//   per tile of 16 tokens: int8 q[chunk][4 slices][16 (k/4)][16 tokens][4], then
//   float d[chunk][16] (each token's scale; 0 for a missing token).
// One step is a 2 x 2 block: 32 weight rows x 32 tokens in C tiles 0..3, the
// four 64-value slices of a chunk added in the tiles (tdpbssd), then each C
// tile read back once per chunk and scaled by the rows' and tokens' scales
// into float accumulators in L1. matmul_q's AMX kernel reads back every 32
// values and unpacks its weights per call; this one does neither. Chunk by
// chunk, four row pairs in turn take the chunk's activation tiles, so these
// come from L2 once per four pairs (row_pairs).
//
// Int4 weights: each chunk of a block of rows is unpacked once (16 rows x 256
// values, q = u - 8) into 4 KB of the thread's buffer, in the int8 block's
// layout, and the same tiles load it there for every tile of tokens.
//
// The tile operations go through a backend: Hw (the instructions) or Emu
// (plain C++ with their semantics), so CPUs without AMX test the layouts.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/matmul_i8.h"

namespace kt::cpu::matmul_detail {
namespace {

// Tiles: 0..3 C (16 x 16 int32), C tile 2 * ri + ti for rows ri, tokens ti;
// 4, 5 A (16 rows x 64 bytes); 6, 7 B (16 rows x 64 bytes).
TileConfig tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  return c;
}

// r[i] = row i of a 16 x 16 matrix of 32-bit values; on return r[j] = column j.
// Pairs of rows interleaved by 32 then 64 bits (within 128-bit lanes), then the
// lanes of four registers transposed.
[[gnu::always_inline]] inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // r[4q + j], lane L: rows 4q..4q+3 of column 4L + j.
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i u0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), u1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
    const __m512i u3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
    t[j] = _mm512_shuffle_i32x4(u0, u2, 0x88);       // column j
    t[4 + j] = _mm512_shuffle_i32x4(u0, u2, 0xDD);   // column 4 + j
    t[8 + j] = _mm512_shuffle_i32x4(u1, u3, 0x88);   // column 8 + j
    t[12 + j] = _mm512_shuffle_i32x4(u1, u3, 0xDD);  // column 12 + j
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// The intrinsics take tile numbers as literal tokens (they name registers in
// the assembly), hence the chains of constant branches.
struct Hw {
  static void configure(const TileConfig& c) { _tile_loadconfig(&c); }
  static void release() { _tile_release(); }
  template <int T>
  static void load(const void* p, int64_t stride) {
    if constexpr (T == 4) _tile_loadd(4, p, stride);
    else if constexpr (T == 5) _tile_loadd(5, p, stride);
    else if constexpr (T == 6) _tile_loadd(6, p, stride);
    else _tile_loadd(7, p, stride);
  }
  template <int C>
  static void zero() {
    if constexpr (C == 0) _tile_zero(0);
    else if constexpr (C == 1) _tile_zero(1);
    else if constexpr (C == 2) _tile_zero(2);
    else _tile_zero(3);
  }
  template <int C, int A, int B>  // the four products of chunk_step
  static void dp() {
    static_assert(A == 4 + C / 2 && B == 6 + C % 2);
    if constexpr (C == 0) _tile_dpbssd(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbssd(1, 4, 7);
    else if constexpr (C == 2) _tile_dpbssd(2, 5, 6);
    else _tile_dpbssd(3, 5, 7);
  }
  template <int C>
  static void store(int32_t* p) {
    if constexpr (C == 0) _tile_stored(0, p, 64);
    else if constexpr (C == 1) _tile_stored(1, p, 64);
    else if constexpr (C == 2) _tile_stored(2, p, 64);
    else _tile_stored(3, p, 64);
  }
};

struct Emu {
  struct State {
    alignas(64) uint8_t t[8][16][64];
  };
  static State& st() {
    thread_local State s;
    return s;
  }
  static void configure(const TileConfig&) { std::memset(st().t, 0, sizeof(st().t)); }
  static void release() {}
  template <int T>
  static void load(const void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(st().t[T][r], static_cast<const uint8_t*>(p) + r * stride, 64);
  }
  template <int C>
  static void zero() {
    std::memset(st().t[C], 0, sizeof(st().t[C]));
  }
  template <int C, int A, int B>
  static void dp() {
    State& s = st();
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        int32_t acc;
        std::memcpy(&acc, &s.t[C][m][4 * n], 4);
        for (int k = 0; k < 64; ++k)
          acc += int32_t(int8_t(s.t[A][m][k])) * int32_t(int8_t(s.t[B][k / 4][4 * n + k % 4]));
        std::memcpy(&s.t[C][m][4 * n], &acc, 4);
      }
  }
  template <int C>
  static void store(int32_t* p) {
    std::memcpy(p, st().t[C], 1024);
  }
};

constexpr int64_t kGroupTiles = 8;  // tokens per pass: 8 tiles of 16

// One step: NR blocks of 16 rows (at blk0, blk1: this chunk's weight blocks)
// against NT tiles of tokens (at b0, b1: this chunk's slices), the chunk's
// 64-value slices added in C tiles 2 ri + ti: four, or in a short last chunk
// only those that hold values (the rest are zeros on both sides).
template <class T, int NR, int NT>
[[gnu::always_inline]] inline void products(const uint8_t* blk0, const uint8_t* blk1, const uint8_t* b0,
                                            const uint8_t* b1, int slices) {
  T::template zero<0>();
  if constexpr (NT == 2) T::template zero<1>();
  if constexpr (NR == 2) T::template zero<2>();
  if constexpr (NR == 2 && NT == 2) T::template zero<3>();
  for (int j = 0; j < slices; ++j) {
    T::template load<4>(blk0 + 64 * j, 256);
    T::template load<6>(b0 + 1024 * j, 64);
    T::template dp<0, 4, 6>();
    if constexpr (NT == 2) {
      T::template load<7>(b1 + 1024 * j, 64);
      T::template dp<1, 4, 7>();
    }
    if constexpr (NR == 2) {
      T::template load<5>(blk1 + 64 * j, 256);
      T::template dp<2, 5, 6>();
      if constexpr (NT == 2) T::template dp<3, 5, 7>();
    }
  }
}

// A step's C tiles into cbuf (tile C at cbuf + 256 C).
template <class T, int NR>
[[gnu::always_inline]] inline void store_tiles(int nt, int32_t* cbuf) {
  T::template store<0>(cbuf);
  if (nt == 2) T::template store<1>(cbuf + 256);
  if constexpr (NR == 2) {
    T::template store<2>(cbuf + 512);
    if (nt == 2) T::template store<3>(cbuf + 768);
  }
}

// What a step left in cbuf, to be scaled into the accumulators:
// acc[ti][16 ri + r][token] += C[r][token] * d_w[ri][r] * d_x[ti][token].
struct Drain {
  const float* dw[2];
  const float* dx[2];
  float* acc[2];
  int nt = 0;
};

template <int NR>
[[gnu::always_inline]] inline void drain(const Drain& d, const int32_t* cbuf) {
  for (int ri = 0; ri < NR; ++ri)
    for (int ti = 0; ti < d.nt; ++ti) {
      const int32_t* c = cbuf + 256 * (2 * ri + ti);
      const __m512 dx = _mm512_load_ps(d.dx[ti]);
      float* acc = d.acc[ti] + 256 * ri;
      for (int r = 0; r < 16; ++r) {
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(d.dw[ri][r]), dx);
        _mm512_store_ps(acc + 16 * r, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * r)), s,
                                                      _mm512_load_ps(acc + 16 * r)));
      }
    }
}

// One chunk c of a pair of row blocks (NR of them, at blk0 and blk1) against
// the group's n_tiles tiles of tokens (at `tiles`), scaled into acc
// ([tile][32 rows][16 tokens]). (Issuing a step's products before scaling the
// previous step's C tiles, so the vector units scale while the tiles multiply,
// measured no faster on the device's Xeon: 16 threads, hot weights, 48 / 256
// tokens 7.2-7.3 / 7.8-8.5 TFLOP/s pipelined against 6.8-7.6 / 9.3 in order.)
template <class T, int NR, WeightBits B>
[[gnu::always_inline]] inline void chunk_rows(const uint8_t* blk0, const uint8_t* blk1, int64_t c, int64_t nc,
                                              int slices, size_t tb, const uint8_t* tiles, int64_t n_tiles,
                                              float* acc, int32_t* cbuf, uint8_t* unpacked) {
  constexpr size_t kScales = i8_scales_offset(B);
  // Where the tiles load the rows' values: the block itself, or its int4
  // values unpacked.
  const uint8_t* a0 = blk0;
  const uint8_t* a1 = blk1;
  if constexpr (B == WeightBits::Int4) {
    i4_unpack(blk0, unpacked);
    a0 = unpacked;
    if constexpr (NR == 2) {
      i4_unpack(blk1, unpacked + 4096);
      a1 = unpacked + 4096;
    }
  }
  for (int64_t tt = 0; tt < n_tiles; tt += 2) {
    const uint8_t* t0 = tiles + size_t(tt) * tb;
    Drain cur;
    cur.nt = tt + 1 < n_tiles ? 2 : 1;
    cur.dw[0] = reinterpret_cast<const float*>(blk0 + kScales);
    cur.dw[1] = NR == 2 ? reinterpret_cast<const float*>(blk1 + kScales) : nullptr;
    for (int i = 0; i < cur.nt; ++i) {
      const uint8_t* ti = t0 + size_t(i) * tb;
      cur.dx[i] = reinterpret_cast<const float*>(ti + nc * 4096) + c * 16;
      cur.acc[i] = acc + (tt + i) * 512;
    }
    if (cur.nt == 2) products<T, NR, 2>(a0, a1, t0 + c * 4096, t0 + tb + c * 4096, slices);
    else products<T, NR, 1>(a0, a1, t0 + c * 4096, nullptr, slices);
    store_tiles<T, NR>(cur.nt, cbuf);
    drain<NR>(cur, cbuf);
  }
}

// Rows [o, o + 32 pairs) (the last pair one block of 16 rows unless
// last_two) against the group's n_tok tokens (tiles at `tiles`), chunk by
// chunk and, within a chunk, pair by pair: a chunk's activation tiles are
// fetched from L2 once for all the pairs and then read from L1 (one pair at a
// time fetched them once per pair: 3 x 4 KB a chunk at 48 tokens, as many
// bytes as its weights three times over). acc: [pair][tile][32 rows][16 tokens].
template <class T, WeightBits B>
void row_pairs(const uint8_t* wi8, int64_t nc, int last_slices, size_t tb, int64_t o, int pairs, bool last_two,
               const uint8_t* tiles, int64_t n_tok, float* acc, int32_t* cbuf, uint8_t* unpacked) {
  constexpr size_t kBlock = i8_block_bytes(B);
  const int64_t n_tiles = (n_tok + 15) / 16;
  std::memset(acc, 0, size_t(pairs * n_tiles) * 512 * sizeof(float));
  const uint8_t* first = wi8 + size_t(o / 16 * nc) * kBlock;  // pair p's rows at first + 2 p nc kBlock
  auto prefetch = [&](const uint8_t* blk0, bool two) {
    for (size_t i = 0; i < kBlock; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(blk0 + i), _MM_HINT_T0);
      if (two) _mm_prefetch(reinterpret_cast<const char*>(blk0 + size_t(nc) * kBlock + i), _MM_HINT_T0);
    }
  };
  for (int64_t c = 0; c < nc; ++c) {
    const int slices = c + 1 < nc ? 4 : last_slices;
    for (int p = 0; p < pairs; ++p) {
      const bool two = p + 1 < pairs || last_two;
      const uint8_t* blk0 = first + size_t(2 * p * nc + c) * kBlock;
      // The next blocks, from memory while these multiply (the tiles' strided
      // loads leave the hardware prefetchers behind: V2-Lite's MoE layer at
      // 128 tokens 2.05-2.07 -> 2.25-2.36 TFLOP/s on the device).
      if (p + 1 < pairs) prefetch(blk0 + size_t(2 * nc) * kBlock, p + 2 < pairs || last_two);
      else if (c + 1 < nc) prefetch(first + size_t(c + 1) * kBlock, pairs > 1 || last_two);
      float* acc_p = acc + size_t(p * n_tiles) * 512;
      if (two)
        chunk_rows<T, 2, B>(blk0, blk0 + size_t(nc) * kBlock, c, nc, slices, tb, tiles, n_tiles, acc_p, cbuf, unpacked);
      else
        chunk_rows<T, 1, B>(blk0, nullptr, c, nc, slices, tb, tiles, n_tiles, acc_p, cbuf, unpacked);
    }
  }
}

// The accumulators acc[tile][32 rows][16 tokens] into y[token][row], rows
// [0, rows): 16 x 16 blocks transposed in registers (one element at a time was
// ~15% of a row pair's time at 48 tokens).
void store_outputs(const float* acc, int64_t n_tok, int64_t rows, float* y, int64_t y_stride) {
  for (int64_t tt = 0; tt * 16 < n_tok; ++tt)
    for (int64_t ri = 0; ri * 16 < rows; ++ri) {
      __m512i v[16];
      const float* a = acc + tt * 512 + ri * 256;
      for (int r = 0; r < 16; ++r) v[r] = _mm512_load_si512(a + 16 * r);
      transpose_16x16(v);
      const __mmask16 m = __mmask16((1u << std::min<int64_t>(16, rows - ri * 16)) - 1);
      const int64_t nt = std::min<int64_t>(16, n_tok - tt * 16);
      for (int64_t t = 0; t < nt; ++t)
        _mm512_mask_storeu_ps(y + (tt * 16 + t) * y_stride + ri * 16, m, _mm512_castsi512_ps(v[t]));
    }
}

// Row pairs that share a chunk's activation tiles (row_pairs). Four: on the
// device's Xeon (kt-bench moe --int4, TFLOP/s, runs alternating on two hosts)
// one pair at a time / four: V2-Lite 512 tokens 6.4 / 7.1 and 7.1 / 7.2,
// 2048 8.2 / 9.4 and 9.0 / 9.9; Qwen2-57B-A14B 512 8.8 / 10.3 and 9.7 / 9.8,
// 2048 10.7 / 11.9 and 11.0 / 11.5. Eight, or eight up to 4 tiles of tokens,
// did no better than four.
constexpr int kPairs = 4;

template <class T, WeightBits B>
void run(const uint8_t* wi8, int64_t n_in, const uint8_t* tiles, int64_t n_batch, float* y, int64_t y_stride,
         int64_t o_begin, int64_t o_end, int64_t n_out) {
  const int64_t nc = i8_chunks(n_in);
  const int last_slices = int((n_in - (nc - 1) * kI8Chunk + 63) / 64);  // of the last chunk
  const size_t tb = i8_tile_bytes(n_in);
  // acc[pair][tile][32 rows][16 tokens] for a group's tiles, a step's C tiles,
  // and two blocks of rows unpacked (int4).
  constexpr size_t kAcc = size_t(kPairs) * kGroupTiles * 512;
  auto* acc = static_cast<float*>(amx_thread_buffer(kAcc * sizeof(float) + 4096 + 8192));
  auto* cbuf = reinterpret_cast<int32_t*>(acc + kAcc);
  auto* unpacked = reinterpret_cast<uint8_t*>(cbuf + 1024);
  T::configure(tile_config());
  for (int64_t g0 = 0; g0 < n_batch; g0 += kGroupTiles * 16) {
    const int64_t n_tok = std::min<int64_t>(kGroupTiles * 16, n_batch - g0);
    const int64_t n_tiles = (n_tok + 15) / 16;
    const uint8_t* gt = tiles + size_t(g0 / 16) * tb;
    constexpr int64_t step = 32 * kPairs;
    for (int64_t o = o_begin; o < o_end; o += step) {
      // Rows [o, o_rows) of the range (and the matrix): whole pairs, then
      // maybe one block of 16.
      const int64_t o_rows = std::min({o + step, o_end, n_out});
      const int pairs = int((o_rows - o + 31) / 32);
      const bool last_two = (o_rows - o) % 32 == 0 || (o_rows - o) % 32 > 16;
      row_pairs<T, B>(wi8, nc, last_slices, tb, o, pairs, last_two, gt, n_tok, acc, cbuf, unpacked);
      for (int p = 0; p < pairs; ++p) {
        const int64_t op = o + 32 * p;
        store_outputs(acc + size_t(p * n_tiles) * 512, n_tok, std::min<int64_t>(32, std::min(o_end, n_out) - op),
                      y + g0 * y_stride + op, y_stride);
      }
    }
  }
  T::release();
}

}  // namespace

size_t i8_tile_bytes(int64_t n_in) { return size_t(i8_chunks(n_in)) * (4096 + 64); }

void i8_tile_pack(const uint8_t* xq, int64_t n_in, int64_t n_batch, uint8_t* dst) {
  const int64_t nc = i8_chunks(n_in);
  const size_t arb = i8_act_row_bytes(n_in), tb = i8_tile_bytes(n_in);
  for (int64_t b = 0; b < n_batch; b += 16) {
    const int64_t n_tok = std::min<int64_t>(16, n_batch - b);
    const uint8_t* src = xq + size_t(b) * arb;
    uint8_t* t = dst + size_t(b / 16) * tb;
    // Group i of 4 values (value 4i..4i+3; chunk i / 64, slice i / 16 % 4, row
    // i % 16) holds the 16 tokens' 4 bytes: 16 groups of 16 tokens are a 16 x 16
    // transpose of 32-bit values (a gather a group read 16 lines for 64 bytes:
    // ~8% of a 512-token MoE layer).
    for (int64_t g = 0; g < nc * 64; g += 16) {
      __m512i v[16];
      for (int64_t k = 0; k < 16; ++k)
        v[k] = k < n_tok ? _mm512_loadu_si512(src + size_t(k) * arb + 4 * g) : _mm512_setzero_si512();
      transpose_16x16(v);
      for (int j = 0; j < 16; ++j) _mm512_store_si512(t + 64 * (g + j), v[j]);
    }
    auto* d = reinterpret_cast<float*>(t + nc * 4096);
    std::memset(d, 0, size_t(nc) * 64);
    for (int64_t k = 0; k < n_tok; ++k) {
      const auto* xd = reinterpret_cast<const float*>(src + size_t(k) * arb + nc * 256);
      for (int64_t c = 0; c < nc; ++c) d[c * 16 + k] = xd[c];
    }
  }
}

void i8_run_amx(const uint8_t* wi8, int64_t n_in, const uint8_t* tiles, int64_t n_batch, float* y, int64_t y_stride,
                int64_t o_begin, int64_t o_end, int64_t n_out, bool emulate, WeightBits bits) {
  constexpr WeightBits k8 = WeightBits::Int8, k4 = WeightBits::Int4;
  if (emulate && bits == k4) run<Emu, k4>(wi8, n_in, tiles, n_batch, y, y_stride, o_begin, o_end, n_out);
  else if (emulate) run<Emu, k8>(wi8, n_in, tiles, n_batch, y, y_stride, o_begin, o_end, n_out);
  else if (bits == k4) run<Hw, k4>(wi8, n_in, tiles, n_batch, y, y_stride, o_begin, o_end, n_out);
  else run<Hw, k8>(wi8, n_in, tiles, n_batch, y, y_stride, o_begin, o_end, n_out);
}

}  // namespace kt::cpu::matmul_detail
