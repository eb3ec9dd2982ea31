// Resident routed experts over a long step, on the GPU end to end
// (cuda_moe_grouped_gemm.cuh). The grouped path before it brought the routing
// to the host each layer (a synchronization), then launched ~15 kernels per
// chosen expert (gather, two tile products of four launches each, SwiGLU, the
// down product, scatter): ~960 launches a V2-Lite layer at 2048 tokens, whose
// host time (184 ms a prompt) exceeded the GPU's (100 ms). Here a step is
// seven launches, none waited for by the host:
//   1. x's rows rounded to 8-bit blocks and scaled into f16 (the tile path's
//      activations, once for all experts);
//   2. the pairs counted and sorted by held matrix (one block; order within an
//      expert is free: each row's products do not depend on the others');
//   3. gate and up of every (expert, tile of 64, 128 or 256 rows, 64 columns) in one grid,
//      SwiGLU in the epilogue, rows in sorted order;
//   4. those rows rounded and scaled for down (as step 1);
//   5. down, written to each pair's row.
// Tiles are numbered expert after expert; a block finds its expert by a binary
// search over the tiles' prefix sums, and the grid covers the most tiles a
// step can have (blocks past the step's count return).
#include "kernels/cuda/cuda_moe_grouped_gemm.cuh"

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul_tiles.cuh"
#include "kernels/cuda/cuda_mma.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace kt::cuda {

