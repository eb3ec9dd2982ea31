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

// n cache elements at src as floats into dst (shared memory, 16-byte
// aligned), the same values as to_f one at a time. Each thread issues its
// 16-byte loads, up to four, before it stores any: a loop of one element a
// thread and iteration waited one memory latency per iteration (V2-Lite's
// mla_prepare_one, ncu on an H200: its rounding blocks took 4 of its 11 us).
// Falls back to that loop where src is not 16-byte aligned.
template <class E>
__device__ __forceinline__ void load_latents(const E* __restrict__ src, int n, float* dst) {
  constexpr int kPer = 16 / int(sizeof(E));  // elements a load
  constexpr int kLoads = 4;
  if ((reinterpret_cast<uintptr_t>(src) & 15) != 0 || n % kPer != 0) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = to_f(src[i]);
    return;
  }
  const int chunks = n / kPer;
  const int step = int(blockDim.x);
  for (int c0 = 0; c0 < chunks; c0 += kLoads * step) {
    uint4 v[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int c = c0 + k * step + int(threadIdx.x);
      if (c < chunks) v[k] = reinterpret_cast<const uint4*>(src)[c];
    }
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int c = c0 + k * step + int(threadIdx.x);
      if (c >= chunks) continue;
      float4* d = reinterpret_cast<float4*>(dst + int64_t(c) * kPer);
      if constexpr (std::is_same_v<E, float>) {
        d[0] = make_float4(__uint_as_float(v[k].x), __uint_as_float(v[k].y), __uint_as_float(v[k].z),
                           __uint_as_float(v[k].w));
      } else {
        const uint32_t w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
        float f[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned short bl = (unsigned short)(w[j] & 0xFFFFu), bh = (unsigned short)(w[j] >> 16);
          if constexpr (std::is_same_v<E, __half>) {
            f[2 * j] = to_f(__ushort_as_half(bl));
            f[2 * j + 1] = to_f(__ushort_as_half(bh));
          } else {
            f[2 * j] = to_f(__ushort_as_bfloat16(bl));
            f[2 * j + 1] = to_f(__ushort_as_bfloat16(bh));
          }
        }
        d[0] = make_float4(f[0], f[1], f[2], f[3]);
        d[1] = make_float4(f[4], f[5], f[6], f[7]);
      }
    }
  }
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
  load_latents(src, nr * r, rows);
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
