// MLA's absorbed attention for a prompt's chunk on tensor cores (mma.sync
// m16n8k16, f16 operands, f32 accumulation): cuda_attention.cuh's
// launch_mla_mma. The split kernel (cuda_attention.cu) takes the rest: a
// prompt spent most of its attention there on float FMAs (~9 TFLOP/s,
// kernels/cuda/README.md).
//
// Same function as the split kernel, float-accurate: the latents rounded once
// a step (launch_round_latents: int8 values and a scale a 32 values) are
// exact in f16, and the float operand of each product is split into an f16
// high and low part, so every product is exact and the sums are float32:
//   scores  s[row][key] = sum_b d[key][b] (sum_{j in b} q[row][j] lat8[key][j])
//                         + q_pe[row] . k_pe[key]
//           q split hi + lo (22 bits) after scaling its row by a power of two
//           into f16's range; k_pe split per key the same way.
//   values  o[row][c] += sum_key (p[row][key] d[key][b(c)]) lat8[key][c]
//           p d split hi + lo after scaling by 2^E_b, E_b per tile and block
//           of 32 latent columns (so the largest p d of the tile is ~2^13).
// Every power of two is exact, so the two differ from the split kernel only in
// the order of float additions (and a term below 2^-25 of the largest one
// where a low part falls under f16's normal range).
//
// A block: 32 query rows (token, head: consecutive rows of the step) x the
// keys up to the furthest of their positions, 64 keys a tile, 8 warps.
//   scores:  warp (rg = w & 1, kg = w >> 1) takes rows 16 rg.. x keys 16 kg..
//   softmax: 8 threads a row over shared memory (online: running max and sum)
//   values:  warp (rg, cg = w >> 1) takes rows 16 rg.. x latent columns of
//            quarter cg, accumulated in registers over all tiles.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_latent_rounding.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_mma.cuh"

namespace kt::cuda {

namespace {

constexpr int kRows = 32;   // query rows a block
constexpr int kKeys = 64;   // keys a tile
constexpr int kSs = kKeys + 8;  // scores' row stride (floats): float2 reads without bank conflicts
constexpr int kWarps = 8;
constexpr int kMmaThreads = kWarps * 32;
constexpr int kMaxDr = 64;
constexpr int kMinTokens = 16;  // shorter steps keep the split kernel (decode, its tests' bits)

// Shared memory (bytes from the start); rows of halves padded by 8 so that
// ldmatrix's 8 row addresses fall in distinct 16-byte bank groups.
struct MmaLayout {
  int dk, qs, ls, ps;  // query, latent and rope-key row strides (halves)
  int q_hi, q_lo, lat, pe_hi, pe_lo, d, s, pe_inv, row_inv, row_pos, m, l, alpha, dmax, total;

