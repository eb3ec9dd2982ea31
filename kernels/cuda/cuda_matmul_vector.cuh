// The vector paths' kernels of cuda_matmul.cu (MatmulOp's products of one
// token, or a few, per block row): int8 matrix-vector products (one token,
// several tokens, several matrices, gate and up together) and the float ones.
// Device code for that one translation unit, whose dispatch launches them
// (cuda_matmul.h says what each path computes).
#pragma once

#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_rounding.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace kt::cuda {

namespace {

constexpr int kRowsPerBlock = 4;  // one warp per output row

// The weight rows of block bx (rows of them) into L2, issued before the block
// waits for its inputs (cuda_launch.cuh): the weights' first DRAM latency
// passes while the previous kernel still runs.
__device__ __forceinline__ void prefetch_rows(const uint8_t* W, uint64_t row_bytes, int64_t n_out, int rows,
                                              int64_t bx) {
  const int64_t o0 = bx * rows;
  prefetch_l2(W + uint64_t(o0) * row_bytes, uint64_t(min(int64_t(rows), n_out - o0)) * row_bytes);
}

// Block row blockIdx.y's tokens, and the matrix they multiply: with ids, pair p
// = blockIdx.y (one token: x row t0 = p / x_div, y row p) and its matrix
// ids[p], returned (< 0: an expert another device holds, whose rows are
// zero); else nt <= NC tokens from t0 = blockIdx.y NC (x and y rows alike),
// matrix 0. y_row: the block row's first output row. After wait_for_inputs()
// (ids may come from an earlier kernel).
template <int NC>
__device__ __forceinline__ int64_t block_tokens(const int32_t* __restrict__ ids, int64_t x_div, int n_tok,
                                                int64_t& t0, int& nt, int64_t& y_row) {
  if (ids) {
    const int64_t p = blockIdx.y;
    t0 = p / x_div;
    nt = 1;
    y_row = p;
    return ids[p];
  }
  t0 = int64_t(blockIdx.y) * NC;
  nt = min(NC, n_tok - int(t0));
  y_row = t0;
  return 0;
}

// Chunk c's block and its chunk within the block (c >= 0): unsigned 32-bit
// division by a power of two is one shift; the 64-bit form is kept as it was.
template <int L>
__device__ __forceinline__ int chunk_block(int c) { return int(unsigned(c) / L); }
template <int L>
__device__ __forceinline__ int64_t chunk_block(int64_t c) { return c / L; }
template <int L>
__device__ __forceinline__ int chunk_lane(int c) { return int(unsigned(c) % L); }
template <int L>
__device__ __forceinline__ int chunk_lane(int64_t c) { return int(c % L); }

// One warp per R output rows (o0 .. o0 + R - 1); up to NC token rows share each
// weight read. Each row's sum is the same sequence of additions whatever R.
// ids (experts): block row y is pair p, its matrix ids[p], x row p / x_div; a
// pair with ids[p] < 0 (an expert held elsewhere) gets zeros. GLU (the up
// product of experts, or of cuda.matmul_glu's dense rows): y already holds the
// gate products, and each becomes swiglu(gate, this product) in place, so no
// SwiGLU kernel follows (a template parameter: the double exp() in every
// instantiation cost Q6_K's kernel 56 -> 128 registers, and V3-5L's all-GPU
// decode 5%).
// S (staged, one token): the block first copies its kRowsPerBlock * R weight
// rows, one contiguous range, into shared memory with asynchronous copies
// (stage_async; before wait_for_inputs() where the matrix is known), and the
// warps read them from there: the bytes in flight are no longer bounded by the
// registers of the loads in flight. The same sums from the same bytes.
// P (pair; R = 2, one token): W2 is the up matrix of W's type and shape, and
// a warp's two rows are row o of W (gate) and row o of W2 (up), summed as
// above, written as swiglu(gate, up): GLU's bits in one launch, not two (the
// gate's launch, then up's reading it back).
// The body of one block: bx is its block of rows within W (blockIdx.x of
// mmv_int8; mmv_int8_multi's blocks are shared out over several matrices).
template <GgmlType T, int NC, bool GLU, int R, bool S, bool P = false>
__device__ __forceinline__ void mmv_int8_block(const uint8_t* __restrict__ W, const uint8_t* __restrict__ W2,
                                               uint64_t row_bytes, uint64_t mat_bytes, int64_t n_out, int64_t n_in,
                                               const int8_t* __restrict__ xq, const float* __restrict__ xd, int n_tok,
                                               float* __restrict__ y, int64_t ldy, const float* __restrict__ bias,
                                               const int32_t* __restrict__ ids, int64_t x_div, int64_t bx) {
  static_assert(!S || NC == 1);
  static_assert(!P || (R == 2 && NC == 1 && !GLU));
  using Q = Q8Dot<T>;
  constexpr int kAct = Q::kAct == ActBlocks::Q8_0 ? 32 : 256;
  constexpr int kOut = P ? 1 : R;  // output rows a warp
  const int lane = threadIdx.x & 31;
  const int64_t g0 = bx * kRowsPerBlock * kOut;  // the block's first row (of W, and of W2)
  const uint64_t g_bytes = uint64_t(min(int64_t(kRowsPerBlock * kOut), n_out - g0)) * row_bytes;
  // A pair's rows of W2 sit past W's in shared memory (run_int8_glu stages
  // only where a block's rows are a multiple of 16 bytes).
  const uint64_t w2_at = P ? uint64_t(kRowsPerBlock) * row_bytes : 0;
  extern __shared__ __align__(16) uint8_t staged[];
  if constexpr (S) {
    if (!ids) {
      stage_async(staged, W + uint64_t(g0) * row_bytes, g_bytes);
      if constexpr (P) stage_async(staged + w2_at, W2 + uint64_t(g0) * row_bytes, g_bytes);
    }
  } else {
    if (!ids && blockIdx.y == 0 && threadIdx.x == 0) {
      prefetch_rows(W, row_bytes, n_out, kRowsPerBlock * kOut, bx);
      if constexpr (P) prefetch_rows(W2, row_bytes, n_out, kRowsPerBlock, bx);
    }
  }
  wait_for_inputs();
  const int64_t o0 = (bx * kRowsPerBlock + (threadIdx.x >> 5)) * kOut;
  if (!S && o0 >= n_out) return;  // staged: every thread copies and meets the barrier first
  const int nr = o0 >= n_out ? 0 : kOut == 1 ? 1 : int(min(int64_t(R), n_out - o0));
  int64_t t0, y_row;
  int nt;
  const int64_t mat = block_tokens<NC>(ids, x_div, n_tok, t0, nt, y_row);
  y += y_row * ldy;
  if (mat < 0) {  // an expert another device holds: its rows are zero (the whole block returns)
    if (lane == 0)
      for (int r = 0; r < nr; ++r) y[o0 + r] = 0.0f;
    return;
  }
  W += uint64_t(mat) * mat_bytes;
  if constexpr (P) W2 += uint64_t(mat) * mat_bytes;
  const uint8_t* row = W + uint64_t(o0) * row_bytes;
  const uint8_t* row2 = P ? W2 + uint64_t(o0) * row_bytes : nullptr;
  if constexpr (S) {
    if (ids) {
      stage_async(staged, W + uint64_t(g0) * row_bytes, g_bytes);
      if constexpr (P) stage_async(staged + w2_at, W2 + uint64_t(g0) * row_bytes, g_bytes);
    }
    stage_wait();
    if (nr == 0) return;
    row = staged + uint64_t(o0 - g0) * row_bytes;
    if constexpr (P) row2 = staged + w2_at + uint64_t(o0 - g0) * row_bytes;
  }
  const int8_t* xq0 = xq + t0 * n_in;
  const float* xd0 = xd + t0 * (n_in / kAct);
  float acc[R][NC];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NC; ++t) acc[r][t] = 0.0f;
  // 32-bit indices within a row (rows are far below 2^31 bytes): staged, V3's
  // 7168 x 18432 Q4_K 31.1 -> 26.8 us with the branch-free scales; 8 tokens
  // 141 -> 104 us. One token's loads into registers keep 64-bit ones: with
  // 32-bit ones V3's 18432-wide Q6_K rows and IQ4_XS, what takes that path,
  // were slower (54.7 -> 66.0 and 33.7 -> 35.2 us).
  using Idx = std::conditional_t<S || (NC > 1), int, int64_t>;
  const Idx n_chunks = Idx(n_in / Q::kValues) * Q::kLanes;
  // Several chunks' loads in flight per lane: decode is bound by the bytes a
  // warp keeps in flight, not by arithmetic. Measured on an H100 (kernels/cuda/
  // README.md): 4 chunks for the 256-value types (Q4_K 36% -> 49% of the copy
  // bandwidth), 2 for the 32-value ones (4 costs Q8_0 registers: 72% -> 57%).
  constexpr int kUnroll = Q::kValues == 256 ? 4 : 2;
  if constexpr (R == 1) {
#pragma unroll(NC == 1 ? kUnroll : 2)
    for (Idx c = lane; c < n_chunks; c += 32) {
      const Idx b = chunk_block<Q::kLanes>(c);
      const int i = chunk_lane<Q::kLanes>(c);
      const typename Q::W w = Q::load(row + b * Q::kBytes, i);
      const Idx v0 = b * Q::kValues;
#pragma unroll
      for (int t = 0; t < NC; ++t)
        if (t < nt) acc[0][t] += Q::dot(w, i, xq0 + t * n_in + v0, xd0[t * (n_in / kAct) + v0 / kAct]);
    }
  } else {
    // Two rows: both rows' loads before the first product, half the unroll
    // (the same loads in flight a lane). A warp with one row left loads its
    // row twice and keeps one sum. A pair's second row is W2's.
    static_assert(R == 2 && NC == 1);
    const uint8_t* row1 = P ? row2 : nr > 1 ? row + row_bytes : row;
#pragma unroll(kUnroll / 2)
    for (Idx c = lane; c < n_chunks; c += 32) {
      const Idx b = chunk_block<Q::kLanes>(c);
      const int i = chunk_lane<Q::kLanes>(c);
      const typename Q::W w0 = Q::load(row + b * Q::kBytes, i);
      const typename Q::W w1 = Q::load(row1 + b * Q::kBytes, i);
      const Idx v0 = b * Q::kValues;
      const float xd = xd0[v0 / kAct];
      acc[0][0] += Q::dot(w0, i, xq0 + v0, xd);
      acc[1][0] += Q::dot(w1, i, xq0 + v0, xd);
    }
  }
  if constexpr (P) {
    const float g = warp_sum(acc[0][0]), u = warp_sum(acc[1][0]);
    if (lane == 0) y[o0] = swiglu_value(g, u);
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int64_t o = o0 + r;
#pragma unroll
      for (int t = 0; t < NC; ++t) {
        const float s = warp_sum(acc[r][t]);
        if constexpr (GLU) {
          if (lane == 0 && t < nt) y[t * ldy + o] = swiglu_value(y[t * ldy + o], s);
        } else {
          if (lane == 0 && t < nt) y[t * ldy + o] = bias ? s + bias[o] : s;
        }
      }
    }
  }
}

