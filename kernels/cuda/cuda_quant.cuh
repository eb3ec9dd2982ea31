// ggml's weight types on the GPU (layouts: kernels/cpu/quant_blocks.h).
//
// deq1<T>(row, i): value i of a row, decoded alone, with the float operations
// of kernels/cpu/quant_ref_*.cpp (bit-exact: every product there is exact or
// rounded once, see the notes in those files). Used where values are read one
// by one: embedding rows, MLA's kv_b, dequantization to fp16 for tensor cores,
// the float-activation matrix-vector kernel.
//
// Q8Dot<T>: the integer dot product of a weight block with activations that
// were rounded as ggml's CPU backend rounds them (ops_ref.h ActRounding::
// GgmlCpu: 8-bit blocks of 32 with an fp16 scale for the 32-value types, of
// 256 with a float scale for the k-quants and IQ4_XS). Each block splits into
// kLanes chunks that consecutive lanes of a warp read (contiguous bytes, so a
// warp's loads are coalesced); load() reads a chunk's weights into registers
// once and dot() multiplies them with one token's activations (__dp4a: four
// int8 products per instruction), so several tokens share one read of the
// weights. Sums inside a block are exact integers; a block's result is
// x_scale * (w_scale * sum) in float, so the dot product lands within float
// summation noise (~1e-6 relative) of the reference's.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/type_traits.h"

namespace kt::cuda {

static __device__ __constant__ int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                     1,    13,   25,  38,  53,  69,  89,  113};

// Signed int8x4 dot product with accumulate, and bytewise subtraction.
__device__ __forceinline__ int dp4(int a, int b, int c) { return __dp4a(a, b, c); }
__device__ __forceinline__ int sub4(int a, int b) { return int(__vsub4(unsigned(a), unsigned(b))); }