  __host__ __device__ MmaLayout(int dv, int dr) {
    dk = dv + dr;
    qs = dk + 8;
    ls = dv + 8;
    ps = dr + 8;
    int o = 0;
    auto take = [&](int bytes) {
      const int at = o;
      o += (bytes + 15) / 16 * 16;
      return at;
    };
    q_hi = take(kRows * qs * 2);
    q_lo = take(kRows * qs * 2);
    lat = take(kKeys * ls * 2);
    pe_hi = take(kKeys * ps * 2);
    pe_lo = take(kKeys * ps * 2);
    d = take(dv / 32 * kKeys * 4);  // [block][key]
    s = take(kRows * kSs * 4);
    pe_inv = take(kKeys * 4);
    row_inv = take(kRows * 4);
    row_pos = take(kRows * 4);
    m = take(kRows * 4);
    l = take(kRows * 4);
    alpha = take(kRows * 4);
    dmax = take(2 * dv / 32 * 4);  // two tiles' (by parity): reset one while the other is read
    total = o;
  }
};

template <class E, int NBW>
__global__ void __launch_bounds__(kMmaThreads, 1) mla_attn_mma(AttnArgs a, int64_t n_rows) {
  constexpr int DV = 128 * NBW;  // latent values
  constexpr int NB = DV / 32;    // blocks of 32 latent values (one scale each)
  constexpr int NT = 4 * NBW;    // a warp's 8-column tiles of the output
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int max_pos;
  wait_for_inputs();
  const int dr = a.dk - a.dv;
  const MmaLayout L(DV, dr);
  __half* Qh = reinterpret_cast<__half*>(smem + L.q_hi);
  __half* Ql = reinterpret_cast<__half*>(smem + L.q_lo);
  __half* Lat = reinterpret_cast<__half*>(smem + L.lat);
  __half* Peh = reinterpret_cast<__half*>(smem + L.pe_hi);
  __half* Pel = reinterpret_cast<__half*>(smem + L.pe_lo);
  float* Dt = reinterpret_cast<float*>(smem + L.d);
  float* Ss = reinterpret_cast<float*>(smem + L.s);
  float* pe_inv = reinterpret_cast<float*>(smem + L.pe_inv);
  float* row_inv = reinterpret_cast<float*>(smem + L.row_inv);
  int* row_pos = reinterpret_cast<int*>(smem + L.row_pos);
  float* Ms = reinterpret_cast<float*>(smem + L.m);
  float* Lsum = reinterpret_cast<float*>(smem + L.l);
  float* As = reinterpret_cast<float*>(smem + L.alpha);
  int* dmax = reinterpret_cast<int*>(smem + L.dmax);  // |d| bits, [parity][block]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c4 = lane & 3;
  // The last rows (furthest positions, most keys) first: the long blocks start early.
  const int64_t row0 = int64_t(gridDim.x - 1 - blockIdx.x) * kRows;
  if (tid == 0) max_pos = -1;
  if (tid < 2 * NB) dmax[tid] = 0;
  __syncthreads();

  // 1. The block's query rows, 8 threads a row: scaled by 2^e (largest value in
  //    [2^14, 2^15)), split into f16 hi + lo; 2^-e kq_scale kept for the scores.
  {
    const int r = tid >> 3, part = tid & 7;
    const int64_t R = row0 + r;
    const bool valid = R < n_rows;
    const int64_t t = valid ? R / a.n_heads : 0;
    const int h = valid ? int(R % a.n_heads) : 0;
    const float* qr = a.q + t * a.q_stride + int64_t(h) * a.q_head_stride;
    const int e = scale_exp(row_abs_max<8>(qr, L.dk, 4 * part, 32, valid), 14);
    const float sc = ldexpf(1.0f, e);
    for (int c = 4 * part; c < L.dk; c += 32) {
      const float4 v = valid ? *reinterpret_cast<const float4*>(qr + c) : make_float4(0.f, 0.f, 0.f, 0.f);
      split4_store(v, sc, Qh + r * L.qs + c, Ql + r * L.qs + c);
    }
    if (part == 0) {
      row_inv[r] = valid ? ldexpf(1.0f, -e) * a.scale : 0.0f;
      row_pos[r] = valid ? a.pos[t] : -1;
      Ms[r] = -INFINITY;
      Lsum[r] = 0.0f;
      if (valid) atomicMax(&max_pos, a.pos[t]);
    }
  }
  __syncthreads();
  const int n_keys = max_pos + 1;
  const int64_t slot = a.slot[0];  // one slot's step: its latents were rounded once

  const int rg = warp & 1, kg = warp >> 1, cg = warp >> 1;
  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int key0 = 0, tile = 0; key0 < n_keys; key0 += kKeys, ++tile) {
    const int nk = min(kKeys, n_keys - key0);
    int* dm = dmax + (tile & 1) * NB;
    // 2. The tile: latents as f16 (exact), their scales by block, rope keys
    //    split per key like the queries (largest in [2^14, 2^15)).
    {
      constexpr int CH = DV / 16;                   // 16-byte chunks a latent row
      constexpr int PER = kKeys * CH / kMmaThreads;  // chunks a thread: loads first, then stores
      uint4 u[PER];
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int i = tid + j * kMmaThreads, k = i / CH, c = (i % CH) * 16;
        u[j] = k < nk ? *reinterpret_cast<const uint4*>(a.lat_q + int64_t(key0 + k) * DV + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int i = tid + j * kMmaThreads, k = i / CH, c = (i % CH) * 16;
        uint4 h0, h1;
        i8x4_to_h2(u[j].x, h0.x, h0.y);
        i8x4_to_h2(u[j].y, h0.z, h0.w);
        i8x4_to_h2(u[j].z, h1.x, h1.y);
        i8x4_to_h2(u[j].w, h1.z, h1.w);
        uint4* dst = reinterpret_cast<uint4*>(Lat + k * L.ls + c);
        dst[0] = h0;
        dst[1] = h1;
      }
    }
    if (tid < NB) dmax[((tile + 1) & 1) * NB + tid] = 0;  // the next tile's
#pragma unroll
    for (int j = 0; j < kKeys * NB / kMmaThreads; ++j) {
      const int i = tid + j * kMmaThreads, k = i / NB, b = i % NB;
      const float d = k < nk ? a.lat_d[int64_t(key0 + k) * NB + b] : 0.0f;
      Dt[b * kKeys + k] = d;
      // Lanes l and l + 16 hold the same block when NB divides 16.
      float ad = fabsf(d);
      if (NB <= 16) ad = fmaxf(ad, __shfl_xor_sync(0xffffffffu, ad, 16));
      if (NB > 16 || lane < 16) atomicMax(&dm[b], __float_as_int(ad));
    }
    {
      const int k = tid >> 2, part = tid & 3, per = dr / 4;
      float v[kMaxDr / 4];
      const E* src = static_cast<const E*>(a.v) + (slot * a.n_ctx + key0 + k) * a.v_cols + part * per;
      float mx = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxDr / 4; ++j) {
        v[j] = (j < per && k < nk) ? to_f(src[j]) : 0.0f;
        mx = fmaxf(mx, fabsf(v[j]));
      }
      const int e = scale_exp(group_max<4>(mx), 14);
      const float sc = ldexpf(1.0f, e);
#pragma unroll
      for (int j = 0; j < kMaxDr / 4; j += 4) {  // per is a multiple of 4 (d_rope of 16)
        if (j >= per) break;
        split4_store(make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]), sc, Peh + k * L.ps + part * per + j,
                     Pel + k * L.ps + part * per + j);
      }
      if (part == 0) pe_inv[k] = ldexpf(1.0f, -e);
    }
    __syncthreads();

    // 3. Scores of rows 16 rg.. x keys 16 kg.. (two 8-key tiles).
    {
      float s[2][4] = {};
      const __half* qh = Qh + (16 * rg + (lane & 15)) * L.qs + (lane >> 4) * 8;
      const __half* ql = Ql + (16 * rg + (lane & 15)) * L.qs + (lane >> 4) * 8;
      const int krow = 16 * kg + (lane & 7) + (lane >> 4) * 8, kcol = ((lane >> 3) & 1) * 8;
      const __half* lb = Lat + krow * L.ls + kcol;
      const int key = 16 * kg + 2 * c4;  // this thread's keys: key, key + 1 and those + 8
#pragma unroll 2
      for (int b = 0; b < NB; ++b) {
        float c[2][4] = {};
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          const int k0 = 32 * b + 16 * ks;
          uint32_t ah[4], al[4], bb[4];
          ldsm_x4(ah, qh + k0);
          ldsm_x4(al, ql + k0);
          ldsm_x4(bb, lb + k0);
          mma(c[0], ah, bb[0], bb[1]);
          mma(c[0], al, bb[0], bb[1]);
          mma(c[1], ah, bb[2], bb[3]);
          mma(c[1], al, bb[2], bb[3]);
        }
        const float2 d0 = *reinterpret_cast<const float2*>(Dt + b * kKeys + key);
        const float2 d1 = *reinterpret_cast<const float2*>(Dt + b * kKeys + key + 8);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float2 d = j ? d1 : d0;
          s[j][0] = fmaf(d.x, c[j][0], s[j][0]);
          s[j][1] = fmaf(d.y, c[j][1], s[j][1]);
          s[j][2] = fmaf(d.x, c[j][2], s[j][2]);
          s[j][3] = fmaf(d.y, c[j][3], s[j][3]);
        }
      }
      {  // the rope part: q_pe (hi, lo) x k_pe (hi, lo), lo x lo left out
        float c[2][4] = {};
        const __half* ph = Peh + krow * L.ps + kcol;
        const __half* pl = Pel + krow * L.ps + kcol;
        for (int k0 = 0; k0 < dr; k0 += 16) {
          uint32_t ah[4], al[4], bh[4], bl[4];
          ldsm_x4(ah, qh + DV + k0);
          ldsm_x4(al, ql + DV + k0);
          ldsm_x4(bh, ph + k0);
          ldsm_x4(bl, pl + k0);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            mma(c[j], ah, bh[2 * j], bh[2 * j + 1]);
            mma(c[j], al, bh[2 * j], bh[2 * j + 1]);
            mma(c[j], ah, bl[2 * j], bl[2 * j + 1]);
          }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float2 pi = *reinterpret_cast<const float2*>(pe_inv + key + 8 * j);
          s[j][0] = fmaf(pi.x, c[j][0], s[j][0]);
          s[j][1] = fmaf(pi.y, c[j][1], s[j][1]);
          s[j][2] = fmaf(pi.x, c[j][2], s[j][2]);
          s[j][3] = fmaf(pi.y, c[j][3], s[j][3]);
        }
      }
      const int r0 = 16 * rg + g, r1 = r0 + 8;
      const float i0 = row_inv[r0], i1 = row_inv[r1];
      const int p0 = row_pos[r0], p1 = row_pos[r1];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int kk = key + 8 * j, at = key0 + kk;  // causal: keys at or before the row's position
        *reinterpret_cast<float2*>(Ss + r0 * kSs + kk) =
            make_float2(at <= p0 ? s[j][0] * i0 : -INFINITY, at + 1 <= p0 ? s[j][1] * i0 : -INFINITY);
        *reinterpret_cast<float2*>(Ss + r1 * kSs + kk) =
            make_float2(at <= p1 ? s[j][2] * i1 : -INFINITY, at + 1 <= p1 ? s[j][3] * i1 : -INFINITY);
      }
    }
    __syncthreads();

    // 4. Online softmax, 8 threads a row; the scales for the values scaled by 2^E_b.
    {
      const int r = tid >> 3, part = tid & 7;
      float* sr = Ss + r * kSs + 8 * part;
      const float4 v0 = *reinterpret_cast<const float4*>(sr), v1 = *reinterpret_cast<const float4*>(sr + 4);
      float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
      float mx = v[0];
#pragma unroll
      for (int i = 1; i < 8; ++i) mx = fmaxf(mx, v[i]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_old = Ms[r], m_new = fmaxf(m_old, mx);
      float sum = 0.0f, alpha = 1.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        v[i] = m_new == -INFINITY ? 0.0f : expf(v[i] - m_new);
        sum += v[i];
      }
      if (m_new != -INFINITY) alpha = expf(m_old - m_new);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      *reinterpret_cast<float4*>(sr) = make_float4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<float4*>(sr + 4) = make_float4(v[4], v[5], v[6], v[7]);
      __syncwarp();  // every lane of the row has read Ms[r]
      if (part == 0) {
        Ms[r] = m_new;
        Lsum[r] = Lsum[r] * alpha + sum;
        As[r] = alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < kKeys * NB / kMmaThreads; ++j) {
      const int i = tid + j * kMmaThreads;
      Dt[i] *= ldexpf(1.0f, scale_exp(__int_as_float(dm[i / kKeys]), 13));
    }
    __syncthreads();

    // 5. o[rows 16 rg..][columns of quarter cg] = o alpha + sum_key p lat.
    {
      const float a0 = As[16 * rg + g], a1 = As[16 * rg + g + 8];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        o[n][0] *= a0;
        o[n][1] *= a0;
        o[n][2] *= a1;
        o[n][3] *= a1;
      }
      const float* p0 = Ss + (16 * rg + g) * kSs + 2 * c4;
      const float* p1 = p0 + 8 * kSs;
      const int vrow = (lane & 7) + ((lane >> 3) & 1) * 8, vcol = (lane >> 4) * 8;
#pragma unroll
      for (int bi = 0; bi < NBW; ++bi) {
        const int b = cg * NBW + bi;
        const float* db = Dt + b * kKeys + 2 * c4;
        float c[4][4] = {};
#pragma unroll
        for (int ks = 0; ks < kKeys / 16; ++ks) {
          const int kk = 16 * ks;
          const float2 x00 = *reinterpret_cast<const float2*>(p0 + kk), x10 = *reinterpret_cast<const float2*>(p1 + kk);
          const float2 x01 = *reinterpret_cast<const float2*>(p0 + kk + 8);
          const float2 x11 = *reinterpret_cast<const float2*>(p1 + kk + 8);
          const float2 d0 = *reinterpret_cast<const float2*>(db + kk);
          const float2 d1 = *reinterpret_cast<const float2*>(db + kk + 8);
          uint32_t ah[4], al[4];
          split2(x00.x * d0.x, x00.y * d0.y, ah[0], al[0]);
          split2(x10.x * d0.x, x10.y * d0.y, ah[1], al[1]);
          split2(x01.x * d1.x, x01.y * d1.y, ah[2], al[2]);
          split2(x11.x * d1.x, x11.y * d1.y, ah[3], al[3]);
          uint32_t v0[4], v1[4];
          const __half* vb = Lat + (kk + vrow) * L.ls + 32 * b + vcol;
          ldsm_x4_t(v0, vb);
          ldsm_x4_t(v1, vb + 16);
          mma(c[0], ah, v0[0], v0[1]);
          mma(c[0], al, v0[0], v0[1]);
          mma(c[1], ah, v0[2], v0[3]);
          mma(c[1], al, v0[2], v0[3]);
          mma(c[2], ah, v1[0], v1[1]);
          mma(c[2], al, v1[0], v1[1]);
          mma(c[3], ah, v1[2], v1[3]);
          mma(c[3], al, v1[2], v1[3]);
        }
        const float inv = ldexpf(1.0f, -scale_exp(__int_as_float(dm[b]), 13));
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) o[4 * bi + j][i] = fmaf(inv, c[j][i], o[4 * bi + j][i]);
      }
    }
    __syncthreads();
  }

  // 6. Normalized rows out.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * rg + g + 8 * half;
    const int64_t R = row0 + r;
    if (R >= n_rows) continue;
    const int64_t t = R / a.n_heads;
    const int h = int(R % a.n_heads);
    const float l = Lsum[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
    float* out = a.out + t * a.out_stride + int64_t(h) * a.out_head_stride + cg * (DV / 4) + 2 * c4;
#pragma unroll
    for (int n = 0; n < NT; ++n)
      *reinterpret_cast<float2*>(out + 8 * n) = make_float2(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
  }
}

