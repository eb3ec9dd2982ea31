// The portable loops and the dispatch (vec_f32.h). The AVX-512 versions live
// in vec_f32_avx512.cpp, compiled with those instructions and called only
// when cpu_features says the CPU has them (the same pattern as matmul_q).
#include "kernels/cpu/vec_f32.h"

#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/ops_ref.h"

namespace kt::kern::vec {

namespace avx512 {  // vec_f32_avx512.cpp
float dot(GgmlType type, const void* row, const float* x, int64_t n);
void axpy(GgmlType type, const void* row, float a, float* y, int64_t n);
void to_f32(GgmlType type, const void* row, float* dst, int64_t n);
void silu_mul(const float* gate, const float* up, int64_t n, float* y);
}  // namespace avx512

namespace {

bool use_avx512() {
#if defined(__x86_64__)
  return cpu::active_isa() >= cpu::Isa::Avx512;
#else
  return false;
#endif
}

float load(GgmlType type, const void* row, int64_t i) {
  switch (type) {
    case GgmlType::F16:
      return cpu::fp16_to_f32(static_cast<const uint16_t*>(row)[i]);
    case GgmlType::BF16:
      return cpu::bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
    default:
      return static_cast<const float*>(row)[i];
  }
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return dot(GgmlType::F32, a, b, n); }

float dot(GgmlType type, const void* row, const float* x, int64_t n) {
  if (use_avx512()) return avx512::dot(type, row, x, n);
  // Four lanes, summed at the end, as the vector versions do.
  float acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += load(type, row, i + k) * x[i + k];
  float s = 0;
  for (; i < n; ++i) s += load(type, row, i) * x[i];
  return s + (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

void to_f32(GgmlType type, const void* row, float* dst, int64_t n) {
  if (use_avx512()) return avx512::to_f32(type, row, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = load(type, row, i);
}

void axpy(GgmlType type, const void* row, float a, float* y, int64_t n) {
  if (use_avx512()) return avx512::axpy(type, row, a, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * load(type, row, i);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  if (use_avx512()) return avx512::silu_mul(gate, up, n, y);
  cpu::ref::silu_glu(gate, up, n, y);
}

}  // namespace kt::kern::vec
