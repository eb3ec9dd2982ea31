// Rope and the MLA cache store as device code other kernels run inside their
// own launches: cuda_rope.cu's kernels, and cuda_mla.cu's one-token MLA
// preparation (q's rope, the cache store and q_abs side by side).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/kernel.h"
#include "kernels/type_traits.h"

namespace kt::cuda {

struct RopeArgs {
  int n_dims;
  bool neox;
  float freq_scale, ext_factor, mscale, theta_scale;
  float corr0, corr1;
};

// theta_scale, YaRN's correction dims and magnitude factor, computed on the
// host with the reference's own code (cuda_rope.cu).
RopeArgs rope_args(const cpu::ref::RopeParams& p);

// Pair i (of n_dims / 2) of the head at src, rotated at position pos, into the
// same places of dst (src may be dst).
__device__ __forceinline__ void rope_pair(const RopeArgs& r, int32_t pos, int i, const float* src, float* dst) {
  float theta_extrap = float(pos);
  for (int k = 0; k < i; ++k) theta_extrap = __fmul_rn(theta_extrap, r.theta_scale);
  const float theta_interp = __fmul_rn(r.freq_scale, theta_extrap);
  float theta = theta_interp;
  if (r.ext_factor != 0.0f) {
    const float y = __fdiv_rn(__fsub_rn(float(i), r.corr0), fmaxf(0.001f, __fsub_rn(r.corr1, r.corr0)));
    const float ramp = __fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y)));
    const float mix = __fmul_rn(ramp, r.ext_factor);
    theta = __fadd_rn(__fmul_rn(theta_interp, __fsub_rn(1.0f, mix)), __fmul_rn(theta_extrap, mix));
  }
  const float c = __fmul_rn(cosf(theta), r.mscale), s = __fmul_rn(sinf(theta), r.mscale);
  const int a = r.neox ? i : 2 * i, b = r.neox ? i + r.n_dims / 2 : 2 * i + 1;
  const float x0 = src[a], x1 = src[b];
  dst[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  dst[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

template <class E>
__device__ __forceinline__ void store_as(E* dst, float v) {
  if constexpr (std::is_same_v<E, float>)
    *dst = v;
  else if constexpr (std::is_same_v<E, __half>)
    *dst = __float2half_rn(v);
  else
    *dst = __float2bfloat16_rn(v);
}

// Block t: rms_norm(kv_a[t][0, r)) * norm into the latent cache, rope(kv_a[t][r,
// r + dr)) into the rope-key cache, at (slot[t], pos[t]). A decode token is one
// block, so its time is a chain of latencies: every load is issued before the
// first sum (the latent values and norm weights in registers, up to kStoreRegs
// a thread; the rope part into shared memory), and the rope's pairs rotate
// while the latent row is stored.
constexpr int kStoreRegs = 4;
constexpr int kStoreThreads = 256;
// The arguments of one MLA cache store (a kernel parameter).
template <class E>
struct MlaStore {
  const float* x;  // the kv_a product's rows
  int64_t cols, r, dr;
  const float* norm;
  float eps;
  RopeArgs ra;
  int64_t n_ctx;
  E* lat;
  E* pe;
};

// Needs dr floats of dynamic shared memory and kStoreThreads threads.
template <class E>
__device__ __forceinline__ void mla_store_block(const MlaStore<E>& a, const int32_t* __restrict__ slot,
                                                const int32_t* __restrict__ pos, int64_t t) {
  extern __shared__ float pe_s[];  // dr values
  __shared__ double red[32];
  const float* __restrict__ x = a.x;
  const float* __restrict__ norm = a.norm;
  E* __restrict__ lat = a.lat;
  E* __restrict__ pe = a.pe;
  const int64_t cols = a.cols, r = a.r, dr = a.dr;
  const RopeArgs& ra = a.ra;
  const float* row = x + t * cols;
  const int64_t cache_row = int64_t(slot[t]) * a.n_ctx + pos[t];
  const int32_t p = pos[t];
  for (int64_t i = threadIdx.x; i < dr; i += blockDim.x) pe_s[i] = row[r + i];
  const int64_t step = blockDim.x;
  if (r <= kStoreRegs * step) {
    float v[kStoreRegs], nv[kStoreRegs];
    const double ss = load_row_sum_squares(row, norm, r, v, nv, red);  // its barrier publishes pe_s
    for (int i = threadIdx.x; i < ra.n_dims / 2; i += blockDim.x) rope_pair(ra, p, i, pe_s, pe_s);
    const double inv = 1.0 / sqrt(ss / double(r) + double(a.eps));
#pragma unroll
    for (int k = 0; k < kStoreRegs; ++k) {
      const int64_t i = threadIdx.x + k * step;
      if (i < r) store_as(lat + cache_row * r + i, float(double(v[k]) * inv * double(nv[k])));
    }
  } else {
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < r; i += step) ss += double(row[i]) * double(row[i]);
    ss = block_sum(ss, red);
    for (int i = threadIdx.x; i < ra.n_dims / 2; i += blockDim.x) rope_pair(ra, p, i, pe_s, pe_s);
    const double inv = 1.0 / sqrt(ss / double(r) + double(a.eps));
    for (int64_t i = threadIdx.x; i < r; i += step)
      store_as(lat + cache_row * r + i, float(double(row[i]) * inv * double(norm[i])));
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < dr; i += blockDim.x) store_as(pe + cache_row * dr + i, pe_s[i]);
}

// The store of x's rows (cols values each: r latents, then dr rope values)
// into kv's latent cache, normed by norm.
template <class E>
MlaStore<E> mla_store_args(const float* x, int64_t cols, const kern::KvView& kv, const float* norm, float eps,
                           const RopeArgs& r) {
  return {x, cols, kv.k_cols, kv.v_cols, norm, eps, r, kv.n_ctx, static_cast<E*>(kv.k), static_cast<E*>(kv.v)};
}

// cuda.rope_mla_store's launch (cuda_rope.cu): q's rows roped into qr (rows of
// q_cols, n_heads heads of head_dim, the rope at offset), and the store a.
template <class E>
void launch_rope_mla_store(const float* q, float* qr, int64_t rows, int64_t q_cols, int64_t n_heads, int64_t head_dim,
                           int64_t offset, const RopeArgs& r, const MlaStore<E>& a, const int32_t* slot,
                           const int32_t* pos, cudaStream_t s);

}  // namespace kt::cuda