namespace {

// A block: GM rows of one matrix's pairs (64, 128 or 256 by the experts'
// average rows: run_resident_experts) x kGN columns, a warp per 16 rows,
// chunks of kGK values. 128-value chunks give a thread two or four 32-value
// blocks to decode at once, their loads in flight together, and half the
// barriers of 64 (H200, old / new alternating: all-GPU prefill +4-18%).
constexpr int kGN = 64, kGK = 128;
constexpr int kGS = kGK + 8;  // halves a shared row (ldmatrix rows in distinct bank groups)

int64_t kpad(int64_t n) { return ceil_div(n, kGK) * kGK; }
uint64_t al(uint64_t n) { return (n + 255) / 256 * 256; }

// Pairs by held matrix: offsets[j] .. offsets[j + 1] are matrix j's pairs in
// sorted order (rows: the pair's token, pairs: its index t nu + k), tiles[j]
// the prefix sum of their gm-row tiles. One block.
__global__ void __launch_bounds__(1024) sort_pairs(const int32_t* __restrict__ ids, int64_t np, int nu,
                                                   const int32_t* __restrict__ slots, int64_t n_slots, int n_held,
                                                   int gm, int32_t* __restrict__ offsets, int32_t* __restrict__ tiles,
                                                   int32_t* __restrict__ rows, int32_t* __restrict__ pairs) {
  extern __shared__ int32_t cnt[];  // [n_held] counts, then [n_held] cursors
  int32_t* cur = cnt + n_held;
  wait_for_inputs();
  for (int j = threadIdx.x; j < n_held; j += blockDim.x) cnt[j] = 0;
  __syncthreads();
  auto held = [&](int32_t e) -> int {
    if (e < 0) return -1;
    if (!slots) return e < n_held ? e : -1;
    return e < n_slots ? slots[e] : -1;
  };
  for (int64_t p = threadIdx.x; p < np; p += blockDim.x)
    if (const int j = held(ids[p]); j >= 0) atomicAdd(&cnt[j], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t o = 0, t = 0;
    for (int j = 0; j < n_held; ++j) {
      offsets[j] = o;
      tiles[j] = t;
      cur[j] = o;
      o += cnt[j];
      t += (cnt[j] + gm - 1) / gm;
    }
    offsets[n_held] = o;
    tiles[n_held] = t;
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < np; p += blockDim.x)
    if (const int j = held(ids[p]); j >= 0) {
      const int32_t at = atomicAdd(&cur[j], 1);
      rows[at] = int32_t(p / nu);
      pairs[at] = int32_t(p);
    }
}

struct GemmArgs {
  const __half* a = nullptr;  // f16 rows [..][lda], scaled by 1 / inv[row]
  const float* inv = nullptr;
  int64_t lda = 0;
  const uint8_t* w0 = nullptr;  // gate (GLU) or down
  const uint8_t* w1 = nullptr;  // up (GLU)
  uint64_t row_bytes = 0, mat_bytes = 0;
  int K = 0, N = 0;
  const int32_t *offsets = nullptr, *tiles = nullptr, *rows = nullptr, *pairs = nullptr;
  int n_held = 0;
  float* out = nullptr;  // GLU: [sorted row][N]; else: [pair][N]
  int64_t ldo = 0;
  // Dense rows (run_decoded_gemm): one matrix, tile t the rows [GM t, GM t +
  // GM), a row's input and output both its own (no sort, no pairs); else 0.
  int dense_rows = 0;
  const float* bias = nullptr;  // [N], added to a product (not GLU); may be null
};

// Block (tile, column block): a GM-row tile of one matrix's pairs x 64 outputs
// (more rows a block: each weight decoded once for more of them), warp w the
// rows 16 w.. of all 64 columns; 256 / GM blocks an SM. GLU: a = x16 by the
// pair's token, out = SwiGLU(gate, up) at the sorted row; else a = the sorted
// rows (the SwiGLU's, rounded), out at the pair's row.
template <bool GLU, int GM>
constexpr size_t grouped_smem() {
  return size_t(GM + (GLU ? 2 : 1) * kGN) * kGS * 2 + size_t(2 * GM) * 4;
}

template <GgmlType T, bool GLU, int GM>
__global__ void __launch_bounds__(2 * GM, GM >= 256 ? 1 : 256 / GM) grouped_gemm(GemmArgs g) {
  constexpr int NM = GLU ? 2 : 1, kThreads = 2 * GM;
  // As [GM][kGS], Bs [NM][kGN][kGS] halves, then src, dst [GM] (dynamic: 57 KB at 256 rows).
  extern __shared__ __align__(16) uint8_t smem[];
  __half* As = reinterpret_cast<__half*>(smem);
  __half* const Bs = As + GM * kGS;  // matrix m's at Bs + m kGN kGS
  int32_t* src = reinterpret_cast<int32_t*>(As + (GM + NM * kGN) * kGS);
  int32_t* dst = src + GM;
  wait_for_inputs();
  const int ti = int(blockIdx.x);
  int j = 0, r0 = ti * GM, rc = 0;
  if (g.dense_rows > 0) {
    rc = min(GM, g.dense_rows - r0);
  } else {
    if (ti >= g.tiles[g.n_held]) return;
    int lo = 0, hi = g.n_held;  // the last j with tiles[j] <= ti (its tiles hold ti)
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (g.tiles[mid] <= ti) lo = mid;
      else hi = mid;
    }
    j = lo;
    r0 = g.offsets[j] + (ti - g.tiles[j]) * GM;
    rc = min(GM, g.offsets[j + 1] - r0);
  }
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid < GM) {
    if (g.dense_rows > 0) {
      src[tid] = dst[tid] = tid < rc ? r0 + tid : -1;
    } else {
      src[tid] = tid < rc ? (GLU ? g.rows[r0 + tid] : r0 + tid) : -1;
      dst[tid] = tid < rc ? (GLU ? r0 + tid : g.pairs[r0 + tid]) : -1;
    }
  }
  __syncthreads();
  const int n0 = int(blockIdx.y) * kGN;
  const int gq = lane >> 2, c4 = lane & 3;
  float acc[NM][8][4] = {};
  for (int k0 = 0; k0 < g.K; k0 += kGK) {
#pragma unroll
    for (int q = 0; q < GM * kGK / 8 / kThreads; ++q) {
      const int id = tid + kThreads * q, r = id / (kGK / 8), c = id % (kGK / 8) * 8;
      const int s = src[r];
      const uint4 v = s >= 0 ? *reinterpret_cast<const uint4*>(g.a + int64_t(s) * g.lda + k0 + c) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(As + r * kGS + c) = v;
    }
    // Units (matrix bm, weight row bn, 32-value part bh of the chunk), a
    // fixed count a thread (their loads issued together).
    constexpr int kParts = kGK / 32, kUnits = NM * kParts * kGN;
#pragma unroll
    for (int i = 0; i < (kUnits + kThreads - 1) / kThreads; ++i) {
      const int u = tid + i * kThreads;
      if (kUnits % kThreads != 0 && u >= kUnits) break;
      const int bm = u / (kParts * kGN), bn = (u / kParts) % kGN, bh = u % kParts;
      const uint8_t* wrow = (bm == 0 ? g.w0 : g.w1) + uint64_t(j) * g.mat_bytes + uint64_t(n0 + bn) * g.row_bytes;
      // 32 values of one block (K is a multiple of 32: resident_experts_apply).
      float v[32];
      if (n0 + bn < g.N && k0 + 32 * bh < g.K) {
        deq32<T>(wrow, k0 + 32 * bh, v);
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) v[e] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 32; i += 8) {
        // Two values a conversion (each rounded to nearest, as __float2half_rn).
        __align__(16) __half2 h[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) h[e] = __floats2half2_rn(v[i + 2 * e], v[i + 2 * e + 1]);
        *reinterpret_cast<uint4*>(Bs + (bm * kGN + bn) * kGS + 32 * bh + i) = *reinterpret_cast<const uint4*>(h);
      }
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kGK / 16; ++ks) {
      uint32_t a[4];
      ldsm_x4(a, As + (16 * warp + (lane & 15)) * kGS + (lane >> 4) * 8 + 16 * ks);
#pragma unroll
      for (int m = 0; m < NM; ++m)
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t b[4];
          ldsm_x4(b, Bs + (m * kGN + 16 * np + (lane & 7) + (lane >> 4) * 8) * kGS + ((lane >> 3) & 1) * 8 + 16 * ks);
          mma(acc[m][2 * np], a, b[0], b[1]);
          mma(acc[m][2 * np + 1], a, b[2], b[3]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + gq + 8 * half;
    if (r >= rc) continue;
    const float s = g.inv[src[r]];
    float* out = g.out + int64_t(dst[r]) * g.ldo;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = n0 + 8 * jj + 2 * c4 + e;
        if (n >= g.N) continue;
        const float v0 = acc[0][jj][2 * half + e] * s;
        if constexpr (GLU)
          out[n] = swiglu_value(v0, acc[NM - 1][jj][2 * half + e] * s);
        else
          out[n] = g.bias ? v0 + g.bias[n] : v0;
      }
  }
}