// ggml's get_scale_min_k4 (Q4_K, Q5_K): 6-bit scale and min of sub-block s.
__device__ __forceinline__ void scale_min_k4(const uint8_t* q, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// The same for sub-blocks 2p and 2p+1 at once, from the 12 scale bytes held as
// three little-endian words, without a branch: the lanes of a warp hold every
// p, so a branch on p < 2 ran both sides in every warp (the Q4_K product's
// SASS). Bytes 2(p&1), 2(p&1)+1 of each word hold both sub-blocks' bits: 6-bit
// scale and min in w0 / w1 for p < 2; for p >= 2 the low 4 bits in w2's
// nibbles and the top 2 in the top bits of w0's / w1's bytes.
__device__ __forceinline__ void scale_min_k4_pair(uint32_t w0, uint32_t w1, uint32_t w2, int p, int* sc0, int* m0,
                                                  int* sc1, int* m1) {
  const int sh = 16 * (p & 1);
  const uint32_t h0 = w0 >> sh, h1 = w1 >> sh, h2 = w2 >> sh;
  const uint32_t sc = p < 2 ? h0 & 0x3F3Fu : (h2 & 0x0F0Fu) | ((h0 >> 2) & 0x3030u);
  const uint32_t m = p < 2 ? h1 & 0x3F3Fu : ((h2 >> 4) & 0x0F0Fu) | ((h1 >> 2) & 0x3030u);
  *sc0 = int(sc & 0xFF);
  *sc1 = int((sc >> 8) & 0xFF);
  *m0 = int(m & 0xFF);
  *m1 = int((m >> 8) & 0xFF);
}

// ---- one value at a time -------------------------------------------------------

template <GgmlType T>
__device__ __forceinline__ float deq1(const uint8_t* row, int64_t i);

template <>
__device__ __forceinline__ float deq1<GgmlType::F32>(const uint8_t* row, int64_t i) {
  return reinterpret_cast<const float*>(row)[i];
}
template <>
__device__ __forceinline__ float deq1<GgmlType::F16>(const uint8_t* row, int64_t i) {
  return ld_f16(row + 2 * i);
}
template <>
__device__ __forceinline__ float deq1<GgmlType::BF16>(const uint8_t* row, int64_t i) {
  return bf16_bits(ld_u16(row + 2 * i));
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q8_0>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 32) * 34;
  return __fmul_rn(float(int8_t(b[2 + i % 32])), ld_f16(b));
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q4_0>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 32) * 18;
  const int j = int(i % 32);
  const uint8_t q = b[2 + (j & 15)];
  return __fmul_rn(float((j < 16 ? (q & 0xF) : (q >> 4)) - 8), ld_f16(b));
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q5_0>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 32) * 22;
  const int j = int(i % 32);
  const uint32_t qh = ld_u32_a2(b + 2);
  const uint8_t q = b[6 + (j & 15)];
  const int v = ((j < 16 ? (q & 0xF) : (q >> 4)) | int(((qh >> j) & 1) << 4)) - 16;
  return __fmul_rn(float(v), ld_f16(b));
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q4_K>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 256) * 144;
  const int v = int(i % 256), s = v / 32;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const uint8_t byte = b[16 + 32 * (v / 64) + v % 32];
  const int q = (v % 64) < 32 ? (byte & 0xF) : (byte >> 4);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  return __fsub_rn(__fmul_rn(dl, float(q)), ml);
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q5_K>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 256) * 176;
  const int v = int(i % 256), s = v / 32;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const uint8_t byte = b[48 + 32 * (v / 64) + v % 32];
  const int q = ((v % 64) < 32 ? (byte & 0xF) : (byte >> 4)) + (((b[16 + v % 32] >> s) & 1) ? 16 : 0);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  return __fsub_rn(__fmul_rn(dl, float(q)), ml);
}
template <>
__device__ __forceinline__ float deq1<GgmlType::Q6_K>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 256) * 210;
  const int v = int(i % 256), half = v / 128, k = (v % 128) / 32, l = v % 32;
  const uint8_t lo_byte = b[64 * half + l + 32 * (k % 2)];
  const int lo = k < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
  const int hi = (b[128 + 32 * half + l] >> (2 * k)) & 3;
  const int sc = int8_t(b[192 + 8 * half + 2 * k + l / 16]);
  return __fmul_rn(__fmul_rn(ld_f16(b + 208), float(sc)), float((lo | hi << 4) - 32));
}
template <>
__device__ __forceinline__ float deq1<GgmlType::IQ4_XS>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 256) * 136;
  const int v = int(i % 256), s = v / 32, j = v % 32;
  const int lo = (b[4 + s / 2] >> (4 * (s % 2))) & 0xF;
  const int hi = (ld_u16(b + 2) >> (2 * s)) & 3;
  const float dl = __fmul_rn(ld_f16(b), float((lo | hi << 4) - 32));
  const uint8_t q = b[8 + 16 * s + (j & 15)];
  return __fmul_rn(dl, float(kIq4nl[j < 16 ? (q & 0xF) : (q >> 4)]));
}

// ---- 32 values at a time ---------------------------------------------------------

// Values [i0, i0 + 32) of a row (i0 a multiple of 32: one block of the 32-value
// types, one sub-block of the 256-value ones), with deq1's operations on each
// value (the same bits), the block's scales decoded once. Where a GEMM decodes
// its weights as it reads them (cuda_moe_grouped_gemm.cu), one value at a time
// cost ~8x the instructions.
template <GgmlType T>
__device__ __forceinline__ void deq32(const uint8_t* row, int64_t i0, float (&v)[32]) {
#pragma unroll
  for (int e = 0; e < 32; ++e) v[e] = deq1<T>(row, i0 + e);
}
// Each value is deq1's: the same float operations on the same integer, read
// as whole words and converted by exact_float (deq1's float(int) is exact too).
template <>
__device__ __forceinline__ void deq32<GgmlType::Q8_0>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 32) * 34;
  const float d = ld_f16(b);
  uint32_t q[8];
  load_words<8>(b + 2, q);
