// MLA's per-head products for a prompt's chunk on tensor cores
// (cuda_mla_proj.cu): Y_h = X_h W_h for every head h, float-accurate (both
// operands split into f16 halves, f32 sums), with W_h a head's block of kv_b,
// k_b or v_b in its GGUF type, decoded as it is read.
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

// Fewest tokens a step takes the tensor-core products for (fewer: the CUDA-core
// kernels, which decode each weight once for 8 tokens; decode's one token its
// own variants).
constexpr int64_t kMlaProjMinTokens = 16;

struct ProjArgs {
  // X: token t, head h at x + t * x_stride + h * x_head_stride, K floats.
  const float *x = nullptr;
  int64_t x_stride = 0, x_head_stride = 0;
  // W_h: head h's matrix at w + h * mat_bytes. kn false: row n holds the K
  // values of output n (k_b, v_b, kv_b's V half); true: row k holds the N
  // values of input k (kv_b's K half for q_abs).
  const uint8_t *w = nullptr;
  uint64_t mat_bytes = 0, row_bytes = 0;
  bool kn = false;
  int K = 0, N = 0;
  // Y: token t, head h at y + t * y_stride + h * y_head_stride, N floats; then
  // x's copy_tail values after its K (q_pe) go to y's columns [N, N +
  // copy_tail).
  float *y = nullptr;
  int64_t y_stride = 0, y_head_stride = 0;
  int copy_tail = 0;
  int64_t n_tokens = 0;
};

// Whether launch_mla_proj takes these (enough tokens, float4-aligned rows of
// x).
bool mla_proj_applies(const ProjArgs &p);
void launch_mla_proj(const ProjArgs &p, GgmlType w_type, int n_heads, void *stream);

}  // namespace kt::cuda
