// Reference decoding of ggml's 32-value block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
// and IQ4_NL. Each decoder repeats ggml's dequantize_row_* (ggml-quants.c) one
// float operation for one, in the same order (fp16 scale to f32 first, then
// int-to-float and multiply, then add), so the floats are bit-identical to
// llama.cpp's (test/unit/quant_vectors_test.cpp).
//
// Why any correct fast kernel can be bit-exact too: an fp16 scale has 11
// significant bits and q at most 8, so d * q (<= 19 bits) is exact in float. Every
// value is therefore the exact d * q, or d * q + m rounded once; a fused
// multiply-add or another order of the multiplications gives the same bits.
#include <cstdint>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_ref.h"

namespace kt::cpu {
namespace {

constexpr int kHalf = kQK / 2;  // value j sits in the low nibble, j + 16 in the high

void decode_q4_0(const BlockQ4_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < kHalf; ++j) {
    const int x0 = (b.qs[j] & 0x0F) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = float(x0) * d;
    y[j + kHalf] = float(x1) * d;
  }
}

void decode_q4_1(const BlockQ4_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  for (int j = 0; j < kHalf; ++j) {
    const int x0 = b.qs[j] & 0x0F;
    const int x1 = b.qs[j] >> 4;
    y[j] = float(x0) * d + m;
    y[j + kHalf] = float(x1) * d + m;
  }
}

// The fifth bit of value j is bit j of the 32-bit little-endian qh.
uint32_t load_qh(const uint8_t qh[4]) {
  return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}

void decode_q5_0(const BlockQ5_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kHalf; ++j) {
    const int h0 = int((qh >> j) & 1) << 4;
    const int h1 = int((qh >> (j + kHalf)) & 1) << 4;
    const int x0 = ((b.qs[j] & 0x0F) | h0) - 16;
    const int x1 = ((b.qs[j] >> 4) | h1) - 16;
    y[j] = float(x0) * d;
    y[j + kHalf] = float(x1) * d;
  }
}

void decode_q5_1(const BlockQ5_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kHalf; ++j) {
    const int h0 = int((qh >> j) & 1) << 4;
    const int h1 = int((qh >> (j + kHalf)) & 1) << 4;
    const int x0 = (b.qs[j] & 0x0F) | h0;
    const int x1 = (b.qs[j] >> 4) | h1;
    y[j] = float(x0) * d + m;
    y[j + kHalf] = float(x1) * d + m;
  }
}

void decode_q8_0(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = float(b.qs[j]) * d;
}

void decode_iq4_nl(const BlockIq4_nl& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < kHalf; ++j) {
    y[j] = d * float(kValuesIq4nl[b.qs[j] & 0x0F]);
    y[j + kHalf] = d * float(kValuesIq4nl[b.qs[j] >> 4]);
  }
}

}  // namespace

KT_DEFINE_QUANT_REF(q4_0, BlockQ4_0)
KT_DEFINE_QUANT_REF(q4_1, BlockQ4_1)
KT_DEFINE_QUANT_REF(q5_0, BlockQ5_0)
KT_DEFINE_QUANT_REF(q5_1, BlockQ5_1)
KT_DEFINE_QUANT_REF(q8_0, BlockQ8_0)
KT_DEFINE_QUANT_REF(iq4_nl, BlockIq4_nl)

#undef KT_DEFINE_QUANT_REF

}  // namespace kt::cpu
