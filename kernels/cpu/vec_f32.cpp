// The portable loops and the dispatch (vec_f32.h). The AVX-512 versions live
// in vec_f32_avx512.cpp, compiled with those instructions and called only
// when cpu_features says the CPU has them (the same pattern as matmul_q).
#include "kernels/cpu/vec_f32.h"

#include <algorithm>
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
int64_t argmax(const float* x, int64_t n);
float exp_shift(float* x, int64_t n, float m);
void attend_lanes(const float* qt, int64_t k, const float* rows, int64_t ld, int64_t nb, int64_t kv, float scale,
                  float* m, float* l, float* ot);
void merge_lanes(const float* part0, int64_t stride, int64_t n_parts, const float* f, int64_t n, float* o,
                 int64_t ldo, int64_t nh);
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

void attend_lanes(const float* qt, int64_t k, const float* rows, int64_t ld, int64_t nb, int64_t kv, float scale,
                  float* m, float* l, float* ot) {
  if (use_avx512()) return avx512::attend_lanes(qt, k, rows, ld, nb, kv, scale, m, l, ot);
  float s[kLanes][kLanes], alpha[kLanes];
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t h = 0; h < kLanes; ++h) {
      float acc = 0;
      for (int64_t c = 0; c < k; ++c) acc += qt[c * kLanes + h] * rows[j * ld + c];
      s[j][h] = scale * acc;
    }
  for (int64_t h = 0; h < kLanes; ++h) {
    float m_new = m[h];
    for (int64_t j = 0; j < nb; ++j) m_new = std::max(m_new, s[j][h]);
    alpha[h] = std::exp(m[h] - m_new);  // 0 from m = -inf
    float sum = 0;
    for (int64_t j = 0; j < nb; ++j) sum += (s[j][h] = std::exp(s[j][h] - m_new));
    l[h] = alpha[h] * l[h] + sum;
    m[h] = m_new;
  }
  for (int64_t c = 0; c < kv; ++c)
    for (int64_t h = 0; h < kLanes; ++h) {
      float acc = alpha[h] * ot[c * kLanes + h];
      for (int64_t j = 0; j < nb; ++j) acc += s[j][h] * rows[j * ld + c];
      ot[c * kLanes + h] = acc;
    }
}

void merge_lanes(const float* part0, int64_t stride, int64_t n_parts, const float* f, int64_t n, float* o,
                 int64_t ldo, int64_t nh) {
  if (use_avx512()) return avx512::merge_lanes(part0, stride, n_parts, f, n, o, ldo, nh);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t h = 0; h < nh; ++h) {
      float acc = 0;
      for (int64_t i = 0; i < n_parts; ++i) acc += f[i * kLanes + h] * part0[i * stride + c * kLanes + h];
      o[h * ldo + c] = acc;
    }
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

int64_t argmax(const float* x, int64_t n) {
  if (use_avx512()) return avx512::argmax(x, n);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace kt::kern::vec