#pragma unroll
  for (int e = 0; e < 32; ++e) v[e] = __fmul_rn(exact_float<128>(byte_of(q, e) ^ 0x80u), d);  // int8_t(byte)
}
template <>
__device__ __forceinline__ void deq32<GgmlType::Q4_0>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 32) * 18;
  const float d = ld_f16(b);
  uint32_t q[4];
  load_words<4>(b + 2, q);
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const uint32_t byte = byte_of(q, e);
    v[e] = __fmul_rn(exact_float<8>(byte & 0xF), d);
    v[e + 16] = __fmul_rn(exact_float<8>(byte >> 4), d);
  }
}
template <>
__device__ __forceinline__ void deq32<GgmlType::Q5_0>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 32) * 22;
  const float d = ld_f16(b);
  const uint32_t qh = ld_u32_a2(b + 2);
  uint32_t q[4];
  load_words<4>(b + 6, q);
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const uint32_t byte = byte_of(q, e);
    v[e] = __fmul_rn(exact_float<16>((byte & 0xF) | (((qh >> e) & 1) << 4)), d);
    v[e + 16] = __fmul_rn(exact_float<16>((byte >> 4) | (((qh >> (e + 16)) & 1) << 4)), d);
  }
}
template <>
__device__ __forceinline__ void deq32<GgmlType::Q4_K>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 256) * 144;
  const int s = int(i0 % 256) / 32;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  uint32_t q[8];  // the 32 bytes whose low (s even) or high (s odd) nibbles are the sub-block
  load_words<8>(b + 16 + 32 * (s / 2), q);
  const int sh = 4 * (s % 2);
#pragma unroll
  for (int e = 0; e < 32; ++e) v[e] = __fsub_rn(__fmul_rn(dl, exact_float<0>((byte_of(q, e) >> sh) & 0xF)), ml);
}
template <>
__device__ __forceinline__ void deq32<GgmlType::Q5_K>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 256) * 176;
  const int s = int(i0 % 256) / 32;
  int sc, m;
  scale_min_k4(b + 4, s, &sc, &m);
  const float dl = __fmul_rn(ld_f16(b), float(sc)), ml = __fmul_rn(ld_f16(b + 2), float(m));
  uint32_t q[8], h[8];
  load_words<8>(b + 48 + 32 * (s / 2), q);
  load_words<8>(b + 16, h);
  const int sh = 4 * (s % 2);
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const uint32_t lo = (byte_of(q, e) >> sh) & 0xF;
    v[e] = __fsub_rn(__fmul_rn(dl, exact_float<0>(lo | (((byte_of(h, e) >> s) & 1) << 4))), ml);
  }
}
template <>
__device__ __forceinline__ void deq32<GgmlType::Q6_K>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 256) * 210;
  const int s = int(i0 % 256) / 32, half = s / 4, k = s % 4;
  const float d = ld_f16(b + 208);
  const float d0 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k]))),
              d1 = __fmul_rn(d, float(int8_t(b[192 + 8 * half + 2 * k + 1])));
  uint32_t lo[8], hi[8];
  load_words<8>(b + 64 * half + 32 * (k % 2), lo);
  load_words<8>(b + 128 + 32 * half, hi);
  const int lsh = k < 2 ? 0 : 4, hsh = 2 * k;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const uint32_t q6 = ((byte_of(lo, e) >> lsh) & 0xF) | (((byte_of(hi, e) >> hsh) & 3) << 4);
    v[e] = __fmul_rn(e < 16 ? d0 : d1, exact_float<32>(q6));
  }
}
template <>
__device__ __forceinline__ void deq32<GgmlType::IQ4_XS>(const uint8_t* row, int64_t i0, float (&v)[32]) {
  const uint8_t* b = row + (i0 / 256) * 136;
  const int s = int(i0 % 256) / 32;
  const int lo = (b[4 + s / 2] >> (4 * (s % 2))) & 0xF;
  const int hi = (ld_u16(b + 2) >> (2 * s)) & 3;
  const float dl = __fmul_rn(ld_f16(b), float((lo | hi << 4) - 32));
  const uint8_t* q = b + 8 + 16 * s;
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    v[e] = __fmul_rn(dl, float(kIq4nl[q[e] & 0xF]));
    v[e + 16] = __fmul_rn(dl, float(kIq4nl[q[e] >> 4]));
  }
}

