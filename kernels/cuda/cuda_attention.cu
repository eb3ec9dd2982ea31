// The split-K attention kernel (cuda_attention.cuh) and cuda.attention.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_latent_rounding.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/kernel_bind.h"

namespace kt::cuda {

namespace {

constexpr int kTile = 32;     // keys per shared-memory tile
constexpr int kThreads = 256;

// Shared-memory layout (floats), the same on host and device.
struct Layout {
  int dk_pad, dk4, ks;  // query/key dims padded to 4; key row stride (odd in float4s: no bank conflicts)
  int dv_pad, dv4;
  int nhs;              // head sets in the PV phase: thread tid owns value columns 4 (tid % dv4) of head set tid / dv4
  int ghp, n_hq, ds;    // heads padded to 4; head quads; dot-product splits per head quad
  int pp;               // row width of P (heads)
  int q_off, k_off, v_off, sp_off, p_off, m_off, l_off, c_off, total;

  __host__ __device__ Layout(const AttnArgs& a, int hpt, bool mla) {
    dk_pad = (a.dk + 3) / 4 * 4;
    dk4 = dk_pad / 4;
    ks = 4 * (dk4 % 2 == 0 ? dk4 + 1 : dk4);
    dv_pad = (a.dv + 3) / 4 * 4;
    dv4 = dv_pad / 4;
    nhs = dv4 <= kThreads ? kThreads / dv4 : 1;
    ghp = (a.gh + 3) / 4 * 4;
    n_hq = ghp / 4;
    ds = n_hq >= 8 ? 1 : 8 / n_hq;
    const int hmax = nhs * hpt > ghp ? nhs * hpt : ghp;
    pp = (hmax + 3) / 4 * 4;
    int o = 0;
    auto take = [&](int n) {
      const int at = o;
      o += (n + 3) / 4 * 4;
      return at;
    };
    q_off = take(ghp * dk_pad);
    k_off = take(kTile * ks);
    v_off = mla ? k_off : take(kTile * dv_pad);
    sp_off = take(ds * ghp * 33);
    p_off = take(kTile * pp);
    m_off = take(pp);
    l_off = take(pp);
    c_off = take(pp);
    total = o;
  }
};

// Rows [0, 32) of len values (row stride src_stride elements) into dst rows
// (stride dst_stride floats), zero past len up to len_pad and for rows >=
// n_rows. Each thread issues kBatch 16-byte loads before it stores any: a
// tile load is one memory round trip, not one per chunk (8 in flight was
// slower: registers, kernels/cuda/README.md). Whole chunks are stored as
// float4s where dst allows (ncu: the tile is bound by its instruction count
// at 8 warps an SM).
template <class E>
__device__ void load_rows(float* dst, int dst_stride, const E* src, int64_t src_stride, int len, int len_pad,
                          int n_rows, bool vec, bool round16) {
  constexpr int VE = 16 / sizeof(E);
  constexpr int kBatch = 4;
  const int nch = (len_pad + VE - 1) / VE;
  const int total = kTile * nch;
  for (int base = threadIdx.x; base < total; base += kBatch * blockDim.x) {
    float v[kBatch][VE];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * int(blockDim.x);
      const int j = idx / nch, d0 = (idx % nch) * VE;
      const bool live = idx < total && j < n_rows;
      const E* row = src + j * src_stride;
      if (live && vec && d0 + VE <= len) {
        const uint4 u = *reinterpret_cast<const uint4*>(row + d0);
        const E* e = reinterpret_cast<const E*>(&u);
#pragma unroll
        for (int k = 0; k < VE; ++k) v[b][k] = to_f(e[k]);
      } else {
#pragma unroll
        for (int k = 0; k < VE; ++k) v[b][k] = (live && d0 + k < len) ? to_f(row[d0 + k]) : 0.0f;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * int(blockDim.x);
      if (idx >= total) continue;
      const int j = idx / nch, d0 = (idx % nch) * VE;
      float* out = dst + j * dst_stride + d0;
#pragma unroll
      for (int k = 0; k < VE; ++k) v[b][k] = round16 ? round_f16(v[b][k]) : v[b][k];
      if (d0 + VE <= len_pad && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {
#pragma unroll
        for (int k = 0; k < VE; k += 4)
          *reinterpret_cast<float4*>(out + k) = make_float4(v[b][k], v[b][k + 1], v[b][k + 2], v[b][k + 3]);
      } else {
#pragma unroll
        for (int k = 0; k < VE; ++k)
          if (d0 + k < len_pad) out[k] = v[b][k];
      }
    }
  }
}

// MLA's latents of positions [0, *pos_last] of cache slot *slot, rounded once
// for every block of the split kernel (round_latent_rows_block).
template <class E>
__global__ void __launch_bounds__(kRoundThreads) round_latent_rows(const E* __restrict__ cache, int64_t n_ctx, int r,
                                                                   int mode, const int32_t* __restrict__ slot,
                                                                   const int32_t* __restrict__ pos_last,
                                                                   int8_t* __restrict__ out_q,
                                                                   float* __restrict__ out_d) {
  wait_for_inputs();
  round_latent_rows_block(cache, n_ctx, r, mode, *slot, int(blockIdx.x) * kRoundRows, *pos_last + 1, out_q, out_d);
}

// A tile of latents rounded already (round_latent_rows): rows [0, n_rows) of r
// values as d * q, zero in rows up to kTile. 16 values a chunk (one block's
// scale), each thread's chunks loaded before any is stored, as load_rows.
__device__ void load_rounded_rows(float* dst, int dst_stride, const int8_t* q, const float* d, int r, int n_rows) {
  constexpr int kBatch = 4;
  const int nch = r / 16;
  const int total = kTile * nch;
  for (int base = threadIdx.x; base < total; base += kBatch * blockDim.x) {
    uint4 u[kBatch];
    float s[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * int(blockDim.x);
      const int j = idx / nch, c = (idx % nch) * 16;
      u[b] = make_uint4(0, 0, 0, 0);
      s[b] = 0.0f;
      if (idx < total && j < n_rows) {
        u[b] = *reinterpret_cast<const uint4*>(q + int64_t(j) * r + c);
        s[b] = d[int64_t(j) * (r / 32) + c / 32];
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * int(blockDim.x);
      if (idx >= total) continue;
      const int j = idx / nch, c = (idx % nch) * 16;
      const int8_t* v = reinterpret_cast<const int8_t*>(&u[b]);
      float4* out = reinterpret_cast<float4*>(dst + j * dst_stride + c);
#pragma unroll
      for (int k = 0; k < 16; k += 4)
        out[k / 4] = make_float4(__fmul_rn(s[b], float(v[k])), __fmul_rn(s[b], float(v[k + 1])),
                                 __fmul_rn(s[b], float(v[k + 2])), __fmul_rn(s[b], float(v[k + 3])));
    }
  }
}

template <class E, int HPT, bool MLA>
__global__ void __launch_bounds__(kThreads, 1) attn_split(AttnArgs a) {
  extern __shared__ float4 smem4[];
  wait_for_inputs();
  float* sm = reinterpret_cast<float*>(smem4);
  const Layout L(a, HPT, MLA);
  float* Qs = sm + L.q_off;
  float* Ks = sm + L.k_off;
  float* Vs = sm + L.v_off;
  float* Sp = sm + L.sp_off;
  float* Ps = sm + L.p_off;
  float* Ms = sm + L.m_off;
  float* Ls = sm + L.l_off;
  float* Cs = sm + L.c_off;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x;
  const int h0 = blockIdx.y * a.gh;
  const int64_t t = blockIdx.z;
  const int gh = min(a.gh, a.n_heads - h0);
  const int kvh = MLA ? 0 : h0 / a.group;
  const int n_valid = a.pos[t] + 1;
  const int64_t slot = a.slot[t];
  const int tile0 = split * a.tiles_per_split;
  const int tile1 = min(tile0 + a.tiles_per_split, (n_valid + kTile - 1) / kTile);

  const bool qvec = a.dk % 4 == 0 && a.q_stride % 4 == 0 && a.q_head_stride % 4 == 0 &&
                    (reinterpret_cast<uintptr_t>(a.q) & 15) == 0;
  if (qvec) {
#pragma unroll 4
    for (int idx = tid; idx < L.ghp * L.dk4; idx += kThreads) {
      const int g = idx / L.dk4, d4 = idx % L.dk4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (g < gh) v = *reinterpret_cast<const float4*>(a.q + t * a.q_stride + int64_t(h0 + g) * a.q_head_stride + 4 * d4);
      if (a.round_kv) v = make_float4(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w));
      reinterpret_cast<float4*>(Qs)[idx] = v;
    }
  } else {
    for (int idx = tid; idx < L.ghp * L.dk_pad; idx += kThreads) {
      const int g = idx / L.dk_pad, d = idx % L.dk_pad;
      float v = 0.0f;
      if (g < gh && d < a.dk) v = a.q[t * a.q_stride + int64_t(h0 + g) * a.q_head_stride + d];
      Qs[idx] = a.round_kv ? round_f16(v) : v;
    }
  }
  for (int idx = tid; idx < kTile * L.pp; idx += kThreads) Ps[idx] = 0.0f;
  for (int g = tid; g < L.pp; g += kThreads) {
    Ms[g] = -INFINITY;
    Ls[g] = 0.0f;
    Cs[g] = 1.0f;
  }
  const int hs = tid / L.dv4, c4 = tid % L.dv4;
  const bool pv = hs < L.nhs;
  float4 acc[HPT];
#pragma unroll
  for (int k = 0; k < HPT; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();

  for (int tile = tile0; tile < tile1; ++tile) {
    const int key0 = tile * kTile;
    const int nk = min(kTile, n_valid - key0);
    const int64_t row0 = slot * a.n_ctx + key0;
    if constexpr (MLA) {
      if (a.lat_q)  // rounded already (round_latent_rows), rows by position
        load_rounded_rows(Ks, L.ks, a.lat_q + int64_t(key0) * a.dv, a.lat_d + int64_t(key0) * (a.dv / 32), a.dv, nk);
      else
        load_rows<E>(Ks, L.ks, static_cast<const E*>(a.k) + row0 * a.k_cols, a.k_cols, a.dv, a.dv, nk, a.vec, false);
      load_rows<E>(Ks + a.dv, L.ks, static_cast<const E*>(a.v) + row0 * a.v_cols, a.v_cols, a.dk - a.dv,
                   L.dk_pad - a.dv, nk, a.vec, false);
      if (a.round_lat && !a.lat_q) {
        __syncthreads();
        round_latents(Ks, L.ks, a.dv, nk, a.round_lat);
      }
    } else {
      load_rows<E>(Ks, L.ks, static_cast<const E*>(a.k) + row0 * a.k_cols + int64_t(kvh) * a.dk, a.k_cols, a.dk,
                   L.dk_pad, nk, a.vec, a.round_kv != 0);
      load_rows<E>(Vs, L.dv_pad, static_cast<const E*>(a.v) + row0 * a.v_cols + int64_t(kvh) * a.dv, a.v_cols, a.dv,
                   L.dv_pad, nk, a.vec, a.round_kv != 0);
    }
    __syncthreads();

    // Scores: warp item (head quad, slice of the dims), lane = key.
    for (int item = warp; item < L.n_hq * L.ds; item += kThreads / 32) {
      const int hq = item / L.ds, dsi = item % L.ds;
      const float4* kr = reinterpret_cast<const float4*>(Ks + lane * L.ks);
      const float4* q0 = reinterpret_cast<const float4*>(Qs + (4 * hq) * L.dk_pad);
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      for (int d4 = dsi; d4 < L.dk4; d4 += L.ds) {
        const float4 kv = kr[d4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float4 qv = q0[k * L.dk4 + d4];
          s[k] = fmaf(qv.x, kv.x, fmaf(qv.y, kv.y, fmaf(qv.z, kv.z, fmaf(qv.w, kv.w, s[k]))));
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) Sp[(dsi * L.ghp + 4 * hq + k) * 33 + lane] = s[k];
    }
    __syncthreads();

    // Online softmax, one warp per head.
    for (int g = warp; g < gh; g += kThreads / 32) {
      float sc = 0.0f;
      for (int d = 0; d < L.ds; ++d) sc += Sp[(d * L.ghp + g) * 33 + lane];
      sc = lane < nk ? sc * a.scale : -INFINITY;
      const float m_old = Ms[g];
      const float m_new = fmaxf(m_old, warp_max(sc));
      float p = 0.0f, corr = 1.0f;
      if (m_new != -INFINITY) {
        p = lane < nk ? expf(sc - m_new) : 0.0f;
        corr = expf(m_old - m_new);
      }
      const float sum = warp_sum(p);
      Ps[lane * L.pp + g] = p;
      if (lane == 0) {
        Cs[g] = corr;
        Ms[g] = m_new;
        Ls[g] = Ls[g] * corr + sum;
      }
    }
    __syncthreads();

    // acc[head][c] = acc * corr + sum_j p[j][head] V[j][c].
    if (pv) {
      const int vs = MLA ? L.ks : L.dv_pad;
#pragma unroll
      for (int k = 0; k < HPT; ++k) {
        const float c = Cs[hs * HPT + k];
        acc[k].x *= c, acc[k].y *= c, acc[k].z *= c, acc[k].w *= c;
      }
      for (int j = 0; j < nk; ++j) {
        const float4 vv = reinterpret_cast<const float4*>(Vs + j * vs)[c4];
        float p[HPT];
        if constexpr (HPT % 4 == 0) {
#pragma unroll
          for (int k = 0; k < HPT; k += 4) {
            const float4 pv4 = *reinterpret_cast<const float4*>(Ps + j * L.pp + hs * HPT + k);
            p[k] = pv4.x, p[k + 1] = pv4.y, p[k + 2] = pv4.z, p[k + 3] = pv4.w;
          }
        } else {
#pragma unroll
          for (int k = 0; k < HPT; ++k) p[k] = Ps[j * L.pp + hs * HPT + k];
        }
#pragma unroll
        for (int k = 0; k < HPT; ++k) {
          acc[k].x = fmaf(p[k], vv.x, acc[k].x);
          acc[k].y = fmaf(p[k], vv.y, acc[k].y);
          acc[k].z = fmaf(p[k], vv.z, acc[k].z);
          acc[k].w = fmaf(p[k], vv.w, acc[k].w);
        }
      }
    }
    __syncthreads();
  }

  if (!pv) return;
#pragma unroll
  for (int k = 0; k < HPT; ++k) {
    const int g = hs * HPT + k;
    if (g >= gh) continue;
    const float vals[4] = {acc[k].x, acc[k].y, acc[k].z, acc[k].w};
    if (a.n_split == 1) {
      const float l = Ls[g];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float* o = a.out + t * a.out_stride + int64_t(h0 + g) * a.out_head_stride;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (4 * c4 + e < a.dv) o[4 * c4 + e] = vals[e] * inv;
    } else {
      float* part = a.partial + ((t * a.n_heads + h0 + g) * a.n_split + split) * int64_t(a.dv + 2);
      if (c4 == 0) {
        part[0] = Ms[g];
        part[1] = Ls[g];
      }
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (4 * c4 + e < a.dv) part[2 + 4 * c4 + e] = vals[e];
    }
  }
}

// Block (token x head, y): merges the splits' (max, sum, acc) for a share of
// the head's values; every block of the head weighs the splits itself.
__global__ void __launch_bounds__(128) attn_combine(const float* __restrict__ partial, int n_split, int dv,
                                                    int n_heads, float* __restrict__ out, int64_t out_stride,
                                                    int64_t out_head_stride) {
  extern __shared__ float w[];  // n_split weights
  __shared__ float red[32];
  wait_for_inputs();
  const int64_t th = blockIdx.x;
  const int64_t t = th / n_heads, h = th % n_heads;
  const int64_t stride = dv + 2;
  const float* base = partial + th * n_split * stride;
  float m = -INFINITY;
  for (int s = threadIdx.x; s < n_split; s += blockDim.x) m = fmaxf(m, base[s * stride]);
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = -INFINITY;
  for (int k = 0; k < int(blockDim.x >> 5); ++k) m = fmaxf(m, red[k]);
  float l = 0.0f;
  for (int s = threadIdx.x; s < n_split; s += blockDim.x) {
    const float ms = base[s * stride];
    const float ws = ms == -INFINITY ? 0.0f : expf(ms - m);
    w[s] = ws;
    l += ws * base[s * stride + 1];
  }
  l = block_sum(l, red);  // also makes w visible to every thread
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* o = out + t * out_stride + h * out_head_stride;
  // Block y: values [128 y, 128 y + 128), one a thread (a decode head is one
  // block row: its splits' loads for a value all in flight at once).
  for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < dv; c += gridDim.y * blockDim.x) {
    float acc = 0.0f;
#pragma unroll 16
    for (int s = 0; s < n_split; ++s) acc = fmaf(w[s], base[s * stride + 2 + c], acc);
    o[c] = acc * inv;
  }
}

int hpt_for(const AttnArgs& a) {
  const int dv4 = (a.dv + 3) / 4;
  const int nhs = dv4 <= kThreads ? kThreads / dv4 : 1;
  for (int h : {1, 2, 4})
    if (nhs * h >= a.gh) return h;
  return 8;
}

template <class E, int HPT, bool MLA>
void launch_split(const AttnArgs& a, int64_t n_tokens, cudaStream_t s) {
  const Layout L(a, HPT, MLA);
  const size_t smem = size_t(L.total) * 4;
  allow_shared_memory<attn_split<E, HPT, MLA>>(smem);
  const dim3 grid(unsigned(a.n_split), unsigned(ceil_div(a.n_heads, a.gh)), unsigned(n_tokens));
  launch(attn_split<E, HPT, MLA>, grid, kThreads, smem, s, a);
}

template <class E>
void launch_typed(const AttnArgs& a, bool mla, int64_t n_tokens, cudaStream_t s) {
  const int hpt = hpt_for(a);
  auto go = [&](auto hc, auto mc) {
    launch_split<E, decltype(hc)::value, decltype(mc)::value>(a, n_tokens, s);
  };
  auto with_mla = [&](auto hc) {
    if (mla)
      go(hc, std::true_type{});
    else
      go(hc, std::false_type{});
  };
  switch (hpt) {
    case 1: with_mla(std::integral_constant<int, 1>{}); break;
    case 2: with_mla(std::integral_constant<int, 2>{}); break;
    case 4: with_mla(std::integral_constant<int, 4>{}); break;
    default: with_mla(std::integral_constant<int, 8>{}); break;
  }
}

}  // namespace

int attention_heads_per_block(int dv, int need, bool divides) {
  const int dv4 = (dv + 3) / 4;
  const int nhs = dv4 <= kThreads ? kThreads / dv4 : 1;
  const int cap = nhs * 8;
  if (need <= cap) return need;
  if (!divides) return cap;
  for (int g = cap; g > 1; --g)
    if (need % g == 0) return g;
  return 1;
}

size_t attention_smem(const AttnArgs& a, bool mla) {
  const Layout L(a, hpt_for(a), mla);
  return size_t(L.total) * 4;
}

void launch_attention(const AttnArgs& a, GgmlType cache_type, bool mla, int64_t n_tokens, void* stream) {
  if (n_tokens <= 0) return;
  if (mla && mla_mma_applies(a, n_tokens)) {
    launch_mla_mma(a, cache_type, n_tokens, stream);
    check_launch("cuda mla attention (tensor cores)", stream);
    return;
  }
  auto s = static_cast<cudaStream_t>(stream);
  with_cache_type(cache_type, [&](auto e) { launch_typed<decltype(e)>(a, mla, n_tokens, s); });
  check_launch(mla ? "cuda mla attention" : "cuda.attention", stream);
  if (a.n_split > 1) {
    const dim3 grid(unsigned(n_tokens * a.n_heads), unsigned(std::min<int64_t>(ceil_div(a.dv, 128), 8)));
    launch(attn_combine, grid, 128, size_t(a.n_split) * 4, s, a.partial, a.n_split, a.dv, a.n_heads, a.out,
           a.out_stride, a.out_head_stride);
    check_launch("cuda attention (combine)", stream);
  }
}

void launch_round_latents(const AttnArgs& a, GgmlType cache_type, int64_t n_tokens, int max_pos, int8_t* out_q,
                          float* out_d, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  // Blocks for rows up to the horizon (the rest return at once): the grid, like
  // the split kernel's, stays the same for 256 decode steps.
  const unsigned blocks = unsigned(ceil_div(split_horizon(max_pos) + 1, kRoundRows));
  const size_t smem = size_t(kRoundRows) * size_t(a.dv) * 4;
  with_cache_type(cache_type, [&](auto e) {
    using E = decltype(e);
    launch(round_latent_rows<E>, blocks, kRoundThreads, smem, s, static_cast<const E*>(a.k), a.n_ctx, a.dv, a.round_lat,
           a.slot, a.pos + (n_tokens - 1), out_q, out_d);
  });
  check_launch("cuda mla attention (latents rounded)", stream);
}

// Splits of the keys: enough blocks to fill the GPU twice, at least one tile
// each, and no more partials than max_partial_floats holds.
void plan_splits(AttnArgs& a, int64_t n_tokens, int max_pos, int sms, uint64_t max_partial_floats) {
  const int tiles = (split_horizon(max_pos) + 1 + kTile - 1) / kTile;
  const int64_t base = n_tokens * ceil_div(a.n_heads, a.gh);
  // As many splits as fill the GPU twice, down to one tile a split: a tile's
  // loads and softmax are a chain of latencies, so short caches gain from
  // more, shorter splits (V2-Lite MLA decode at 512 positions, H100: 26.6 us
  // with one tile a split against 34.7 with two; cuda_bench_test's sweep).
  int n = int(std::min<int64_t>(std::max(1, tiles), std::max<int64_t>(1, ceil_div(2 * int64_t(sms), base))));
  while (n > 1 && uint64_t(n_tokens) * a.n_heads * n * (a.dv + 2) > max_partial_floats) n = (n + 1) / 2;
  a.tiles_per_split = int(ceil_div(tiles, n));
  a.n_split = int(ceil_div(tiles, a.tiles_per_split));
}

uint64_t partial_floats_bound(int n_heads, int gh, int dv, int sms) {
  // n_split > 1 only while tokens x head blocks < 2 sms, so tokens x heads x
  // splits stays below 4 sms x heads per block.
  (void)n_heads;
  return uint64_t(4) * sms * gh * (dv + 2) + 1;
}

}  // namespace kt::cuda

// ---- cuda.attention -------------------------------------------------------------

namespace kt::kern {

namespace {

class CudaAttention final : public Kernel {
 public:
  CudaAttention(int device, cuda::AttnArgs base, uint64_t partial_floats)
      : device_(device), base_(base), partial_floats_(partial_floats) {}

  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &q = a.in[0], &y = a.out[0];
    if (q.rows == 0) return;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    cuda::AttnArgs args = split(a);
    args.q = q.f32();
    args.k = a.kv->k;
    args.v = a.kv->v;
    args.pos = st.pos;
    args.slot = st.slot;
    args.out = y.f32();
    args.partial = static_cast<float*>(cuda::workspace(device_));
    cuda::launch_attention(args, a.kv->type, false, q.rows, a.queue);
  }
  std::string_view impl() const override { return "split-k"; }
  bool capturable(const CallArgs&) const override { return true; }
  // The cache's split into blocks follows the step's furthest position.
  uint64_t graph_key(const CallArgs& a) const override {
    const cuda::AttnArgs s = split(a);
    return uint64_t(s.n_split) << 32 | uint32_t(s.tiles_per_split);
  }

