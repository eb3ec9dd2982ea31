// What the two routed-expert kernels share (cuda_moe.cu: a step's pairs one
// by one; cuda_moe_grouped.cu: tokens grouped by expert, weights resident or
// streamed): SwiGLU and the weighted sum of each token's choices, both in
// double as the reference (kernels/cpu/ops_ref_moe.cpp) takes them. The
// SwiGLU kernel also serves cuda.matmul_glu's steps that run three kernels.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_launch.cuh"

namespace kt::cuda {
namespace {

// y = silu(g) * u over n values.
__global__ void swiglu_kernel(const float* g, const float* u, int64_t n, float* y) {
  wait_for_inputs();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = swiglu_value(g[i], u[i]);
}

// out[t] = sum_k w[t][k] y[t nu + k], in double, choices in order. Block
// (i, t): 256 values of token t; each thread loads its choices' values (up to
// 16 at once) before summing, so a decode token costs one memory latency, not
// one per choice (V2-Lite's 6 x 2048, ncu on an H200: 12.7 us with one block a
// token and a loop over the choices, 3.2 now).
__global__ void combine_experts(const float* __restrict__ y, const float* __restrict__ w, int nu, int64_t n,
                                float* __restrict__ out) {
  wait_for_inputs();
  const int64_t t = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double acc = 0.0;
  for (int k0 = 0; k0 < nu; k0 += 16) {
    float wv[16], yv[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const bool in = k0 + k < nu;
      wv[k] = in ? w[t * nu + k0 + k] : 0.0f;
      yv[k] = in ? y[(t * nu + k0 + k) * n + i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k)
      if (k0 + k < nu) acc += double(wv[k]) * double(yv[k]);
  }
  out[t * n + i] = float(acc);
}

inline dim3 combine_grid(int64_t n, int64_t tokens) { return dim3(unsigned((n + 255) / 256), unsigned(tokens)); }

}  // namespace
}  // namespace kt::cuda