// ---- integer dot products with 8-bit activations ------------------------------

// The activation rounding a weight type meets (ggml's vec_dot_type).
enum class ActBlocks { Q8_0, Q8_K };

// Low nibbles / high nibbles of each byte.
__device__ __forceinline__ int lo4(uint32_t w) { return int(w & 0x0F0F0F0Fu); }
__device__ __forceinline__ int hi4(uint32_t w) { return int((w >> 4) & 0x0F0F0F0Fu); }

template <GgmlType T>
struct Q8Dot;

// Q8_0: 4 chunks of 8 values.
template <>
struct Q8Dot<GgmlType::Q8_0> {
  static constexpr int kValues = 32, kBytes = 34, kLanes = 4;
  static constexpr ActBlocks kAct = ActBlocks::Q8_0;
  struct W {
    float d;
    int q0, q1;
  };
  __device__ static W load(const uint8_t* b, int c) {
    return {ld_f16(b), int(ld_u32_a2(b + 2 + 8 * c)), int(ld_u32_a2(b + 6 + 8 * c))};
  }
  // xq: the block's 32 activations, xd: their scale.
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int2 x = *reinterpret_cast<const int2*>(xq + 8 * c);
    const int s = dp4(w.q0, x.x, dp4(w.q1, x.y, 0));
    return float(s) * (w.d * xd);
  }
};

// Q4_0: 2 chunks; chunk c holds bytes 8c..8c+7: values 8c.. (low) and 16+8c.. (high).
template <>
struct Q8Dot<GgmlType::Q4_0> {
  static constexpr int kValues = 32, kBytes = 18, kLanes = 2;
  static constexpr ActBlocks kAct = ActBlocks::Q8_0;
  struct W {
    float d;
    uint32_t q0, q1;
  };
  __device__ static W load(const uint8_t* b, int c) {
    return {ld_f16(b), ld_u32_a2(b + 2 + 8 * c), ld_u32_a2(b + 6 + 8 * c)};
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int2 xl = *reinterpret_cast<const int2*>(xq + 8 * c);
    const int2 xh = *reinterpret_cast<const int2*>(xq + 16 + 8 * c);
    const int k8 = 0x08080808;
    int s = dp4(sub4(lo4(w.q0), k8), xl.x, 0);
    s = dp4(sub4(lo4(w.q1), k8), xl.y, s);
    s = dp4(sub4(hi4(w.q0), k8), xh.x, s);
    s = dp4(sub4(hi4(w.q1), k8), xh.y, s);
    return float(s) * (w.d * xd);
  }
};

// Bits 0..3 of h as bit 4 of bytes 0..3.
__device__ __forceinline__ int bit4_of_bytes(uint32_t h) {
  return int(((h & 1) << 4) | ((h & 2) << 11) | ((h & 4) << 18) | ((h & 8) << 25));
}