// grouped_gemm<T, GLU, gm> over grid (tiles, column blocks): the kernel's
// template arguments from the weights' type, GLU (gate and up: g.w1 set) and
// the rows a tile (64, 128 or 256).
void launch_grouped_gemm(GgmlType t, int gm, dim3 grid, const GemmArgs& g, cudaStream_t s) {
  with_type(t, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    auto go = [&](auto glu, auto rows) {
      constexpr bool G = decltype(glu)::value;
      constexpr int GM = decltype(rows)::value;
      constexpr size_t smem = grouped_smem<G, GM>();
      allow_shared_memory<grouped_gemm<T, G, GM>>(smem);
      launch(grouped_gemm<T, G, GM>, grid, 2 * GM, smem, s, g);
    };
    auto by_rows = [&](auto glu) {
      if (gm == 64) go(glu, std::integral_constant<int, 64>{});
      else if (gm == 128) go(glu, std::integral_constant<int, 128>{});
      else go(glu, std::integral_constant<int, 256>{});
    };
    if (g.w1) by_rows(std::true_type{});
    else by_rows(std::false_type{});
  });
}

std::atomic<uint64_t> g_runs{0};

// Workspace layout (bytes from its start).
struct Layout {
  uint64_t x16, inv_x, xq, xd, offsets, tiles, rows, pairs, h, hq, hd, h16, inv_h, total;
  Layout(const ResidentExperts& e, int64_t n_tok) {
    const uint64_t np = uint64_t(n_tok) * uint64_t(e.nu), ne = uint64_t(e.n_embd), nf = uint64_t(e.n_ff);
    uint64_t o = 0;
    auto take = [&](uint64_t b) {
      const uint64_t at = o;
      o += al(b);
      return at;
    };
    x16 = take(uint64_t(n_tok) * uint64_t(kpad(e.n_embd)) * 2);
    inv_x = take(uint64_t(n_tok) * 4);
    xq = take(uint64_t(n_tok) * ne);
    xd = take(uint64_t(n_tok) * (ne / 32) * 4);
    offsets = take(uint64_t(e.n_held + 1) * 4);
    tiles = take(uint64_t(e.n_held + 1) * 4);
    rows = take(np * 4);
    pairs = take(np * 4);
    h = take(np * nf * 4);
    hq = take(np * nf);
    hd = take(np * (nf / 32) * 4);
    h16 = take(np * uint64_t(kpad(e.n_ff)) * 2);
    inv_h = take(np * 4);
    total = o;
  }
};

