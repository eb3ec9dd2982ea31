// Reference decoding of ggml's 256-value super-block types: Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K and IQ4_XS. Each decoder computes the same float operations as
// ggml's dequantize_row_* (ggml-quants.c) in the same order — the sub-block scale
// d * sc (and min dmin * m) in float first, then times q, then minus the
// min — so the floats are bit-identical to llama.cpp's. The loops are written per
// output value (index = where the value lands) rather than with ggml's moving
// pointers; the bit positions are spelled out beside each one.
//
// Why any correct fast kernel can be bit-exact too: the fp16 d and dmin have 11
// significant bits, the 4/6-bit sub-block scales and mins make d * sc and
// dmin * m exact in float (<= 17 bits), and times q (<= 5 bits) still exact. So
// each value is exact, or (with a min) the exact d*sc*q - dmin*m rounded once:
// a fused multiply-add or any order of the multiplications gives the same bits.
// Two types get close: Q6_K's int8 scale gives d * sc * q up to 25 bits, rounded
// once whichever pair is multiplied first (each pair is exact); IQ4_XS's 7-bit
// code values keep d * sc * q within 23 bits.
#include <cstdint>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_ref.h"

namespace kt::cpu {
namespace {

// Q2_K and Q3_K: each half of 128 values takes 32 bytes of qs; byte l of the half
// holds four 2-bit values, bits 2k..2k+1 being value 32k + l of the half. The 16
// sub-blocks of 16 values are numbered in output order (value v is in v / 16).
int q2_bits(const uint8_t* qs, int v) {
  const int half = v / 128, k = (v % 128) / 32, l = v % 32;
  return (qs[32 * half + l] >> (2 * k)) & 3;
}

void decode_q2_k(const BlockQ2_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * float(b.scales[s] & 0xF);  // scale in the low nibble
    const float ml = dmin * float(b.scales[s] >> 4);  // min in the high nibble
    for (int v = 16 * s; v < 16 * s + 16; ++v) y[v] = dl * float(q2_bits(b.qs, v)) - ml;
  }
}

// Q3_K's 16 six-bit scales in 12 bytes: the low 4 bits of scale s are the low
// (s < 8) or high (s >= 8) nibble of byte s % 8; the high 2 bits are bits
// 2*(s/4)..+1 of byte 8 + s % 4. ggml unpacks the same with kmask1/kmask2.
int q3_scale(const uint8_t sc[12], int s) {
  const int lo = s < 8 ? (sc[s] & 0xF) : (sc[s - 8] >> 4);
  const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | hi << 4) - 32;
}

void decode_q3_k(const BlockQ3_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * float(q3_scale(b.scales, s));
    for (int v = 16 * s; v < 16 * s + 16; ++v) {
      // The third bit of value v is bit (v / 32) of hmask[v % 32]; clear means -4.
      const bool high = (b.hmask[v % 32] >> (v / 32)) & 1;
      y[v] = dl * float(q2_bits(b.qs, v) - (high ? 0 : 4));
    }
  }
}

// Q4_K and Q5_K: each pair of sub-blocks (64 values) shares 32 bytes of qs; value
// l of the first is the low nibble of byte l, of the second the high nibble.
int q4_nibble(const uint8_t* qs, int v) {
  const int pair = v / 64, l = v % 32;
  const uint8_t byte = qs[32 * pair + l];
  return (v % 64) < 32 ? (byte & 0xF) : (byte >> 4);
}

void decode_q4_k(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(b.scales, s, &sc, &m);
    const float dl = d * float(sc);
    const float ml = dmin * float(m);
    for (int v = 32 * s; v < 32 * s + 32; ++v) y[v] = dl * float(q4_nibble(b.qs, v)) - ml;
  }
}

void decode_q5_k(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(b.scales, s, &sc, &m);
    const float dl = d * float(sc);
    const float ml = dmin * float(m);
    for (int v = 32 * s; v < 32 * s + 32; ++v) {
      // The fifth bit of value v is bit s of qh[v % 32].
      const int high = ((b.qh[v % 32] >> s) & 1) ? 16 : 0;
      y[v] = dl * float(q4_nibble(b.qs, v) + high) - ml;
    }
  }
}

// Q6_K: each half of 128 values takes 64 bytes of ql, 32 of qh and 8 scales.
// Quarter k (32 values) of a half: low 4 bits from ql[l + 32 * (k % 2)], low
// nibble for k < 2 and high nibble otherwise; high 2 bits from bits 2k..2k+1 of
// qh[l]; scale 2k + l / 16 of the half. ggml multiplies (d * sc) * q.
void decode_q6_k(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, k = (v % 128) / 32, l = v % 32;
    const uint8_t lo_byte = b.ql[64 * half + l + 32 * (k % 2)];
    const int lo = k < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
    const int hi = (b.qh[32 * half + l] >> (2 * k)) & 3;
    const int q = (lo | hi << 4) - 32;
    const int sc = b.scales[8 * half + 2 * k + l / 16];
    y[v] = d * float(sc) * float(q);
  }
}

// IQ4_XS: scale of sub-block s = 4 bits from nibble s % 2 of scales_l[s / 2] and
// 2 bits from bits 2s..2s+1 of scales_h, stored +32. Values are IQ4_NL's code
// book; value l of a sub-block in the low nibble of its byte l (l < 16), value
// l + 16 in the high nibble.
void decode_iq4_xs(const BlockIq4_xs& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int s = 0; s < 8; ++s) {
    const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
    const int hi = (b.scales_h >> (2 * s)) & 3;
    const float dl = d * float((lo | hi << 4) - 32);
    const uint8_t* qs = b.qs + 16 * s;
    for (int j = 0; j < 16; ++j) {
      y[32 * s + j] = dl * float(kValuesIq4nl[qs[j] & 0xF]);
      y[32 * s + j + 16] = dl * float(kValuesIq4nl[qs[j] >> 4]);
    }
  }
}

}  // namespace

KT_DEFINE_QUANT_REF(q2_k, BlockQ2_K)
KT_DEFINE_QUANT_REF(q3_k, BlockQ3_K)
KT_DEFINE_QUANT_REF(q4_k, BlockQ4_K)
KT_DEFINE_QUANT_REF(q5_k, BlockQ5_K)
KT_DEFINE_QUANT_REF(q6_k, BlockQ6_K)
KT_DEFINE_QUANT_REF(iq4_xs, BlockIq4_xs)

#undef KT_DEFINE_QUANT_REF

}  // namespace kt::cpu
