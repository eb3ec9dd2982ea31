// ggml's CPU rounding of activations to 8-bit blocks, one warp per block,
// with the float operations of kernels/cpu/ops_ref_basic.cpp (round_block_q8_0,
// round_block_q8_k) so the GPU's rounded activations are the reference's bits.
#pragma once

#include "kernels/cuda/cuda_common.cuh"

namespace kt::cuda {

__device__ __forceinline__ int warp_min(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// quantize_row_q8_0_ref over the warp's 32 values (lane j holds value j):
// scale amax / 127 stored as fp16 (*d16), q = round(x / scale) half away from zero.
__device__ __forceinline__ int round_q8_0_warp(float v, float* d16) {
  const float amax = warp_max(fabsf(v));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  *d16 = round_f16(d);
  return int(roundf(__fmul_rn(v, id)));
}

// quantize_row_q8_K_ref over the warp's 256 values (lane l holds values
// 8l..8l+7): the value of largest magnitude (the first one on ties) becomes
// -127; the others round to nearest even and clamp at 127. Returns the float
// scale (0 for an all-zero block, whose q are 0).
__device__ __forceinline__ float round_q8_k_warp(const float v[8], int q[8]) {
  const int lane = threadIdx.x & 31;
  float amax = 0.0f, first_v = 0.0f;
  int first = 8;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (fabsf(v[k]) > amax) {
      amax = fabsf(v[k]);
      first = k;
      first_v = v[k];
    }
  }
  const float gmax = warp_max(amax);
  const int idx = warp_min(amax == gmax && first < 8 ? 8 * lane + first : 1 << 30);
  if (gmax == 0.0f || idx == (1 << 30)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) q[k] = 0;
    return 0.0f;
  }
  const float max = __shfl_sync(0xffffffffu, first_v, idx / 8);
  const float iscale = __fdiv_rn(-127.0f, max);
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = int(fminf(127.0f, rintf(__fmul_rn(iscale, v[k]))));
  return __fdiv_rn(1.0f, iscale);
}

// Eight 8-bit values q[0..7] (each in [-128, 127]) to dst (8-byte aligned) as one 8-byte store.
__device__ __forceinline__ void store_q8x8(const int q[8], int8_t* dst) {
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    lo |= uint32_t(uint8_t(int8_t(q[k]))) << (8 * k);
    hi |= uint32_t(uint8_t(int8_t(q[k + 4]))) << (8 * k);
  }
  *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
}

// One activation block of `act` values (32: Q8_0, 256: Q8_K) at xb rounded by
// the warp into q[0, act) and its scale *d (lane 0 writes it); q 8-byte
// aligned. What quantize_q8 (a kernel before a product) and add_rms_norm's
// rounded output (the row rounded where it is written) share.
__device__ __forceinline__ void round_block_q8_warp(const float* __restrict__ xb, int act, int8_t* __restrict__ q,
                                                    float* __restrict__ d) {
  const int lane = threadIdx.x & 31;
  if (act == 32) {
    float d16;
    const int v = round_q8_0_warp(xb[lane], &d16);
    q[lane] = int8_t(v);
    if (lane == 0) *d = d16;
    return;
  }
  float v[8];
  int qi[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = xb[8 * lane + k];
  const float dk = round_q8_k_warp(v, qi);
  store_q8x8(qi, q + 8 * lane);
  if (lane == 0) *d = dk;
}

}  // namespace kt::cuda