// The matrices of one mmv_int8_multi launch (a kernel parameter: read from
// the parameter bank, indexed by the block's matrix).
struct Products {
  const uint8_t* w[MatmulOp::kMaxProducts];
  float* y[MatmulOp::kMaxProducts];
  const float* bias[MatmulOp::kMaxProducts];
  int64_t n_out[MatmulOp::kMaxProducts];
  int64_t ldy[MatmulOp::kMaxProducts];
  unsigned first_block[MatmulOp::kMaxProducts];
  int n;
};

template <GgmlType T, int NC, bool GLU = false, int R = 1, bool S = false>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    mmv_int8(const uint8_t* __restrict__ W, uint64_t row_bytes, uint64_t mat_bytes, int64_t n_out, int64_t n_in,
             const int8_t* __restrict__ xq, const float* __restrict__ xd, int n_tok, float* __restrict__ y, int64_t ldy,
             const float* __restrict__ bias, const int32_t* __restrict__ ids, int64_t x_div) {
  mmv_int8_block<T, NC, GLU, R, S>(W, nullptr, row_bytes, mat_bytes, n_out, n_in, xq, xd, n_tok, y, ldy, bias, ids,
                                   x_div, blockIdx.x);
}

// Gate and up of one token a block row (experts' pairs by ids, or a single
// row): y = swiglu(x W^T, x W2^T), each warp row o of both (mmv_int8_block's P).
template <GgmlType T, bool S>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    mmv_int8_glu(const uint8_t* __restrict__ W, const uint8_t* __restrict__ W2, uint64_t row_bytes, uint64_t mat_bytes,
                 int64_t n_out, int64_t n_in, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                 float* __restrict__ y, int64_t ldy, const int32_t* __restrict__ ids, int64_t x_div) {
  mmv_int8_block<T, 1, false, 2, S, true>(W, W2, row_bytes, mat_bytes, n_out, n_in, xq, xd, 1, y, ldy, nullptr, ids,
                                          x_div, blockIdx.x);
}

