// The device kernels of cuda_mla.cu (the CudaMla op there launches them): step 1
// (q_abs: for a prompt's tokens, split across groups of rows, and for one
// token with the rope, the cache store and the latent rounding in one launch,
// mla_prepare_one) and step 3 (out = W_V o_lat, a prompt's and one token's).
// Device code for that one translation unit, as cuda_matmul_vector.cuh is for
// cuda_matmul.cu.
#pragma once

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_dot32.cuh"
#include "kernels/cuda/cuda_latent_rounding.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_rope.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace kt::cuda {

namespace {

constexpr int kTok = 8;  // tokens sharing one decode of a weight value

struct MlaDims {
  int H, dn, dr, dv, r;
};

// Block (c range, head h, tokens t0..t0+7): qcat[t][h][c] = sum_j W_K_h[j][c]
// q_nope[t][h][j] for c < r, q_pe for c in [r, r + dr). W_K_h[j][c] is kv_b
// row h (dn + dv) + j, column c: threads along c read along kv_b's rows, and
// kQabsSplit groups of them take a share of the rows j each, summed in a
// fixed order at the end (one group walking all dn rows left the GPU with 80
// blocks of 4 warps: 74-84 us a V2-Lite layer, ncu on the H100).
constexpr int kQabsSplit = 8;
template <GgmlType T>
__global__ void __launch_bounds__(128 * kQabsSplit) mla_q_abs(const float* __restrict__ q, int64_t n_tok, MlaDims m,
                                                               const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                               float* __restrict__ qcat) {
  __shared__ float part[kQabsSplit - 1][kTok][128];
  const int c = blockIdx.x * 128 + threadIdx.x, g = threadIdx.y;
  const int h = blockIdx.y;
  // The head's dn rows of W_K, which every block of the head reads a column of.
  if (blockIdx.x == 0 && blockIdx.z == 0 && threadIdx.x == 0 && g == 0)
    prefetch_l2(w + uint64_t(h) * (m.dn + m.dv) * row_bytes, uint64_t(m.dn) * row_bytes);
  wait_for_inputs();
  const int64_t t0 = int64_t(blockIdx.z) * kTok;
  const int nt = int(n_tok - t0 < kTok ? n_tok - t0 : kTok);
  const int64_t qs = int64_t(m.H) * (m.dn + m.dr), qc = m.r + m.dr;
  const float* qh = q + t0 * qs + int64_t(h) * (m.dn + m.dr);
  float* out = qcat + (t0 * m.H + h) * qc + c;
  float acc[kTok];
#pragma unroll
  for (int t = 0; t < kTok; ++t) acc[t] = 0.0f;
  if (c < m.r) {
    const int per = (m.dn + kQabsSplit - 1) / kQabsSplit;
    const int j0 = g * per, j1 = j0 + per < m.dn ? j0 + per : m.dn;
#pragma unroll 4
    for (int j = j0; j < j1; ++j) {
      const float wv = deq1<T>(w + (uint64_t(h) * (m.dn + m.dv) + j) * row_bytes, c);
#pragma unroll
      for (int t = 0; t < kTok; ++t)
        if (t < nt) acc[t] = fmaf(wv, qh[t * qs + j], acc[t]);
    }
  }
  if (g > 0) {
#pragma unroll
    for (int t = 0; t < kTok; ++t) part[g - 1][t][threadIdx.x] = acc[t];
  }
  __syncthreads();
  if (g != 0) return;
  if (c < m.r) {
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      float s = acc[t];
      for (int k = 0; k < kQabsSplit - 1; ++k) s += part[k][t][threadIdx.x];
      if (t < nt) out[t * m.H * qc] = s;
    }
  } else if (c < m.r + m.dr) {
    for (int t = 0; t < nt; ++t) out[t * m.H * qc] = qh[t * qs + m.dn + (c - m.r)];
  }
}