bool block_type(GgmlType t) { return cuda_type(t) && act_block(t) > 0 && t != GgmlType::F16 && t != GgmlType::BF16; }

}  // namespace

bool resident_experts_apply(const ResidentExperts& e) {
  for (int m = 0; m < 3; ++m)
    if (!block_type(e.type[m])) return false;
  return e.type[0] == e.type[1] && e.n_held > 0 && e.n_held <= kResidentMaxHeld &&
         e.n_embd % act_block(e.type[0]) == 0 && e.n_ff % act_block(e.type[2]) == 0;
}

uint64_t resident_experts_workspace(const ResidentExperts& e, int64_t max_tokens) {
  return Layout(e, max_tokens).total;
}

void run_resident_experts(const ResidentExperts& e, const float* x, int64_t n_tokens, const int32_t* ids,
                          float* ypairs, void* workspace, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  auto* ws = static_cast<uint8_t*>(workspace);
  const Layout L(e, n_tokens);
  const int64_t np = n_tokens * e.nu;
  auto* x16 = reinterpret_cast<__half*>(ws + L.x16);
  auto* inv_x = reinterpret_cast<float*>(ws + L.inv_x);
  auto* offsets = reinterpret_cast<int32_t*>(ws + L.offsets);
  auto* tiles = reinterpret_cast<int32_t*>(ws + L.tiles);
  auto* rows = reinterpret_cast<int32_t*>(ws + L.rows);
  auto* pairs = reinterpret_cast<int32_t*>(ws + L.pairs);
  auto* h = reinterpret_cast<float*>(ws + L.h);
  auto* h16 = reinterpret_cast<__half*>(ws + L.h16);
  auto* inv_h = reinterpret_cast<float*>(ws + L.inv_h);
  rows_to_f16(x, e.n_embd, n_tokens, e.n_embd, kpad(e.n_embd), act_block(e.type[0]),
              reinterpret_cast<int8_t*>(ws + L.xq), reinterpret_cast<float*>(ws + L.xd), x16, inv_x, s);
  // Tiles of 64 rows where the experts average 48 rows or fewer (512-token
  // steps: V2-Lite 48 an expert, V3 16), 256 where they average 160 or more
  // (V2-Lite's 2048 tokens: 192), else 128: each weight is decoded once a
  // tile, and decoding, not the products, bounds the kernel. H200, every
  // expert busy, prefill tok/s from 128-row tiles: 512 tokens V2-Lite 6249 ->
  // 7064 with 64, V3-5L 4432 -> 5049; 2048 tokens V2-Lite 8635 -> 9278 with
  // 256 (7763 with 64), V3-5L (64 an expert) 8789 -> 8561 with 64 and 7680
  // with 256. The average is all the host knows: when a few experts take most
  // rows (random weights' own routing) 64 loses at 512 (9910 -> 8402).
  const int gm = np <= 48 * e.n_held ? 64 : np >= 160 * e.n_held ? 256 : 128;
  launch(sort_pairs, 1, 1024, size_t(2 * e.n_held) * 4, s, ids, np, int(e.nu), e.slots, e.n_slots, int(e.n_held), gm,
         offsets, tiles, rows, pairs);
  check_launch("cuda.moe_experts (grouped: pairs by expert)", stream);
  // The most tiles a step can have: every matrix's last tile partial.
  const unsigned max_tiles = unsigned(ceil_div(np, gm) + std::min<int64_t>(e.n_held, np));
  GemmArgs g;
  g.offsets = offsets;
  g.tiles = tiles;
  g.rows = rows;
  g.pairs = pairs;
  g.n_held = int(e.n_held);
  g.a = x16;
  g.inv = inv_x;
  g.lda = kpad(e.n_embd);
  g.w0 = e.w[0];
  g.w1 = e.w[1];
  g.row_bytes = e.row_bytes[0];
  g.mat_bytes = e.mat_bytes[0];
  g.K = int(e.n_embd);
  g.N = int(e.n_ff);
  g.out = h;
  g.ldo = e.n_ff;
  // One projection over every tile (gate and up: w1 set): a warp per 16 rows of a tile.
  launch_grouped_gemm(e.type[0], gm, dim3(max_tiles, unsigned(ceil_div(e.n_ff, kGN))), g, s);
  check_launch("cuda.moe_experts (grouped: gate and up)", stream);
  // The SwiGLU's rows for down, as the tile path rounds a product's input; rows
  // past the step's pairs hold stale values nobody reads.
  rows_to_f16(h, e.n_ff, np, e.n_ff, kpad(e.n_ff), act_block(e.type[2]), reinterpret_cast<int8_t*>(ws + L.hq),
              reinterpret_cast<float*>(ws + L.hd), h16, inv_h, s);
  g.a = h16;
  g.inv = inv_h;
  g.lda = kpad(e.n_ff);
  g.w0 = e.w[2];
  g.w1 = nullptr;
  g.row_bytes = e.row_bytes[2];
  g.mat_bytes = e.mat_bytes[2];
  g.K = int(e.n_ff);
  g.N = int(e.n_embd);
  g.out = ypairs;
  g.ldo = e.n_embd;
  launch_grouped_gemm(e.type[2], gm, dim3(max_tiles, unsigned(ceil_div(e.n_embd, kGN))), g, s);
  check_launch("cuda.moe_experts (grouped: down)", stream);
  g_runs.fetch_add(1, std::memory_order_relaxed);
}