// Products of one input by several matrices of one type and width (q and kv_a,
// or q, k and v: cuda.matmul_multi) in one launch: block x belongs to the last
// matrix whose first block is at or below it. The matrices' sums are mmv_int8's,
// bit for bit.
template <GgmlType T, int NC, int R, bool S = false>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    mmv_int8_multi(const __grid_constant__ Products p, uint64_t row_bytes, int64_t n_in, const int8_t* __restrict__ xq,
                   const float* __restrict__ xd, int n_tok) {
  int m = 0;
  while (m + 1 < p.n && blockIdx.x >= p.first_block[m + 1]) ++m;
  mmv_int8_block<T, NC, false, R, S>(p.w[m], nullptr, row_bytes, 0, p.n_out[m], n_in, xq, xd, n_tok, p.y[m], p.ldy[m],
                                     p.bias[m], nullptr, 1, int64_t(blockIdx.x - p.first_block[m]));
}

// V consecutive weights of a row from value i (V > 1: one 16-byte load).
template <GgmlType T, int V>
__device__ __forceinline__ void load_w(const uint8_t* row, int64_t i, float* w) {
  if constexpr (V == 1) {
    w[0] = deq1<T>(row, i);
  } else if constexpr (T == GgmlType::F32) {
    static_assert(V == 4);
    const float4 v = *reinterpret_cast<const float4*>(row + 4 * i);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else {
    static_assert(V == 8 && (T == GgmlType::F16 || T == GgmlType::BF16));
    const uint4 v = *reinterpret_cast<const uint4*>(row + 2 * i);
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (T == GgmlType::F16) {
        w[2 * k] = f16_bits(uint16_t(u[k] & 0xFFFF));
        w[2 * k + 1] = f16_bits(uint16_t(u[k] >> 16));
      } else {
        w[2 * k] = __uint_as_float(u[k] << 16);
        w[2 * k + 1] = __uint_as_float(u[k] & 0xFFFF0000u);
      }
    }
  }
}