// The same from k_b, whose row (c, h) holds W_K_h[.][c] (dn values): one warp
// per (h, c), lanes along the row, so a warp reads whole blocks of it (a
// thread per c walking its own row took 3x longer: scattered reads, one value
// decoded at a time). Rows c in [r, r + dr) copy q_pe. NT: tokens a block
// takes (kTok, or 1 for decode: no predicated work for absent tokens, 5 rather
// than 40 shuffles a warp).
template <GgmlType T, int NT>
__global__ void __launch_bounds__(128) mla_q_abs_split(const float* __restrict__ q, int64_t n_tok, MlaDims m,
                                                       const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                       uint64_t mat_bytes, float* __restrict__ qcat) {
  const int lane = threadIdx.x & 31;
  const int qc = m.r + m.dr;
  const int64_t row = int64_t(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (row < int64_t(m.H) * qc && row % qc < m.r && lane == 0 && blockIdx.y == 0)
    prefetch_l2(w + uint64_t(row / qc) * mat_bytes + uint64_t(row % qc) * row_bytes, row_bytes);
  wait_for_inputs();
  if (row >= int64_t(m.H) * qc) return;
  const int h = int(row / qc), c = int(row % qc);
  const int64_t t0 = int64_t(blockIdx.y) * NT;
  const int nt = int(n_tok - t0 < NT ? n_tok - t0 : NT);
  const int64_t qs = int64_t(m.H) * (m.dn + m.dr);
  const float* qh = q + t0 * qs + int64_t(h) * (m.dn + m.dr);
  float* out = qcat + (t0 * m.H + h) * qc + c;
  if (c >= m.r) {
    if (lane < nt) out[int64_t(lane) * m.H * qc] = qh[lane * qs + m.dn + (c - m.r)];
    return;
  }
  const uint8_t* wr = w + uint64_t(h) * mat_bytes + uint64_t(c) * row_bytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  for (int j = lane; j < m.dn; j += 32) {
    const float wv = deq1<T>(wr, j);
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (t < nt) acc[t] = fmaf(wv, qh[t * qs + j], acc[t]);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float sum = warp_sum(acc[t]);
    if (lane == 0 && t < nt) out[int64_t(t) * m.H * qc] = sum;
  }
}

// Rows of one head a group of L lanes takes in the one-token kernels
// (mla_prepare_one's q_abs, mla_out_one): 1, or kRowsAGroup where that still
// gives every SM a block (group_rows). Each lane then loads its 32 activations
// once for all of them and has their weight loads in flight together. One row
// a group kept 88-352 bytes in flight a lane and read its activations again
// for every row: ncu on an H200 (each kernel alone), V3's 128 heads, q_abs +
// store 17.7 -> 14.3 us, W_V 13.2 -> 9.3 (V3-5L all-GPU decode 703 / 673 ->
// 722 / 716 tok/s); V2-Lite's 16 heads at four rows (32 and 64 blocks) 10.8 ->
// 12.1 and 4.2 -> 5.5, hence one row there (GR = 1: the code as it was).
constexpr int kRowsAGroup = 4;

// Rows a group for n_rows rows, head_rows a head (a group stays in one head:
// r and d_v, 512 and 128 in every MLA model), at rows_a_block rows a block
// with one row a group.
inline int group_rows(int64_t n_rows, int64_t head_rows, int64_t rows_a_block, int sms) {
  return head_rows % kRowsAGroup == 0 && n_rows / (rows_a_block * kRowsAGroup) >= sms ? kRowsAGroup : 1;
}

// One decoding token's q_abs rows (h, c) from k_b, L = dot32_lanes(dn) lanes a
// row and 32 / L rows a warp (row_dot32: each lane decodes one 32-value
// sub-block once); rows c in [r, r + dr) copy q_pe. mla_prepare_one sums its
// rows the same way, so the two write the same bits.
template <GgmlType T>
__global__ void __launch_bounds__(128) mla_q_abs_one(const float* __restrict__ q, MlaDims m,
                                                     const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                     uint64_t mat_bytes, float* __restrict__ qcat, int L) {
  const int lane = threadIdx.x & 31, g = lane % L;
  const int qc = m.r + m.dr;
  const int64_t row = (int64_t(blockIdx.x) * 4 + (threadIdx.x >> 5)) * (32 / L) + lane / L;
  const bool valid = row < int64_t(m.H) * qc;
  const int h = valid ? int(row / qc) : 0, c = valid ? int(row % qc) : 0;
  if (valid && c < m.r && g == 0) prefetch_l2(w + uint64_t(h) * mat_bytes + uint64_t(c) * row_bytes, row_bytes);
  wait_for_inputs();
  // Every lane sums (the shuffles take the whole warp): rows past the end and
  // q_pe's rows sum row (h, 0) and drop it.
  const float sum = row_dot32<T>(w + uint64_t(h) * mat_bytes + uint64_t(c < m.r ? c : 0) * row_bytes,
                                 q + int64_t(h) * (m.dn + m.dr), L, g);
  if (valid && g == 0) qcat[int64_t(h) * qc + c] = c < m.r ? sum : q[int64_t(h) * (m.dn + m.dr) + m.dn + (c - m.r)];
}

// One decoding token's preparation for cuda.mla_attention_store, in one
// launch: block 0 stores the token's kv_a row into the latent cache
// (mla_store_block), blocks 1 .. H rope head h - 1's q_pe into qcat, and the
// blocks past them take q_abs's rows from k_b (a warp a row (h, c), as
// mla_q_abs_split<T, 1> sums it), all side by side where cuda.rope_mla_store
// and the attention's q_abs were two launches one after the other. qcat holds
// the bits those two would have written. With lat_q, the step's latents are
// rounded once here too (round_latent_rows_block; mode 3 or 4): blocks from
// round_b0 on take the cached rows before the token's, and block 0 its own
// row once it has stored it.
template <GgmlType T, class E, int GR>
__global__ void __launch_bounds__(kStoreThreads)
    mla_prepare_one(const float* __restrict__ q, MlaDims m, const uint8_t* __restrict__ w, uint64_t row_bytes,
                    uint64_t mat_bytes, float* __restrict__ qcat, RopeArgs ra, const __grid_constant__ MlaStore<E> st,
                    const int32_t* __restrict__ slot, const int32_t* __restrict__ pos, int8_t* __restrict__ lat_q,
                    float* __restrict__ lat_d, int round_mode, int round_b0) {
  static_assert(kStoreThreads == kRoundThreads, "one block size for the store and the rounding");
  constexpr int kWarps = kStoreThreads / 32;
  const int lane = threadIdx.x & 31;
  const int b = int(blockIdx.x);
  // q_abs's (h, c) = (row / r, row % r): a warp a row, or with L = dot32_lanes(dn)
  // > 0 a group of L lanes a row (mla_q_abs_one's sums).
  // With L lanes a row, a group takes GR rows (h, c .. c + GR): 1 or kRowsAGroup.
  const int L = dot32_lanes(m.dn), rpw = L ? 32 / L : 1, g = L ? lane % L : 0, nr = L ? GR : 1;
  const int64_t row = ((int64_t(b - 1 - m.H) * kWarps + (threadIdx.x >> 5)) * rpw + (L ? lane / L : 0)) * nr;
  const bool qabs = b > m.H && row < int64_t(m.H) * m.r;
  const uint8_t* wr = qabs ? w + uint64_t(row / m.r) * mat_bytes + uint64_t(row % m.r) * row_bytes : nullptr;
  if (qabs && (L ? g : lane) == 0) prefetch_l2(wr, nr * row_bytes);
  wait_for_inputs();
  const int qc = m.r + m.dr;
  if (lat_q && b >= round_b0) {
    round_latent_rows_block(st.lat, st.n_ctx, m.r, round_mode, slot[0], (b - round_b0) * kRoundRows, pos[0], lat_q,
                            lat_d);
  } else if (b == 0) {
    mla_store_block(st, slot, pos, 0);
    if (lat_q) {
      __syncthreads();  // the row is in the cache; its shared memory is free
      round_latent_rows_block(st.lat, st.n_ctx, m.r, round_mode, slot[0], pos[0], pos[0] + 1, lat_q, lat_d);
    }
  } else if (b <= m.H) {
    const int h = b - 1;
    for (int i = threadIdx.x; i < ra.n_dims / 2; i += blockDim.x)
      rope_pair(ra, pos[0], i, q + int64_t(h) * (m.dn + m.dr) + m.dn, qcat + int64_t(h) * qc + m.r);
  } else if (L) {
    // GR rows a group against one q (rows_dot32: mla_q_abs_one's bits for each).
    // The whole warp shuffles: rows past the end sum row 0 and drop it.
    const int64_t rr = qabs ? row : 0;
    const int h = int(rr / m.r), c = int(rr % m.r);
    float sum[GR];
    rows_dot32<T, GR>(w + uint64_t(h) * mat_bytes + uint64_t(c) * row_bytes, row_bytes, q + int64_t(h) * (m.dn + m.dr),
                      L, g, sum);
    if (qabs && g == 0)
#pragma unroll
      for (int j = 0; j < GR; ++j) qcat[int64_t(h) * qc + c + j] = sum[j];
  } else if (qabs) {
    const int h = int(row / m.r), c = int(row % m.r);
    const float* qh = q + int64_t(h) * (m.dn + m.dr);
    float acc = 0.0f;
    for (int j = lane; j < m.dn; j += 32) acc = fmaf(deq1<T>(wr, j), qh[j], acc);
    const float sum = warp_sum(acc);
    if (lane == 0) qcat[int64_t(h) * qc + c] = sum;
  }
}

// One warp per output row (h, i): out[t][h dv + i] = W_V_h[i] . o_lat[t][h];
// W_V_h[i] is kv_b row h (dn + dv) + dn + i, or v_b row (i, h) (split). NT as
// in mla_q_abs_split.
template <GgmlType T, bool kSplit, int NT>
__global__ void __launch_bounds__(128) mla_out(const float* __restrict__ olat, int64_t n_tok, MlaDims m,
                                                const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                uint64_t mat_bytes, float* __restrict__ out, int64_t out_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * 4 + (threadIdx.x >> 5);
  const bool valid = row < int64_t(m.H) * m.dv;
  const int h = valid ? int(row / m.dv) : 0, i = valid ? int(row % m.dv) : 0;
  const uint8_t* wr = kSplit ? w + uint64_t(h) * mat_bytes + uint64_t(i) * row_bytes
                             : w + (uint64_t(h) * (m.dn + m.dv) + m.dn + i) * row_bytes;
  if (valid && lane == 0 && blockIdx.y == 0) prefetch_l2(wr, row_bytes);
  wait_for_inputs();
  if (!valid) return;
  const int64_t t0 = int64_t(blockIdx.y) * NT;
  const int nt = int(n_tok - t0 < NT ? n_tok - t0 : NT);
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  const float* ol = olat + (t0 * m.H + h) * int64_t(m.r);
#pragma unroll 4
  for (int c = lane; c < m.r; c += 32) {
    const float wv = deq1<T>(wr, c);
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (t < nt) acc[t] = fmaf(wv, ol[int64_t(t) * m.H * m.r + c], acc[t]);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0 && t < nt) out[(t0 + t) * out_stride + int64_t(h) * m.dv + i] = s;
  }
}