uint64_t resident_experts_runs() { return g_runs.load(std::memory_order_relaxed); }

bool decoded_gemm_applies(GgmlType t, int64_t K) { return block_type(t) && K % 32 == 0; }

int64_t decoded_k_pad(int64_t K) { return kpad(K); }

void run_decoded_gemm(GgmlType t, const uint8_t* w0, const uint8_t* w1, uint64_t row_bytes, int64_t K, int64_t N,
                      const __half* a, const float* inv, int64_t rows, float* y, int64_t ldy, const float* bias,
                      cudaStream_t s) {
  if (rows <= 0) return;
  // Rows a block: each weight is decoded once a tile of rows, so the most
  // that still leaves two blocks an SM to hide the decoding's loads.
  const int64_t col_blocks = ceil_div(N, kGN);
  int dev = 0;
  cudaGetDevice(&dev);
  const int64_t sms = sm_count(dev);
  int gm = 64;
  for (int c : {256, 128})
    if (rows >= c * 3 / 4 && ceil_div(rows, c) * col_blocks >= 2 * sms) {
      gm = c;
      break;
    }
  GemmArgs g;
  g.a = a;
  g.inv = inv;
  g.lda = kpad(K);
  g.w0 = w0;
  g.w1 = w1;
  g.row_bytes = row_bytes;
  g.K = int(K);
  g.N = int(N);
  g.out = y;
  g.ldo = ldy;
  g.dense_rows = int(rows);
  g.bias = w1 ? nullptr : bias;
  launch_grouped_gemm(t, gm, dim3(unsigned(ceil_div(rows, gm)), unsigned(col_blocks)), g, s);
  check_launch("cuda matmul (weights decoded in the GEMM)", s);
}

}  // namespace kt::cuda
