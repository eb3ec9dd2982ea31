// Small vector loops of the CPU attention kernels, compiled for AVX-512,
// AVX2+F16C and plain x86-64 and chosen at load by the CPU (GCC's
// target_clones): the library runs on any x86-64 CPU and still uses the wide
// units where they exist. Rows may be F32, F16 or BF16 (a KV cache's type).
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

}  // namespace kt::kern::vec
