// Tensor-core fragments for float-accurate products (cuda_mla_mma.cu,
// cuda_split_gemm.cu): mma.sync m16n8k16 with f16 operands and f32
// accumulation, ldmatrix loads of its fragments from shared memory, and the
// split of a float into two f16 halves (22 significant bits) that makes each
// product of a split value with an exact f16 value exact in the accumulator.
// Callers scale rows by powers of two (scale_exp) so that the halves stay in
// f16's normal range, and undo the scale on the float results.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace kt::cuda {

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const __half* p) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const __half* p) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// d += a b: a 16x16 (row-major fragment), b 16x8, d 16x8 float.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ __half2 bits_h2(uint32_t u) {
  __half2 h;
  memcpy(&h, &u, 4);
  return h;
}
// x and y (|.| < 2^15) as f16 pairs hi + lo: 22 significant bits.
__device__ __forceinline__ void split2(float x, float y, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(x, y);
  const float2 f = __half22float2(h);
  hi = h2_bits(h);
  lo = h2_bits(__floats2half2_rn(x - f.x, y - f.y));
}
// Four values times sc split into f16 hi and lo halves, stored at hi and lo
// (8-byte aligned): how a row is staged for the products.
__device__ __forceinline__ void split4_store(float4 v, float sc, __half* hi, __half* lo) {
  uint2 h, l;
  split2(v.x * sc, v.y * sc, h.x, l.x);
  split2(v.z * sc, v.w * sc, h.y, l.y);
  *reinterpret_cast<uint2*>(hi) = h;
  *reinterpret_cast<uint2*>(lo) = l;
}
// The largest of mx over GROUP consecutive lanes (a power of two up to 32)
// that stage one row: the row's scale is taken from it.
template <int GROUP>
__device__ __forceinline__ float group_max(float mx) {
#pragma unroll
  for (int o = 1; o < GROUP; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  return mx;
}
// The largest magnitude of a row in memory over this lane's float4s at first,
// first + step, ... below n (none where !valid), then over its GROUP lanes.
template <int GROUP>
__device__ __forceinline__ float row_abs_max(const float* row, int n, int first, int step, bool valid) {
  float mx = 0.0f;
  if (valid)
    for (int c = first; c < n; c += step) {
      const float4 v = *reinterpret_cast<const float4*>(row + c);
      mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
  return group_max<GROUP>(mx);
}
// Four int8 values (a little-endian word) as two f16 pairs, exactly: byte b
// biased to b + 128 becomes the low mantissa bits of 1024 + (b + 128).
__device__ __forceinline__ void i8x4_to_h2(uint32_t w, uint32_t& h01, uint32_t& h23) {
  const uint32_t u = w ^ 0x80808080u;
  const __half2 bias = __floats2half2_rn(1152.0f, 1152.0f);
  h01 = h2_bits(__hsub2(bits_h2(__byte_perm(u, 0x64646464u, 0x4140)), bias));
  h23 = h2_bits(__hsub2(bits_h2(__byte_perm(u, 0x64646464u, 0x4342)), bias));
}

// 2^e for a row whose largest magnitude is mx: the row's largest value lands in
// [2^top, 2^(top + 1)); 0 stays 1. Clamped so that 2^e and 2^-e are normal
// floats.
__device__ __forceinline__ int scale_exp(float mx, int top) {
  return mx > 0.0f ? max(-100, min(100, top - ilogbf(mx))) : 0;
}

}  // namespace kt::cuda
