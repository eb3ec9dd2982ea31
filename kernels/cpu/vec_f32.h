// Small vector loops of the CPU kernels (attention, SwiGLU): AVX-512 where the CPU has
// it (vec_f32_avx512.cpp, chosen at run time through cpu_features, like
// matmul_q), portable C++ otherwise. Rows may be F32, F16 or BF16 (a KV
// cache's type).
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::kern::vec {

// sum_i row[i] * x[i], row of `type` (F32, F16, BF16), accumulated in float.
float dot(GgmlType type, const void* row, const float* x, int64_t n);
// y[i] += a * row[i].
void axpy(GgmlType type, const void* row, float a, float* y, int64_t n);
// sum_i a[i] * b[i] over floats.
float dot_f32(const float* a, const float* b, int64_t n);
// dst[i] = row[i] as float.
void to_f32(GgmlType type, const void* row, float* dst, int64_t n);
// y[i] = silu(gate[i]) * up[i] in float (y may be gate): within ~2 ulp of the
// reference's ref::silu_glu (computed in double), which the portable path is.
void silu_mul(const float* gate, const float* up, int64_t n, float* y);

}  // namespace kt::kern::vec
