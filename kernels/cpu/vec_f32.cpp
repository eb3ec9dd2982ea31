#include "kernels/cpu/vec_f32.h"

#include <cstring>


namespace kt::kern::vec {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KT_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define KT_CLONES
#endif

// The conversions are written as the bit operations they are, so each clone
// vectorizes them with its own instructions.
// F16 -> F32 is exact; with F16C (the avx512f and haswell clones) one
// instruction converts 8 or 16 of them.
inline float h2f(uint16_t h) { return float(__builtin_bit_cast(_Float16, h)); }
inline float b2f(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

KT_CLONES float dot_f32_impl(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
KT_CLONES float dot_f16_impl(const uint16_t* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += h2f(a[i]) * b[i];
  return s;
}
KT_CLONES float dot_bf16_impl(const uint16_t* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += b2f(a[i]) * b[i];
  return s;
}
KT_CLONES void axpy_f32_impl(const float* r, float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * r[i];
}
KT_CLONES void axpy_f16_impl(const uint16_t* r, float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * h2f(r[i]);
}
KT_CLONES void axpy_bf16_impl(const uint16_t* r, float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * b2f(r[i]);
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return dot_f32_impl(a, b, n); }

float dot(GgmlType type, const void* row, const float* x, int64_t n) {
  switch (type) {
    case GgmlType::F16:
      return dot_f16_impl(static_cast<const uint16_t*>(row), x, n);
    case GgmlType::BF16:
      return dot_bf16_impl(static_cast<const uint16_t*>(row), x, n);
    default:
      return dot_f32_impl(static_cast<const float*>(row), x, n);
  }
}

void axpy(GgmlType type, const void* row, float a, float* y, int64_t n) {
  switch (type) {
    case GgmlType::F16:
      return axpy_f16_impl(static_cast<const uint16_t*>(row), a, y, n);
    case GgmlType::BF16:
      return axpy_bf16_impl(static_cast<const uint16_t*>(row), a, y, n);
    default:
      return axpy_f32_impl(static_cast<const float*>(row), a, y, n);
  }
}

}  // namespace kt::kern::vec