// Q5_0: like Q4_0 plus a fifth bit per value from qh.
template <>
struct Q8Dot<GgmlType::Q5_0> {
  static constexpr int kValues = 32, kBytes = 22, kLanes = 2;
  static constexpr ActBlocks kAct = ActBlocks::Q8_0;
  struct W {
    float d;
    uint32_t qh, q0, q1;
  };
  __device__ static W load(const uint8_t* b, int c) {
    return {ld_f16(b), ld_u32_a2(b + 2), ld_u32_a2(b + 6 + 8 * c), ld_u32_a2(b + 10 + 8 * c)};
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int2 xl = *reinterpret_cast<const int2*>(xq + 8 * c);
    const int2 xh = *reinterpret_cast<const int2*>(xq + 16 + 8 * c);
    const uint32_t hl = w.qh >> (8 * c), hh = w.qh >> (16 + 8 * c);
    const int k16 = 0x10101010;
    int s = dp4(sub4(lo4(w.q0) | bit4_of_bytes(hl), k16), xl.x, 0);
    s = dp4(sub4(lo4(w.q1) | bit4_of_bytes(hl >> 4), k16), xl.y, s);
    s = dp4(sub4(hi4(w.q0) | bit4_of_bytes(hh), k16), xh.x, s);
    s = dp4(sub4(hi4(w.q1) | bit4_of_bytes(hh >> 4), k16), xh.y, s);
    return float(s) * (w.d * xd);
  }
};

__device__ __forceinline__ int sum_bytes(int4 x) {
  return dp4(0x01010101, x.x, dp4(0x01010101, x.y, dp4(0x01010101, x.z, dp4(0x01010101, x.w, 0))));
}
__device__ __forceinline__ int dot16(int a0, int a1, int a2, int a3, int4 x) {
  return dp4(a0, x.x, dp4(a1, x.y, dp4(a2, x.z, dp4(a3, x.w, 0))));
}

// Q4_K: 8 chunks of 16 bytes; chunk c: pair p = c / 2 of sub-blocks (2p in the
// low nibbles, 2p+1 in the high), bytes l0..l0+15 of the pair's 32 (l0 = 16 (c %
// 2)). The min term needs the sum of the activations each scale meets: per
// chunk, dp4a against ones.
template <>
struct Q8Dot<GgmlType::Q4_K> {
  static constexpr int kValues = 256, kBytes = 144, kLanes = 8;
  static constexpr ActBlocks kAct = ActBlocks::Q8_K;
  struct W {
    float d, dmin;
    int sc0, m0, sc1, m1;
    uint4 q;
  };
  __device__ static W load(const uint8_t* b, int c) {
    const int p = c / 2, l0 = 16 * (c % 2);
    W w;
    const uint4 hd = *reinterpret_cast<const uint4*>(b);  // d, dmin, scales: 16 bytes
    w.d = f16_bits(uint16_t(hd.x & 0xFFFF));
    w.dmin = f16_bits(uint16_t(hd.x >> 16));
    scale_min_k4_pair(hd.y, hd.z, hd.w, p, &w.sc0, &w.m0, &w.sc1, &w.m1);
    w.q = *reinterpret_cast<const uint4*>(b + 16 + 32 * p + l0);
    return w;
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int p = c / 2, l0 = 16 * (c % 2);
    const int4 xa = *reinterpret_cast<const int4*>(xq + 64 * p + l0);
    const int4 xb = *reinterpret_cast<const int4*>(xq + 64 * p + 32 + l0);
    const int sa = dot16(lo4(w.q.x), lo4(w.q.y), lo4(w.q.z), lo4(w.q.w), xa);
    const int sb = dot16(hi4(w.q.x), hi4(w.q.y), hi4(w.q.z), hi4(w.q.w), xb);
    const int a = w.sc0 * sa + w.sc1 * sb;
    const int m = w.m0 * sum_bytes(xa) + w.m1 * sum_bytes(xb);
    return xd * (w.d * float(a) - w.dmin * float(m));
  }
};

