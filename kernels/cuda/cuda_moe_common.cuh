// What the two routed-expert kernels share (cuda_moe.cu: weights on the GPU;
// cuda_moe_streamed.cu: weights copied from host memory per step): SwiGLU and
// the weighted sum of each token's choices, both in double as the reference
// (kernels/cpu/ops_ref_moe.cpp) takes them.
#pragma once

#include <cstdint>

namespace kt::cuda {
namespace {

// y = silu(g) * u over n values.
__global__ void swiglu_kernel(const float* g, const float* u, int64_t n, float* y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float s = float(double(g[i]) / (1.0 + exp(-double(g[i]))));
  y[i] = float(double(s) * double(u[i]));
}

// out[t] = sum_k w[t][k] y[t nu + k], in double, choices in order.
__global__ void combine_experts(const float* __restrict__ y, const float* __restrict__ w, int nu, int64_t n,
                                float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double acc = 0.0;
    for (int k = 0; k < nu; ++k) acc += double(w[t * nu + k]) * double(y[(t * nu + k) * n + i]);
    out[t * n + i] = float(acc);
  }
}

}  // namespace
}  // namespace kt::cuda
