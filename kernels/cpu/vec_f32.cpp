// The portable loops and the dispatch (vec_f32.h). The AVX-512 versions live
// in vec_f32_avx512.cpp, compiled with those instructions and called only
// when cpu_features says the CPU has them (the same pattern as matmul_q).
#include "kernels/cpu/vec_f32.h"

#include <cmath>
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
void round_f16(const float* x, float* y, int64_t n);
float exp_shift(float* x, int64_t n, float m);
bool dequant(GgmlType type, const void* row, float* dst, int64_t n);  // dequant_avx512.cpp
bool dequant_covers(GgmlType type);  // the types dequant decodes
void gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, bool accumulate);
void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, const float* c_scale);
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

void dequant(GgmlType type, const void* row, float* dst, int64_t n) {
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) return to_f32(type, row, dst, n);
  if (use_avx512() && avx512::dequant(type, row, dst, n)) return;
  type_traits(type).dequant_row(row, dst, n);
}

void gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, bool accumulate) {
  if (use_avx512()) return avx512::gemm_nt(a, lda, b, ldb, c, ldc, m, n, k, accumulate);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float d = dot_f32(a + i * lda, b + j * ldb, k);
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + d : d;
    }
}

void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, const float* c_scale) {
  if (use_avx512()) return avx512::gemm_nn(a, lda, b, ldb, c, ldc, m, n, k, c_scale);
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (c_scale)
      for (int64_t l = 0; l < n; ++l) ci[l] *= c_scale[i];
    for (int64_t j = 0; j < k; ++j) axpy(GgmlType::F32, b + j * ldb, a[i * lda + j], ci, n);
  }
}

float exp_shift(float* x, int64_t n, float m) {
  if (use_avx512()) return avx512::exp_shift(x, n, m);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - m));
  return sum;
}

bool dequant_fast(GgmlType type) {
  if (type == GgmlType::F32) return true;
  if (type == GgmlType::F16 || type == GgmlType::BF16) return use_avx512();
  return use_avx512() && avx512::dequant_covers(type);
}

void round_f16(const float* x, float* y, int64_t n) {
  if (use_avx512()) return avx512::round_f16(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = cpu::fp16_to_f32(cpu::f32_to_fp16(x[i]));
}

void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
  if (use_avx512()) return avx512::silu_mul(gate, up, n, y);
  cpu::ref::silu_glu(gate, up, n, y);
}

}  // namespace kt::kern::vec
