// Reference kernels for ggml's block-quantized types, in plain C++: decoding
// (bit-exact with ggml's dequantize_row_*) and dot products with float
// activations accumulated in double. They define what every fast kernel (AVX-512,
// AMX, CUDA) must compute; the block layouts are ggml's (ggml-common.h).
#pragma once

#include <cstdint>

namespace kt::cpu {

#define KT_DECLARE_QUANT_REF(t)                                     \
  void dequant_row_##t(const void* src, float* dst, int64_t n);    \
  double dot_row_##t(const void* row, const float* x, int64_t n);

KT_DECLARE_QUANT_REF(q4_0)
KT_DECLARE_QUANT_REF(q4_1)
KT_DECLARE_QUANT_REF(q5_0)
KT_DECLARE_QUANT_REF(q5_1)
KT_DECLARE_QUANT_REF(q8_0)
KT_DECLARE_QUANT_REF(q2_k)
KT_DECLARE_QUANT_REF(q3_k)
KT_DECLARE_QUANT_REF(q4_k)
KT_DECLARE_QUANT_REF(q5_k)
KT_DECLARE_QUANT_REF(q6_k)
KT_DECLARE_QUANT_REF(iq4_nl)
KT_DECLARE_QUANT_REF(iq4_xs)

#undef KT_DECLARE_QUANT_REF

}  // namespace kt::cpu