 private:
  cuda::AttnArgs split(const CallArgs& a) const {
    int32_t max_pos = 0;
    for (int64_t t = 0; t < a.step->n_tokens; ++t) max_pos = std::max(max_pos, a.step->pos[t]);
    cuda::AttnArgs args = base_;
    cuda::plan_splits(args, a.in[0].rows, max_pos, cuda::sm_count(device_), partial_floats_);
    return args;
  }

  int device_;
  cuda::AttnArgs base_;
  uint64_t partial_floats_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_attention(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") || !b.arity(1, 1, 0) || !b.needs_kv())
    return nullptr;
  const int64_t h = b.i("n_heads"), hkv = b.i("n_kv_heads"), dk = b.i("head_dim_k"), dv = b.i("head_dim_v");
  const double scale = b.f("kq_scale");
  if (!b.ok()) return nullptr;
  b.check(h > 0 && hkv > 0 && h % hkv == 0, "n_heads ", h, " is not a multiple of n_kv_heads ", hkv);
  b.check(s.kv->kind == KvView::Kind::Kv && s.kv->k_cols == hkv * dk && s.kv->v_cols == hkv * dv,
          "the KV cache does not hold ", hkv, " heads of ", dk, " + ", dv);
  b.check(dk <= 1024 && dv <= 1024, "head dims above 1024 are not supported on the GPU");
  b.in_cols(0, h * dk);
  b.out_cols(0, h * dv);
  b.check(s.in[0].max_rows <= 65535, "more than 65535 tokens in a step");
  if (!b.ok()) return nullptr;
  cuda::AttnArgs a;
  a.q_stride = h * dk;
  a.q_head_stride = dk;
  a.dk = int(dk);
  a.dv = int(dv);
  a.n_heads = int(h);
  a.group = int(h / hkv);
  a.gh = cuda::attention_heads_per_block(int(dv), a.group, true);
  a.scale = float(scale);
  a.k_cols = s.kv->k_cols;
  a.v_cols = s.kv->v_cols;
  a.n_ctx = s.kv->n_ctx;
  const uint64_t es = s.kv->elem_bytes();
  a.vec = (dk * es) % 16 == 0 && (dv * es) % 16 == 0 && (a.k_cols * es) % 16 == 0 && (a.v_cols * es) % 16 == 0;
  a.round_kv = s.rounding == Rounding::GgmlCpu ? 1 : 0;
  a.out_stride = h * dv;
  a.out_head_stride = dv;
  const size_t smem = cuda::attention_smem(a, false);
  int max_smem = 0;
  cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, s.device);
  if (!b.check(smem <= size_t(max_smem), "attention needs ", smem, " bytes of shared memory, the GPU has ", max_smem))
    return nullptr;
  const uint64_t partial = cuda::partial_floats_bound(a.n_heads, a.gh, a.dv, cuda::sm_count(s.device));
  if (!cuda::reserve_workspace(s.device, partial * 4, error)) return nullptr;
  return std::make_unique<CudaAttention>(s.device, a, partial);
}

}  // namespace kt::kern
