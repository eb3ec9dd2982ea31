// Device helpers every CUDA kernel file shares: unaligned little-endian loads
// of ggml block fields, the float roundings of ggml's CPU backend (so GPU
// kernels compute what kernels/cpu/ops_ref.h defines), warp reductions; and
// the host's dispatch on a KV cache's element type.
//
// Rounding: nvcc contracts a * b + c into one FMA by default; where a CPU
// reference rounds the product first (x86-64 without -mfma never fuses), the
// kernels spell the operations with __fmul_rn / __fadd_rn so the bits agree.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

// f(E{}) with E the element type of a cache of type t: __half (F16),
// __nv_bfloat16 (BF16), float (anything else: F32).
template <class F>
void with_cache_type(GgmlType t, F&& f) {
  if (t == GgmlType::F16)
    f(__half{});
  else if (t == GgmlType::BF16)
    f(__nv_bfloat16{});
  else
    f(float{});
}

// ---- loads ------------------------------------------------------------------

__device__ __forceinline__ float f16_bits(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ float bf16_bits(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

// A 2-byte-aligned little-endian u16 / u32 (ggml blocks of 18, 22, 34 or 210
// bytes keep only 2-byte alignment for the blocks after the first).
__device__ __forceinline__ uint16_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
  const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
  return uint32_t(q[0]) | (uint32_t(q[1]) << 16);
}
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ float ld_f16(const uint8_t* p) { return f16_bits(ld_u16(p)); }

// N little-endian words from p (2-byte aligned: ggml's blocks after the first).
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t* q) {
#pragma unroll
  for (int k = 0; k < N; ++k) q[k] = ld_u32_a2(p + 4 * k);
}
// Byte k of words q.
__device__ __forceinline__ uint32_t byte_of(const uint32_t* q, int k) { return (q[k / 4] >> (8 * (k % 4))) & 0xFF; }

// float(int(u) - bias) for 0 <= u < 2^22 and small bias, exactly, without a
// conversion instruction (I2F issues at an eighth of the FP32 rate): u in the
// mantissa of 2^23, then 2^23 + bias off, one exact subtraction. Where a GEMM
// decodes weights (deq32) the conversions, not the arithmetic, bounded it.
template <int Bias>
__device__ __forceinline__ float exact_float(uint32_t u) {
  return __uint_as_float(0x4B000000u | u) - float(8388608 + Bias);
}

// ---- roundings of ggml's CPU backend ------------------------------------------

__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// SwiGLU of one gate and up value, in double as the reference
// (kernels/cpu/ops_ref_moe.cpp) takes it.
__device__ __forceinline__ float swiglu_value(float g, float u) {
  const float s = float(double(g) / (1.0 + exp(-double(g))));
  return float(double(s) * double(u));
}

// ---- reductions -------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
// every thread gets the result. scratch: 32 values of shared memory.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

// A row of n values spread over the block, R a thread (value threadIdx.x + k
// blockDim.x), loaded into registers before any is used (a one-block row's
// time is its chain of latencies): v[k] = value(i), w[k] = weight[i] (1 where
// weight is null), both 0 past n. Returns the block's sum of squares in
// double, as the reference's RMSNorm takes it; its barrier also publishes the
// block's earlier shared-memory stores.
template <int R, class Value>
__device__ __forceinline__ double load_values_sum_squares(Value value, const float* __restrict__ weight, int64_t n,
                                                          float (&v)[R], float (&w)[R], double* red) {
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
    v[k] = i < n ? value(i) : 0.0f;
    w[k] = i < n ? (weight ? weight[i] : 1.0f) : 0.0f;
  }
  double ss = 0.0;
#pragma unroll
  for (int k = 0; k < R; ++k) ss += double(v[k]) * double(v[k]);
  return block_sum(ss, red);
}

// The same for the values of a row in memory.
template <int R>
__device__ __forceinline__ double load_row_sum_squares(const float* __restrict__ row,
                                                       const float* __restrict__ weight, int64_t n, float (&v)[R],
                                                       float (&w)[R], double* red) {
  return load_values_sum_squares([row](int64_t i) { return row[i]; }, weight, n, v, w, red);
}

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kt::cuda