// One decoding token's W_V rows (h, i), L = dot32_lanes(r) lanes a row, a
// group of L lanes taking GR rows (h, i .. i + GR; 1 or kRowsAGroup) against
// the same o_lat (rows_dot32); mla_out<T, kSplit, 1>'s rows otherwise. The
// rows of a group follow one another in v_b and in kv_b alike.
template <GgmlType T, bool kSplit, int GR>
__global__ void __launch_bounds__(128) mla_out_one(const float* __restrict__ olat, MlaDims m,
                                                   const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                   uint64_t mat_bytes, float* __restrict__ out, int L) {
  const int lane = threadIdx.x & 31, g = lane % L;
  const int64_t row = ((int64_t(blockIdx.x) * 4 + (threadIdx.x >> 5)) * (32 / L) + lane / L) * GR;
  const bool valid = row < int64_t(m.H) * m.dv;
  const int h = valid ? int(row / m.dv) : 0, i = valid ? int(row % m.dv) : 0;
  const uint8_t* wr = kSplit ? w + uint64_t(h) * mat_bytes + uint64_t(i) * row_bytes
                             : w + (uint64_t(h) * (m.dn + m.dv) + m.dn + i) * row_bytes;
  if (valid && g == 0) prefetch_l2(wr, GR * row_bytes);
  wait_for_inputs();
  float sum[GR];
  rows_dot32<T, GR>(wr, row_bytes, olat + int64_t(h) * m.r, L, g, sum);  // the whole warp shuffles
  if (valid && g == 0)
#pragma unroll
    for (int j = 0; j < GR; ++j) out[int64_t(h) * m.dv + i + j] = sum[j];
}

}  // namespace

}  // namespace kt::cuda