// xround: 0 none, 1 F16, 2 BF16 (ggml's rounding of x for F16/BF16 weights).
__device__ __forceinline__ float round_x(float v, int xround) {
  return xround == 1 ? round_f16(v) : xround == 2 ? round_bf16(v) : v;
}

template <GgmlType T, int NC, int V>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    mmv_float(const uint8_t* __restrict__ W, uint64_t row_bytes, uint64_t mat_bytes, int64_t n_out, int64_t n_in,
              const float* __restrict__ x, int64_t ldx, int n_tok, int xround, float* __restrict__ y, int64_t ldy,
              const float* __restrict__ bias, const int32_t* __restrict__ ids, int64_t x_div) {
  const int lane = threadIdx.x & 31;
  if (!ids && blockIdx.y == 0 && threadIdx.x == 0) prefetch_rows(W, row_bytes, n_out, kRowsPerBlock, blockIdx.x);
  wait_for_inputs();
  const int64_t o = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (o >= n_out) return;
  int64_t t0, y_row;
  int nt;
  const int64_t mat = block_tokens<NC>(ids, x_div, n_tok, t0, nt, y_row);
  y += y_row * ldy;
  if (mat < 0) {  // an expert another device holds: its row is zero
    if (lane == 0) y[o] = 0.0f;
    return;
  }
  W += uint64_t(mat) * mat_bytes;
  const uint8_t* row = W + uint64_t(o) * row_bytes;
  const float* x0 = x + t0 * ldx;
  float acc[NC];
#pragma unroll
  for (int t = 0; t < NC; ++t) acc[t] = 0.0f;
#pragma unroll 2
  for (int64_t i = int64_t(lane) * V; i < n_in; i += 32 * V) {
    float w[V];
    load_w<T, V>(row, i, w);
#pragma unroll
    for (int t = 0; t < NC; ++t) {
      if (t >= nt) continue;
      const float* xt = x0 + t * ldx + i;
      float xv[V];
      if constexpr (V % 4 == 0) {
#pragma unroll
        for (int k = 0; k < V; k += 4) {
          const float4 f = *reinterpret_cast<const float4*>(xt + k);
          xv[k] = f.x, xv[k + 1] = f.y, xv[k + 2] = f.z, xv[k + 3] = f.w;
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) xv[k] = xt[k];
      }
#pragma unroll
      for (int k = 0; k < V; ++k) acc[t] = fmaf(w[k], round_x(xv[k], xround), acc[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < NC; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0 && t < nt) y[t * ldy + o] = bias ? s + bias[o] : s;
  }
}

// One token, few outputs (a router's 64 logits): one block of 128 threads per
// output row, all of them along n_in, so the row's loads are all in flight at
// once; mmv_float's warp per row would walk 2048 values in 8 dependent steps
// with 16 blocks on the GPU (V2-Lite's router, ncu on an H200: 9.1 -> 3.9 us).
template <GgmlType T, int V>
__global__ void __launch_bounds__(128)
    mmv_float_row(const uint8_t* __restrict__ W, uint64_t row_bytes, int64_t n_in, const float* __restrict__ x,
                  int xround, float* __restrict__ y, const float* __restrict__ bias) {
  __shared__ float red[32];
  const int64_t o = blockIdx.x;
  const uint8_t* row = W + uint64_t(o) * row_bytes;
  if (threadIdx.x == 0) prefetch_l2(row, row_bytes);
  wait_for_inputs();
  float acc = 0.0f;
#pragma unroll 4
  for (int64_t i = int64_t(threadIdx.x) * V; i < n_in; i += 128 * V) {
    float w[V];
    load_w<T, V>(row, i, w);
#pragma unroll
    for (int k = 0; k < V; ++k) acc = fmaf(w[k], round_x(x[i + k], xround), acc);
  }
  const float sum = block_sum(acc, red);
  if (threadIdx.x == 0) y[o] = bias ? sum + bias[o] : sum;
}

}  // namespace

}  // namespace kt::cuda
