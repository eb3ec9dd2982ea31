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
// dst[i] = value i of a GGUF row of n values (n a multiple of the type's block
// size), bit for bit what type_traits(type).dequant_row gives; AVX-512 for
// Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, IQ4_XS and F32/F16/BF16, the reference decoder
// otherwise.
void dequant(GgmlType type, const void* row, float* dst, int64_t n);
// Whether dequant has a vector decoder for this type on this CPU (else it runs
// the reference decoder, ~10x slower: callers that decode the same rows often
// may keep a float copy instead).
bool dequant_fast(GgmlType type);
// Small float products for attention over a block of cached rows (row-major,
// leading dimensions in floats), accumulated in float in any order:
// gemm_nt: C[i][j] (+)= sum_k A[i][k] * B[j][k] for i < m, j < n (+= when
//   accumulate, = otherwise).
// gemm_nn: C[i][l] = c_scale[i] * C[i][l] + sum_j A[i][j] * B[j][l] for i < m,
//   l < n, j < k (c_scale null: 1).
void gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, bool accumulate);
void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, const float* c_scale);
// Latent attention with a group of up to kLanes heads in the lanes of a vector
// (cpu.mla_attention_absorbed): every head of the group meets a cached row in
// one multiply-add, with no horizontal sums. Queries in lanes: qt[c][h].
constexpr int64_t kLanes = 16;
// One block of nb <= kLanes cached rows (rows[j * ld + c], rows past nb not
// read) for one token, an online-softmax step:
//   s[j][h] = scale * sum_{c < k} qt[c][h] * rows[j][c]
//   m' = max(m, max_j s[j]), alpha = exp(m - m'), p[j] = exp(s[j] - m')
//   l = alpha * l + sum_j p[j]; ot[c][h] = alpha * ot[c][h] + sum_j p[j][h] * rows[j][c]
//   for c < kv; m = m'. m, l: [kLanes]; ot: [kv][kLanes]. Start from m = -inf,
//   l = 0, ot = 0. exp within ~2 ulp (exp_shift's).
void attend_lanes(const float* qt, int64_t k, const float* rows, int64_t ld, int64_t nb, int64_t kv, float scale,
                  float* m, float* l, float* ot);
// o[h * ldo + c] = sum_{i < n_parts} f[i][h] * part_i[c][h] for c < n, h < nh
// (nh <= kLanes), part_i = part0 + i * stride: partial attended rows in lanes
// merged and written one head a row. f: [n_parts][kLanes].
void merge_lanes(const float* part0, int64_t stride, int64_t n_parts, const float* f, int64_t n, float* o,
                 int64_t ldo, int64_t nh);
// x[i] = exp(x[i] - m) (softmax weights: x[i] <= m) and their sum; within
// ~2 ulp of the exact exp (the AVX-512 path's polynomial); arguments below
// -104 give 0 or a denormal, as exp in float does.
float exp_shift(float* x, int64_t n, float m);
// y[i] = x[i] rounded to F16 (nearest even, as F16C and float_ref's
// f32_to_fp16) and back; y may be x.
void round_f16(const float* x, float* y, int64_t n);
// y[i] = silu(gate[i]) * up[i] in float (y may be gate): within ~2 ulp of the
// reference's ref::silu_glu (computed in double), which the portable path is.
void silu_mul(const float* gate, const float* up, int64_t n, float* y);

// The first index of the largest of x[0..n) (n > 0), as a scalar loop keeping
// the first x[i] > best finds it: among equal values (-0 and +0 included) the
// lowest index. x holds no NaN (a sampler's logits, sanitized). A greedy pick
// over a 102400-token vocabulary took 172 us a token as that loop on the
// device's Xeon: 12% of an all-GPU V3-5L decode step.
int64_t argmax(const float* x, int64_t n);

}  // namespace kt::kern::vec
