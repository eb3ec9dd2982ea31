// Reference kernels for the plain float types (F32, F16, BF16): decoding and dot
// products in plain C++. They define the semantics fast kernels are tested against.
#pragma once

#include <cstdint>

namespace kt::cpu {

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);  // round to nearest even, as ggml/F16C do
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);  // round to nearest even; NaN stays NaN

void dequant_row_f32(const void* src, float* dst, int64_t n);
void dequant_row_f16(const void* src, float* dst, int64_t n);
void dequant_row_bf16(const void* src, float* dst, int64_t n);
double dot_row_f32(const void* row, const float* x, int64_t n);
double dot_row_f16(const void* row, const float* x, int64_t n);
double dot_row_bf16(const void* row, const float* x, int64_t n);

}  // namespace kt::cpu
