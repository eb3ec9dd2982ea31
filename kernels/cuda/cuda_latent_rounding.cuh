// MLA's latents rounded as kv_b's (v_b's) products see them (ops_ref.h
// round_activations), shared by the split attention kernel (a tile's rows, in
// place) and the launches that round a step's latents once for all its blocks
// (cuda_attention.cu round_latent_rows, cuda_mla.cu mla_prepare_one): the same
// function on the same floats, so the same bits either way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_rounding.cuh"

namespace kt::cuda {

// A cache element (float, __half or __nv_bfloat16) as a float.
template <class E>
__device__ __forceinline__ float to_f(E v) {
  if constexpr (std::is_same_v<E, float>)
    return v;
  else if constexpr (std::is_same_v<E, __half>)
    return __half2float(v);
  else
    return __bfloat162float(v);
}

// MLA's latents as kv_b's products see them (ops_ref.h round_activations):
// mode 1 F16, 2 BF16, 3 Q8_0 blocks, 4 Q8_K blocks; rows [0, n_rows) of r
// values. Modes 1 and 2 round in place; modes 3 and 4 hand each lane's 8-bit
// values and their block's scale to put(row, first column, count, q, d): one
// value a lane for Q8_0, eight for Q8_K.
template <class Put>
__device__ void round_latents(float* ks, int stride, int r, int n_rows, int mode, Put put) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int j = warp; j < n_rows; j += n_warps) {
    float* row = ks + j * stride;
    if (mode == 1 || mode == 2) {
      for (int c = lane; c < r; c += 32) row[c] = mode == 1 ? round_f16(row[c]) : round_bf16(row[c]);
    } else if (mode == 3) {
      for (int b = 0; b < r / 32; ++b) {
        float d16;
        const int q = round_q8_0_warp(row[32 * b + lane], &d16);
        put(j, 32 * b + lane, 1, &q, d16);
      }
    } else if (mode == 4) {
      for (int b = 0; b < r / 256; ++b) {
        float v[8];
        int q[8];
        const float4* p = reinterpret_cast<const float4*>(row + 256 * b + 8 * lane);  // rows are 16-byte aligned
        const float4 lo = p[0], hi = p[1];
        v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        const float d = round_q8_k_warp(v, q);
        put(j, 256 * b + 8 * lane, 8, q, d);
      }
    }
  }
}

// A tile's rows rounded in place: each value becomes d * q.
__device__ inline void round_latents(float* ks, int stride, int r, int n_rows, int mode) {
  round_latents(ks, stride, r, n_rows, mode, [&](int j, int c, int n, const int* q, float d) {
    float* x = ks + j * stride + c;
    if (n == 1) {
      x[0] = __fmul_rn(d, float(q[0]));
      return;
    }
    reinterpret_cast<float4*>(x)[0] = make_float4(__fmul_rn(d, float(q[0])), __fmul_rn(d, float(q[1])),
                                                  __fmul_rn(d, float(q[2])), __fmul_rn(d, float(q[3])));
    reinterpret_cast<float4*>(x)[1] = make_float4(__fmul_rn(d, float(q[4])), __fmul_rn(d, float(q[5])),
                                                  __fmul_rn(d, float(q[6])), __fmul_rn(d, float(q[7])));
  });
}

// Rows a block of kRoundThreads rounds at once (round_latent_rows_block).
constexpr int kRoundRows = 8;
constexpr int kRoundThreads = 256;

// A block of kRoundThreads: rows [row0, row0 + kRoundRows) below n_valid of
// cache slot `slot` (rows of r values of E, n_ctx a slot) rounded (mode 3 or
// 4) into out_q (r 8-bit values a row) and out_d (a scale a 32 values: a Q8_K
// block's repeated over its eight). Needs kRoundRows * r floats of dynamic
// shared memory. The split kernel's d * q from them (load_rounded_rows) are the
// bits its in-place rounding of the same rows writes.
template <class E>
__device__ void round_latent_rows_block(const E* __restrict__ cache, int64_t n_ctx, int r, int mode, int64_t slot,
                                        int row0, int n_valid, int8_t* __restrict__ out_q, float* __restrict__ out_d) {
  extern __shared__ float4 round_smem4[];
  float* rows = reinterpret_cast<float*>(round_smem4);  // kRoundRows x r
  if (row0 >= n_valid) return;
  const int nr = min(kRoundRows, n_valid - row0);
  const E* src = cache + (slot * n_ctx + row0) * r;  // nr rows, one after another
  for (int i = threadIdx.x; i < nr * r; i += blockDim.x) rows[i] = to_f(src[i]);
  __syncthreads();
  int8_t* q0 = out_q + int64_t(row0) * r;
  float* d0 = out_d + int64_t(row0) * (r / 32);
  round_latents(rows, r, r, nr, mode, [&](int j, int c, int n, const int* q, float d) {
    int8_t* qj = q0 + int64_t(j) * r + c;
    if (n == 1)
      qj[0] = int8_t(q[0]);
    else
      store_q8x8(q, qj);
    if (c % 32 == 0) d0[int64_t(j) * (r / 32) + c / 32] = d;
  });
}

}  // namespace kt::cuda
