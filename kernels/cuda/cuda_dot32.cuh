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

// x[0 .. 32) into registers (x 16-byte aligned, read as 8 float4s).
__device__ __forceinline__ void load_x32(const float* __restrict__ x, float (&xv)[32]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float4 f = reinterpret_cast<const float4*>(x)[k];
    xv[4 * k] = f.x, xv[4 * k + 1] = f.y, xv[4 * k + 2] = f.z, xv[4 * k + 3] = f.w;
  }
}

// Sum over values 32 sb .. 32 sb + 31 of the row of deq1<T>(row, v) * xv[v - 32 sb],
// in order, the activations in registers (a lane that takes several rows
// against the same 32 values loads them once). The generic form takes deq32's
// values (deq1's bits, the sub-block's scales decoded once: decoding each value
// alone, unrolled over a group's rows, took 255 registers and spilled); the
// types MLA's weights come in (llama.cpp's Q4_K_M / Q6_K / Q8_0 mixes: k_b falls
// back to Q5_0 / Q8_0 for its 128-value rows) have their own forms below.
template <GgmlType T>
__device__ __forceinline__ float dot32_r(const uint8_t* row, int sb, const float (&xv)[32]) {
  float wv[32];
  deq32<T>(row, int64_t(sb) * 32, wv);
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) acc = fmaf(wv[k], xv[k], acc);
  return acc;
}

// Sum over k < 32 of w(k) * xv[k], in order: the loop every typed form below
// shares, given its k-th value.
template <class W>
__device__ __forceinline__ float sum32(const float (&xv)[32], W w) {
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) acc = fmaf(w(k), xv[k], acc);
  return acc;
}

template <>
__device__ __forceinline__ float dot32_r<GgmlType::Q8_0>(const uint8_t* row, int sb, const float (&xv)[32]) {
  const uint8_t* b = row + int64_t(sb) * 34;
  const float d = ld_f16(b);
  uint32_t q[8];
  load_words<8>(b + 2, q);
  return sum32(xv, [&](int k) { return __fmul_rn(float(int8_t(byte_of(q, k))), d); });
}

template <>
__device__ __forceinline__ float dot32_r<GgmlType::Q4_0>(const uint8_t* row, int sb, const float (&xv)[32]) {
  const uint8_t* b = row + int64_t(sb) * 18;
  const float d = ld_f16(b);
  uint32_t q[4];
  load_words<4>(b + 2, q);
  return sum32(xv, [&](int k) {
    const uint32_t byte = byte_of(q, k % 16);
    return __fmul_rn(float(int(k < 16 ? (byte & 0xF) : (byte >> 4)) - 8), d);
  });
}

template <>
__device__ __forceinline__ float dot32_r<GgmlType::Q5_0>(const uint8_t* row, int sb, const float (&xv)[32]) {
  const uint8_t* b = row + int64_t(sb) * 22;
  const float d = ld_f16(b);
  const uint32_t qh = ld_u32_a2(b + 2);
  uint32_t q[4];
  load_words<4>(b + 6, q);
  return sum32(xv, [&](int k) {
    const uint32_t byte = byte_of(q, k % 16);
    return __fmul_rn(float(int((k < 16 ? (byte & 0xF) : (byte >> 4)) | (((qh >> k) & 1) << 4)) - 16), d);
  });
}

template <>
__device__ __forceinline__ float dot32_r<GgmlType::Q4_K>(const uint8_t* row, int sb, const float (&xv)[32]) {
  const uint8_t* b = row + int64_t(sb / 8) * 144;
  const int s = sb % 8;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  uint32_t q[8];  // the 32 bytes whose low (s even) or high (s odd) nibbles are the sub-block
  load_words<8>(b + 16 + 32 * (s / 2), q);
  const int sh = 4 * (s % 2);
  return sum32(xv, [&](int k) { return __fsub_rn(__fmul_rn(dl, float((byte_of(q, k) >> sh) & 0xF)), ml); });
}

template <>
__device__ __forceinline__ float dot32_r<GgmlType::Q6_K>(const uint8_t* row, int sb, const float (&xv)[32]) {
  const uint8_t* b = row + int64_t(sb / 8) * 210;
  const int s = sb % 8, half = s / 4, k4 = s % 4;
  const float d = ld_f16(b + 208);
  const float d0 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k4]))),
              d1 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k4 + 1])));
  uint32_t lo[8], hi[8];
  load_words<8>(b + 64 * half + 32 * (k4 % 2), lo);
  load_words<8>(b + 128 + 32 * half, hi);
  const int lsh = k4 < 2 ? 0 : 4, hsh = 2 * k4;
  return sum32(xv, [&](int k) {
    const int v = int((byte_of(lo, k) >> lsh) & 0xF) | int((byte_of(hi, k) >> hsh) & 3) << 4;
    return __fmul_rn(k < 16 ? d0 : d1, float(v - 32));
  });
}

// row_dot32 with lane g's 32 values in registers (xv = x[32 g .. 32 g + 32)):
// the same sum, for a lane that takes several rows against one x.
template <GgmlType T>
__device__ __forceinline__ float row_dot32_r(const uint8_t* row, const float (&xv)[32], int L, int g) {
  float v = dot32_r<T>(row, g, xv);
  for (int o = L >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sums of GR rows (row, row + row_bytes, ...) with x[0 .. 32 L), L lanes a
// row (dot32_lanes): lane g of the row's group takes sub-block g of each, its
// 32 values of x loaded once for all of them; every lane of the group gets
// each row's sum, added in a fixed tree (so any kernel calling it for a row
// gets its bits, whatever GR). The whole warp must call it.
template <GgmlType T, int GR>
__device__ __forceinline__ void rows_dot32(const uint8_t* row, uint64_t row_bytes, const float* __restrict__ x, int L,
                                           int g, float (&sum)[GR]) {
  float xv[32];
  load_x32(x + 32 * g, xv);
#pragma unroll
  for (int j = 0; j < GR; ++j) sum[j] = row_dot32_r<T>(row + uint64_t(j) * row_bytes, xv, L, g);
}

// One row's sum (rows_dot32 of one row).
template <GgmlType T>
__device__ __forceinline__ float row_dot32(const uint8_t* row, const float* __restrict__ x, int L, int g) {
  float sum[1];
  rows_dot32<T, 1>(row, 0, x, L, g, sum);
  return sum[0];
}

}  // namespace kt::cuda
