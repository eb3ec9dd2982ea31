// Float dot products of a quantized weight row with a float vector, a 32-value
// sub-block per lane: MLA's one-token q_abs (k_b rows of 128 values) and W_V
// (v_b / kv_b rows of 512), whose activations stay float as the reference
// computes them (no 8-bit rounding). Each weight value is the one deq1 gives
// (the same float operations), so only the order of the sum differs from a
// value-at-a-time loop.
//
// Why: a warp walking one short row with deq1 kept 88-288 bytes in flight and
// decoded every value's block header again (V3's q_abs + W_V: 9.4 MB in 59 us,
// cuda_bench_test). Here L = n / 32 lanes share a row (L a power of two), a warp
// takes 32 / L rows, and each lane loads its sub-block's header and bytes once.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_quant.cuh"

namespace kt::cuda {

// Lanes a row of n values takes (n / 32, a power of two up to 32), or 0 where
// rows of n values do not split that way (callers then keep their own loop).
__host__ __device__ constexpr int dot32_lanes(int64_t n) {
  return n % 32 == 0 && n / 32 >= 1 && n / 32 <= 32 && ((n / 32) & (n / 32 - 1)) == 0 ? int(n / 32) : 0;
}

// Sum over values 32 sb .. 32 sb + 31 of the row of deq1<T>(row, v) * x[v - 32 sb].
// The generic form decodes value by value; the types MLA's weights come in
// (llama.cpp's Q4_K_M / Q6_K / Q8_0 mixes: k_b falls back to Q5_0 / Q8_0 for its
// 128-value rows) read their sub-block once.
template <GgmlType T>
__device__ __forceinline__ float dot32(const uint8_t* row, int sb, const float* __restrict__ x) {
  float acc = 0.0f;
#pragma unroll 8
  for (int k = 0; k < 32; ++k) acc = fmaf(deq1<T>(row, int64_t(sb) * 32 + k), x[k], acc);
  return acc;
}

// The 32 floats x[0..31] (16-byte aligned) as 8 float4 loads.
__device__ __forceinline__ void load_x32(const float* __restrict__ x, float* v) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float4 f = reinterpret_cast<const float4*>(x)[k];
    v[4 * k] = f.x, v[4 * k + 1] = f.y, v[4 * k + 2] = f.z, v[4 * k + 3] = f.w;
  }
}

template <>
__device__ __forceinline__ float dot32<GgmlType::Q8_0>(const uint8_t* row, int sb, const float* __restrict__ x) {
  const uint8_t* b = row + int64_t(sb) * 34;
  const float d = ld_f16(b);
  uint32_t q[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = ld_u32_a2(b + 2 + 4 * k);
  float xv[32];
  load_x32(x, xv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) acc = fmaf(__fmul_rn(float(int8_t(q[k / 4] >> (8 * (k % 4)))), d), xv[k], acc);
  return acc;
}

template <>
__device__ __forceinline__ float dot32<GgmlType::Q4_0>(const uint8_t* row, int sb, const float* __restrict__ x) {
  const uint8_t* b = row + int64_t(sb) * 18;
  const float d = ld_f16(b);
  uint32_t q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) q[k] = ld_u32_a2(b + 2 + 4 * k);
  float xv[32];
  load_x32(x, xv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const uint32_t byte = (q[(k % 16) / 4] >> (8 * (k % 4))) & 0xFF;
    const int v = int(k < 16 ? (byte & 0xF) : (byte >> 4)) - 8;
    acc = fmaf(__fmul_rn(float(v), d), xv[k], acc);
  }
  return acc;
}

template <>
__device__ __forceinline__ float dot32<GgmlType::Q5_0>(const uint8_t* row, int sb, const float* __restrict__ x) {
  const uint8_t* b = row + int64_t(sb) * 22;
  const float d = ld_f16(b);
  const uint32_t qh = ld_u32_a2(b + 2);
  uint32_t q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) q[k] = ld_u32_a2(b + 6 + 4 * k);
  float xv[32];
  load_x32(x, xv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const uint32_t byte = (q[(k % 16) / 4] >> (8 * (k % 4))) & 0xFF;
    const int v = int((k < 16 ? (byte & 0xF) : (byte >> 4)) | (((qh >> k) & 1) << 4)) - 16;
    acc = fmaf(__fmul_rn(float(v), d), xv[k], acc);
  }
  return acc;
}

template <>
__device__ __forceinline__ float dot32<GgmlType::Q4_K>(const uint8_t* row, int sb, const float* __restrict__ x) {
  const uint8_t* b = row + int64_t(sb / 8) * 144;
  const int s = sb % 8;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  uint32_t q[8];  // the 32 bytes whose low (s even) or high (s odd) nibbles are the sub-block
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = ld_u32_a2(b + 16 + 32 * (s / 2) + 4 * k);
  const int sh = 4 * (s % 2);
  float xv[32];
  load_x32(x, xv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const int v = int((q[k / 4] >> (8 * (k % 4) + sh)) & 0xF);
    acc = fmaf(__fsub_rn(__fmul_rn(dl, float(v)), ml), xv[k], acc);
  }
  return acc;
}

template <>
__device__ __forceinline__ float dot32<GgmlType::Q6_K>(const uint8_t* row, int sb, const float* __restrict__ x) {
  const uint8_t* b = row + int64_t(sb / 8) * 210;
  const int s = sb % 8, half = s / 4, k4 = s % 4;
  const float d = ld_f16(b + 208);
  const float d0 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k4]))),
              d1 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k4 + 1])));
  uint32_t lo[8], hi[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    lo[k] = ld_u32_a2(b + 64 * half + 32 * (k4 % 2) + 4 * k);
    hi[k] = ld_u32_a2(b + 128 + 32 * half + 4 * k);
  }
  const int lsh = k4 < 2 ? 0 : 4, hsh = 2 * k4;
  float xv[32];
  load_x32(x, xv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const int l = int((lo[k / 4] >> (8 * (k % 4) + lsh)) & 0xF);
    const int h = int((hi[k / 4] >> (8 * (k % 4) + hsh)) & 3);
    acc = fmaf(__fmul_rn(k < 16 ? d0 : d1, float((l | h << 4) - 32)), xv[k], acc);
  }
  return acc;
}

// The row's sum with x[0 .. 32 L), L lanes a row (dot32_lanes): lane g of the
// row's group takes sub-block g; every lane of the group returns the same sum,
// added in a fixed tree (so any kernel calling it for a row gets its bits).
template <GgmlType T>
__device__ __forceinline__ float row_dot32(const uint8_t* row, const float* __restrict__ x, int L, int g) {
  float v = dot32<T>(row, g, x + 32 * g);
  for (int o = L >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace kt::cuda