std::atomic<uint64_t> g_launches{0};

template <class E, int NBW>
void launch_typed(const AttnArgs& a, int64_t n_tokens, cudaStream_t s) {
  const size_t smem = size_t(MmaLayout(128 * NBW, a.dk - a.dv).total);
  allow_shared_memory<mla_attn_mma<E, NBW>>(smem);
  const int64_t n_rows = n_tokens * a.n_heads;
  launch(mla_attn_mma<E, NBW>, unsigned(ceil_div(n_rows, kRows)), kMmaThreads, smem, s, a, n_rows);
}

}  // namespace

bool mla_tensor_cores() {
  static const bool on = [] {
    const char* v = std::getenv("KT_CUDA_MLA_MMA");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

bool mla_mma_applies(const AttnArgs& a, int64_t n_tokens) {
  const int dr = a.dk - a.dv;
  if (!mla_tensor_cores() || !a.lat_q || !a.lat_d || a.n_split != 1 || n_tokens < kMinTokens) return false;
  if ((a.dv != 256 && a.dv != 512) || dr < 16 || dr > kMaxDr || dr % 16 != 0) return false;
  // Float4 query loads and float2 output stores.
  if ((reinterpret_cast<uintptr_t>(a.q) & 15) || a.q_stride % 4 || a.q_head_stride % 4) return false;
  if ((reinterpret_cast<uintptr_t>(a.out) & 7) || a.out_stride % 2 || a.out_head_stride % 2) return false;
  int dev = 0, max_smem = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  return size_t(MmaLayout(a.dv, dr).total) + 64 <= size_t(max_smem);
}

void launch_mla_mma(const AttnArgs& a, GgmlType cache_type, int64_t n_tokens, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  with_cache_type(cache_type, [&](auto e) {
    using E = decltype(e);
    if (a.dv == 512)
      launch_typed<E, 4>(a, n_tokens, s);
    else
      launch_typed<E, 2>(a, n_tokens, s);
  });
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

uint64_t mla_mma_launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace kt::cuda