// Q5_K: Q4_K plus bit s of qh[l] as the fifth bit of value l of sub-block s.
template <>
struct Q8Dot<GgmlType::Q5_K> {
  static constexpr int kValues = 256, kBytes = 176, kLanes = 8;
  static constexpr ActBlocks kAct = ActBlocks::Q8_K;
  struct W {
    float d, dmin;
    int sc0, m0, sc1, m1;
    int a[4], b[4];  // the 5-bit values of sub-blocks 2p (a) and 2p+1 (b)
  };
  __device__ static W load(const uint8_t* b, int c) {
    const int p = c / 2, l0 = 16 * (c % 2);
    W w;
    const uint4 hd = *reinterpret_cast<const uint4*>(b);
    w.d = f16_bits(uint16_t(hd.x & 0xFFFF));
    w.dmin = f16_bits(uint16_t(hd.x >> 16));
    scale_min_k4_pair(hd.y, hd.z, hd.w, p, &w.sc0, &w.m0, &w.sc1, &w.m1);
    const uint4 q = *reinterpret_cast<const uint4*>(b + 48 + 32 * p + l0);
    const uint4 h = *reinterpret_cast<const uint4*>(b + 16 + l0);
    const uint32_t qv[4] = {q.x, q.y, q.z, q.w}, hv[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w.a[k] = lo4(qv[k]) | int(((hv[k] >> (2 * p)) & 0x01010101u) << 4);
      w.b[k] = hi4(qv[k]) | int(((hv[k] >> (2 * p + 1)) & 0x01010101u) << 4);
    }
    return w;
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int p = c / 2, l0 = 16 * (c % 2);
    const int4 xa = *reinterpret_cast<const int4*>(xq + 64 * p + l0);
    const int4 xb = *reinterpret_cast<const int4*>(xq + 64 * p + 32 + l0);
    const int sa = dot16(w.a[0], w.a[1], w.a[2], w.a[3], xa);
    const int sb = dot16(w.b[0], w.b[1], w.b[2], w.b[3], xb);
    const int a = w.sc0 * sa + w.sc1 * sb;
    const int m = w.m0 * sum_bytes(xa) + w.m1 * sum_bytes(xb);
    return xd * (w.d * float(a) - w.dmin * float(m));
  }
};

// Q6_K: 8 chunks; chunk c: half h = c / 4, bytes l0..l0+7 (l0 = 8 (c % 4)) of
// the half's ql rows and qh: values l0.. of all four quarters of the half.
// Blocks are 210 bytes: only 2-byte alignment.
template <>
struct Q8Dot<GgmlType::Q6_K> {
  static constexpr int kValues = 256, kBytes = 210, kLanes = 8;
  static constexpr ActBlocks kAct = ActBlocks::Q8_K;
  struct W {
    float d;
    int sc[4];
    int v[4][2];  // signed 6-bit values (q - 32) of quarter k, 8 per quarter
  };
  __device__ static W load(const uint8_t* b, int c) {
    const int h = c / 4, l0 = 8 * (c % 4);
    W w;
    w.d = ld_f16(b + 208);
    const uint32_t qa0 = ld_u32_a2(b + 64 * h + l0), qa1 = ld_u32_a2(b + 64 * h + l0 + 4);
    const uint32_t qb0 = ld_u32_a2(b + 64 * h + 32 + l0), qb1 = ld_u32_a2(b + 64 * h + 32 + l0 + 4);
    const uint32_t qh0 = ld_u32_a2(b + 128 + 32 * h + l0), qh1 = ld_u32_a2(b + 128 + 32 * h + l0 + 4);
    const int k32 = 0x20202020;
    const uint32_t m2 = 0x03030303u;
    w.v[0][0] = sub4(lo4(qa0) | int((qh0 & m2) << 4), k32);
    w.v[0][1] = sub4(lo4(qa1) | int((qh1 & m2) << 4), k32);
    w.v[1][0] = sub4(lo4(qb0) | int(((qh0 >> 2) & m2) << 4), k32);
    w.v[1][1] = sub4(lo4(qb1) | int(((qh1 >> 2) & m2) << 4), k32);
    w.v[2][0] = sub4(hi4(qa0) | int(((qh0 >> 4) & m2) << 4), k32);
    w.v[2][1] = sub4(hi4(qa1) | int(((qh1 >> 4) & m2) << 4), k32);
    w.v[3][0] = sub4(hi4(qb0) | int(((qh0 >> 6) & m2) << 4), k32);
    w.v[3][1] = sub4(hi4(qb1) | int(((qh1 >> 6) & m2) << 4), k32);
#pragma unroll
    for (int k = 0; k < 4; ++k) w.sc[k] = int8_t(b[192 + 8 * h + 2 * k + l0 / 16]);
    return w;
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int h = c / 4, l0 = 8 * (c % 4);
    int a = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int2 x = *reinterpret_cast<const int2*>(xq + 128 * h + 32 * k + l0);
      a += w.sc[k] * dp4(w.v[k][0], x.x, dp4(w.v[k][1], x.y, 0));
    }
    return xd * (w.d * float(a));
  }
};

