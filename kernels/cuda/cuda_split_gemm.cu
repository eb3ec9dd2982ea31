// Float-accurate matrix products on tensor cores (cuda_split_gemm.cuh).
// Both operands are split into f16 halves, x after scaling its row by a power
// of two into f16's range, the weights (decoded exactly with deq1) after
// scaling each output column's 64 values of a chunk the same way; hi*hi +
// lo*hi + hi*lo in f32 leaves out lo*lo, ~2^-22 of each product, and the scales
// are undone in float.
//
// Block: 64 rows x 128 outputs of one matrix, the reduction in chunks of 64;
// 8 warps, warp (wm = w & 3, wn = w >> 2) takes rows 16 wm.. x columns 64 wn...
// The CUDA-core kernels it replaces for MLA's prompt chunks decoded each weight
// once for 8 tokens: at 512 tokens they took longer than the attention itself
// (cuda_bench_test G: V2-Lite 0.81 of a 1.34 ms call, 0.18 after).
#include "kernels/cuda/cuda_split_gemm.cuh"


#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_mma.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace kt::cuda {

namespace {

constexpr int kBM = 64, kBN = 128, kBK = 64;
constexpr int kStride = kBK + 8;  // halves a shared row: ldmatrix rows in distinct bank groups
constexpr int kSplitThreads = 256;

// Shared memory (halves): x's chunk hi, lo [kBM][kStride], the weights' hi, lo
// [kBN][kStride]; then floats: the weights' inverse scales [kBN], x's [kBM].
constexpr size_t kSplitSmem = size_t(2 * kBM + 2 * kBN) * kStride * 2 + size_t(kBN + kBM) * 4;

template <GgmlType T>
__global__ void __launch_bounds__(kSplitThreads) split_gemm_mma(SplitGemmArgs p) {
  extern __shared__ __align__(16) uint8_t smem[];
  __half* Ah = reinterpret_cast<__half*>(smem);
  __half* Al = Ah + kBM * kStride;
  __half* Bh = Al + kBM * kStride;
  __half* Bl = Bh + kBN * kStride;
  float* b_inv = reinterpret_cast<float*>(Bl + kBN * kStride);
  float* row_inv = b_inv + kBN;
  wait_for_inputs();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c4 = lane & 3;
  const int h = blockIdx.y;
  const int64_t t0 = int64_t(blockIdx.z) * kBM;
  const int n_blocks = int(ceil_div(p.N, kBN));

  // Block x past the outputs copies the rows' tails (q_pe beside q_abs).
  if (int(blockIdx.x) >= n_blocks) {
    for (int i = tid; i < kBM * p.copy_tail; i += kSplitThreads) {
      const int64_t t = t0 + i / p.copy_tail;
      const int c = i % p.copy_tail;
      if (t < p.n_rows)
        p.y[t * p.y_stride + int64_t(h) * p.y_head_stride + p.N + c] =
            p.x[t * p.x_stride + int64_t(h) * p.x_head_stride + p.K + c];
    }
    return;
  }
  const int n0 = int(blockIdx.x) * kBN;
  const uint8_t* w = p.w + uint64_t(h) * p.mat_bytes;

  // x's rows: 4 threads a row; the row's scale 2^e puts its largest value in
  // [2^14, 2^15).
  const int ar = tid >> 2, apart = tid & 3;
  const int64_t at = t0 + ar;
  const bool a_valid = at < p.n_rows;
  const float* xr = p.x + (a_valid ? at : 0) * p.x_stride + int64_t(h) * p.x_head_stride;
  float asc;
  {
    const int e = scale_exp(row_abs_max<4>(xr, p.K, 4 * apart, 16, a_valid), 14);
    asc = ldexpf(1.0f, e);
    if (apart == 0) row_inv[ar] = a_valid ? ldexpf(1.0f, -e) : 0.0f;
  }

  const int wm = warp & 3, wn = warp >> 2;
  float acc[8][4] = {};
  const int bn = tid >> 1, bhalf = tid & 1;  // the weight column a thread decodes, and its half of the chunk
  for (int k0 = 0; k0 < p.K; k0 += kBK) {
    // x's chunk: 16 values a thread (four float4s), split.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = k0 + 16 * apart + 4 * i;
      const float4 v = a_valid && k < p.K ? *reinterpret_cast<const float4*>(xr + k) : make_float4(0.f, 0.f, 0.f, 0.f);
      split4_store(v, asc, Ah + ar * kStride + 16 * apart + 4 * i, Al + ar * kStride + 16 * apart + 4 * i);
    }
    // The weights' chunk: column n's 32 values a thread, decoded, scaled by the
    // pair's power of two, split.
    {
      const int n = n0 + bn;
      float v[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const int k = k0 + 32 * bhalf + i;
        float x = 0.0f;
        if (n < p.N && k < p.K)
          x = p.kn ? deq1<T>(w + uint64_t(k) * p.row_bytes, n) : deq1<T>(w + uint64_t(n) * p.row_bytes, k);
        v[i] = x;
      }
      float mx = 0.0f;
#pragma unroll
      for (int i = 0; i < 32; ++i) mx = fmaxf(mx, fabsf(v[i]));
      const int e = scale_exp(group_max<2>(mx), 14);
      const float sc = ldexpf(1.0f, e);
#pragma unroll
      for (int i = 0; i < 32; i += 4)
        split4_store(make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]), sc, Bh + bn * kStride + 32 * bhalf + i,
                     Bl + bn * kStride + 32 * bhalf + i);
      if (bhalf == 0) b_inv[bn] = ldexpf(1.0f, -e);
    }
    __syncthreads();

    float c[8][4] = {};
    const __half* ah_p = Ah + (16 * wm + (lane & 15)) * kStride + (lane >> 4) * 8;
    const __half* al_p = Al + (16 * wm + (lane & 15)) * kStride + (lane >> 4) * 8;
    const int brow = 64 * wn + (lane & 7) + (lane >> 4) * 8, bcol = ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t ah[4], al[4];
      ldsm_x4(ah, ah_p + 16 * ks);
      ldsm_x4(al, al_p + 16 * ks);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bh[4], bl[4];
        ldsm_x4(bh, Bh + (brow + 16 * np) * kStride + bcol + 16 * ks);
        ldsm_x4(bl, Bl + (brow + 16 * np) * kStride + bcol + 16 * ks);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          float(&d)[4] = c[2 * np + q];
          mma(d, ah, bh[2 * q], bh[2 * q + 1]);
          mma(d, al, bh[2 * q], bh[2 * q + 1]);
          mma(d, ah, bl[2 * q], bl[2 * q + 1]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 bi = *reinterpret_cast<const float2*>(b_inv + 64 * wn + 8 * j + 2 * c4);
      acc[j][0] = fmaf(bi.x, c[j][0], acc[j][0]);
      acc[j][1] = fmaf(bi.y, c[j][1], acc[j][1]);
      acc[j][2] = fmaf(bi.x, c[j][2], acc[j][2]);
      acc[j][3] = fmaf(bi.y, c[j][3], acc[j][3]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * wm + g + 8 * half;
    const int64_t t = t0 + r;
    if (t >= p.n_rows) continue;
    const float ri = row_inv[r];
    float* y = p.y + t * p.y_stride + int64_t(h) * p.y_head_stride;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n = n0 + 64 * wn + 8 * j + 2 * c4;
      if (n < p.N) y[n] = acc[j][2 * half] * ri + (p.bias ? p.bias[n] : 0.0f);
      if (n + 1 < p.N) y[n + 1] = acc[j][2 * half + 1] * ri + (p.bias ? p.bias[n + 1] : 0.0f);
    }
  }
}

}  // namespace

bool split_gemm_applies(const SplitGemmArgs& p) {
  return p.n_rows >= kSplitGemmMinRows && p.K % 4 == 0 && p.x_stride % 4 == 0 && p.x_head_stride % 4 == 0 &&
         (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
}

void launch_split_gemm(const SplitGemmArgs& p, GgmlType w_type, int n_mats, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(unsigned(ceil_div(p.N, kBN) + (p.copy_tail > 0 ? 1 : 0)), unsigned(n_mats),
                  unsigned(ceil_div(p.n_rows, kBM)));
  with_type(w_type, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    allow_shared_memory<split_gemm_mma<T>>(kSplitSmem);
    launch(split_gemm_mma<T>, grid, kSplitThreads, kSplitSmem, s, p);
  });
}

}  // namespace kt::cuda
