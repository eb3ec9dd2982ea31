// Float-accurate matrix products on tensor cores (cuda_split_gemm.cu): for
// every matrix h of a batch, Y_h = X_h W_h^T with both operands split into two
// f16 halves (22 significant bits each, after scaling by powers of two into
// f16's range) and f32 sums: within ~1e-6 of float32, where a plain f16 GEMM
// is ~1e-3 off. W in its GGUF type, decoded exactly (deq1) as it is read.
// Users: MLA's per-head q_abs and W_V for a prompt's chunk (cuda_mla.cu),
// MatmulOp's float path (F32 weights, Rounding::Exact) from 16 rows, e.g. the
// router's logits over a prompt.
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

// Fewest rows a product takes it for (fewer: the vector kernels, which read
// each weight once for every row).
constexpr int64_t kSplitGemmMinRows = 16;

struct SplitGemmArgs {
  // X: row t of matrix h at x + t * x_stride + h * x_head_stride, K floats.
  const float* x = nullptr;
  int64_t x_stride = 0, x_head_stride = 0;
  // W_h at w + h * mat_bytes. kn false: row n holds the K values of output n
  // (ggml's [K, N] weights, k_b, v_b, kv_b's V half); true: row k holds the N
  // values of input k (kv_b's K half, for q_abs).
  const uint8_t* w = nullptr;
  uint64_t mat_bytes = 0, row_bytes = 0;
  bool kn = false;
  int K = 0, N = 0;
  // Y: row t of matrix h at y + t * y_stride + h * y_head_stride, N floats
  // (+ bias[n] where bias is set); then x's copy_tail values after its K
  // (MLA's q_pe) go to y's columns [N, N + copy_tail).
  float* y = nullptr;
  int64_t y_stride = 0, y_head_stride = 0;
  const float* bias = nullptr;
  int copy_tail = 0;
  int64_t n_rows = 0;
};

// Whether launch_split_gemm takes these (enough rows, float4-aligned rows of x).
bool split_gemm_applies(const SplitGemmArgs& p);
void launch_split_gemm(const SplitGemmArgs& p, GgmlType w_type, int n_mats, void* stream);

}  // namespace kt::cuda