// IQ4_NL's code book for 4 nibbles at once: nibble k of q16 (its low 16 bits)
// selects byte k of the result. __byte_perm picks bytes 0..7 of two words by a
// 3-bit selector; bit 3 of each nibble then chooses the low or high half.
__device__ __forceinline__ int iq4_lut4(uint32_t q16) {
  constexpr uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u;
  const uint32_t lo = __byte_perm(t0, t1, q16 & 0x7777u);
  const uint32_t hi = __byte_perm(t2, t3, q16 & 0x7777u);
  return int(__byte_perm(lo, hi, 0x3210u | ((q16 & 0x8888u) >> 1)));
}
// The four low (or high) nibbles of a word's bytes, packed as q16 nibbles.
__device__ __forceinline__ uint32_t pack_nibbles(uint32_t bytes_of_nibbles) {
  const uint32_t t = bytes_of_nibbles | (bytes_of_nibbles >> 4);  // byte 0: n0 | n1 << 4, byte 2: n2 | n3 << 4
  return __byte_perm(t, 0, 0x0020u);
}

// IQ4_XS: 8 chunks, one per sub-block s: its 16 bytes, values 0..15 in the low
// nibbles and 16..31 in the high.
template <>
struct Q8Dot<GgmlType::IQ4_XS> {
  static constexpr int kValues = 256, kBytes = 136, kLanes = 8;
  static constexpr ActBlocks kAct = ActBlocks::Q8_K;
  struct W {
    float d;
    int ls;
    int l[4], h[4];
  };
  __device__ static W load(const uint8_t* b, int c) {
    const int s = c;
    W w;
    const uint2 hd = *reinterpret_cast<const uint2*>(b);  // d, scales_h, scales_l: 8 bytes
    w.d = f16_bits(uint16_t(hd.x & 0xFFFF));
    const int lo = int((hd.y >> (8 * (s / 2) + 4 * (s % 2))) & 0xF);
    const int hi = int(((hd.x >> 16) >> (2 * s)) & 3);
    w.ls = (lo | hi << 4) - 32;
    // Blocks are 136 bytes: 8-byte alignment only.
    const uint2 q0 = *reinterpret_cast<const uint2*>(b + 8 + 16 * s);
    const uint2 q1 = *reinterpret_cast<const uint2*>(b + 16 + 16 * s);
    const uint32_t qv[4] = {q0.x, q0.y, q1.x, q1.y};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w.l[k] = iq4_lut4(pack_nibbles(qv[k] & 0x0F0F0F0Fu));
      w.h[k] = iq4_lut4(pack_nibbles((qv[k] >> 4) & 0x0F0F0F0Fu));
    }
    return w;
  }
  __device__ static float dot(const W& w, int c, const int8_t* xq, float xd) {
    const int4 xl = *reinterpret_cast<const int4*>(xq + 32 * c);
    const int4 xh = *reinterpret_cast<const int4*>(xq + 32 * c + 16);
    const int a = dot16(w.l[0], w.l[1], w.l[2], w.l[3], xl) + dot16(w.h[0], w.h[1], w.h[2], w.h[3], xh);
    return xd * (w.d * float(a * w.ls));
  }
};

}  // namespace kt::cuda
