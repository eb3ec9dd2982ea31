// MatmulOp's tile path (cuda_matmul.h): W dequantized to 16 bits in row
// chunks, the activations rounded as the reference rounds them and scaled into
// 16 bits, then a tensor-core GEMM (wmma 16x16x16, fp32 accumulation).
#include <mma.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_matmul_tiles.cuh"
#include "kernels/cuda/cuda_moe_grouped_gemm.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_rounding.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace kt::cuda {

namespace {

// n_rows x n_in weights to H [n_rows][k_pad], zero-padded: each thread 8
// consecutive values (one block's, so their scales are read once) and one
// 16-byte store.
template <GgmlType T, class H>
__global__ void dequant_to(const uint8_t* __restrict__ W, uint64_t row_bytes, int64_t n_in, int64_t k_pad,
                           int64_t n_rows, H* __restrict__ out) {
  wait_for_inputs();  // out may still be read by the previous chunk's GEMM
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // 8 values each
  if (idx >= n_rows * (k_pad / 8)) return;
  const int64_t r = idx / (k_pad / 8), k0 = 8 * (idx % (k_pad / 8));
  const uint8_t* row = W + uint64_t(r) * row_bytes;
  __align__(16) H v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float f = k0 + k < n_in ? deq1<T>(row, k0 + k) : 0.0f;
    if constexpr (std::is_same_v<H, __half>)
      v[k] = __float2half_rn(f);
    else
      v[k] = __float2bfloat16_rn(f);
  }
  *reinterpret_cast<uint4*>(out + r * k_pad + k0) = *reinterpret_cast<const uint4*>(v);
}

// Activations to the GEMM's element type, one block per row. mode: 0 float
// (scaled), 1 F16 rounding (unscaled, as ggml), 2 BF16 (unscaled), 3 the
// 8-bit rounding in xq/xd with blocks of `act` (scaled). Scaled rows are
// multiplied by a power of two that puts their largest magnitude in
// [2^14, 2^15): exact, and far from fp16's overflow and subnormals.
template <class H>
__global__ void __launch_bounds__(256) prep_x(const float* __restrict__ x, int64_t ldx, int64_t n_in, int64_t k_pad,
                                              int mode, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                                              int act, H* __restrict__ out, float* __restrict__ inv_scale) {
  __shared__ float red[32];
  wait_for_inputs();
  const int64_t r = blockIdx.x;
  auto value = [&](int64_t i) -> float {
    if (mode == 3) return xd[r * (n_in / act) + i / act] * float(xq[r * n_in + i]);
    return x[r * ldx + i];
  };
  float s = 1.0f, inv = 1.0f;
  if (mode == 0 || mode == 3) {
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < n_in; i += blockDim.x) m = fmaxf(m, fabsf(value(i)));
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0.0f;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) m = fmaxf(m, red[w]);
    if (m > 0.0f && isfinite(m)) {
      int e;
      frexpf(m, &e);  // m = f 2^e, f in [0.5, 1)
      s = ldexpf(1.0f, 15 - e);
      inv = ldexpf(1.0f, e - 15);
    }
  }
  for (int64_t i = threadIdx.x; i < k_pad; i += blockDim.x) {
    const float v = i < n_in ? value(i) * s : 0.0f;
    if constexpr (std::is_same_v<H, __half>)
      out[r * k_pad + i] = __float2half_rn(v);
    else
      out[r * k_pad + i] = __float2bfloat16_rn(v);
  }
  if (threadIdx.x == 0) inv_scale[r] = inv;
}

// Y [N][ldy] (columns m of rows n) = inv_s[n] * (A [M][lda] . B [N][ldb]^T) + bias[m]:
// 128 x 64 tiles, 8 warps of 32 x 32, k in steps of 32 (K a multiple of 32,
// lda and ldb multiples of 8), the next k-tile loaded while this one multiplies.
constexpr int kLds = kBK + 8, kLdc = kBM + 4;  // shared-memory row strides (halves, floats)
constexpr size_t kGemmSmem = std::max<size_t>(2 * (kBM + kBN) * kLds * 2, size_t(kBN) * kLdc * 4);

template <class H>
__global__ void __launch_bounds__(256)
    gemm_wmma(const H* __restrict__ A, int64_t lda, const H* __restrict__ B, int64_t ldb, int64_t M, int64_t N,
              int64_t K, float* __restrict__ Y, int64_t ldy, const float* __restrict__ inv_s,
              const float* __restrict__ bias) {
  using namespace nvcuda;
  __shared__ __align__(128) unsigned char smem[kGemmSmem];
  wait_for_inputs();
  H* As = reinterpret_cast<H*>(smem);   // [2][kBM][kLds]
  H* Bs = As + 2 * kBM * kLds;          // [2][kBN][kLds]
  float* Cs = reinterpret_cast<float*>(smem);  // [kBN][kLdc], after the main loop
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wm = warp % 4, wn = warp / 4;
  const int64_t m0 = int64_t(blockIdx.x) * kBM, n0 = int64_t(blockIdx.y) * kBN;

  uint4 ra[2], rb;
  auto load_tile = [&](int64_t k0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int id = tid + 256 * r, row = id / 4, kc = id % 4;
      ra[r] = m0 + row < M ? *reinterpret_cast<const uint4*>(A + (m0 + row) * lda + k0 + kc * 8) : make_uint4(0, 0, 0, 0);
    }
    const int row = tid / 4, kc = tid % 4;
    rb = n0 + row < N ? *reinterpret_cast<const uint4*>(B + (n0 + row) * ldb + k0 + kc * 8) : make_uint4(0, 0, 0, 0);
  };
  auto store_tile = [&](int buf) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int id = tid + 256 * r, row = id / 4, kc = id % 4;
      *reinterpret_cast<uint4*>(As + (buf * kBM + row) * kLds + kc * 8) = ra[r];
    }
    const int row = tid / 4, kc = tid % 4;
    *reinterpret_cast<uint4*>(Bs + (buf * kBN + row) * kLds + kc * 8) = rb;
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  const int64_t n_k = K / kBK;
  load_tile(0);
  store_tile(0);
  __syncthreads();
  for (int64_t kt = 0; kt < n_k; ++kt) {
    const int buf = int(kt & 1);
    if (kt + 1 < n_k) load_tile((kt + 1) * kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], As + (buf * kBM + wm * 32 + i * 16) * kLds + kk, kLds);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], Bs + (buf * kBN + wn * 32 + j * 16) * kLds + kk, kLds);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    if (kt + 1 < n_k) store_tile(buf ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wn * 32 + j * 16) * kLdc + wm * 32 + i * 16, acc[i][j], kLdc,
                              wmma::mem_col_major);
  __syncthreads();
  for (int idx = tid; idx < kBM * kBN; idx += 256) {
    const int n = idx / kBM, m = idx % kBM;
    if (m0 + m < M && n0 + n < N) {
      const float v = Cs[n * kLdc + m] * inv_s[n0 + n];
      Y[(n0 + n) * ldy + m0 + m] = bias ? v + bias[m0 + m] : v;
    }
  }
}

}  // namespace

void rows_to_f16(const float* x, int64_t ldx, int64_t rows, int64_t n_in, int64_t k_pad, int act, int8_t* xq,
                 float* xd, __half* out, float* inv_scale, cudaStream_t s) {
  quantize_rows(x, ldx, rows, n_in, act, xq, xd, s);
  launch(prep_x<__half>, unsigned(rows), 256, 0, s, x, ldx, n_in, k_pad, 3, xq, xd, act, out, inv_scale);
  check_launch("cuda matmul (activations to 16 bits)", s);
}

bool MatmulOp::w16_direct() const { return (type_ == GgmlType::F16 || type_ == GgmlType::BF16) && n_in_ % kBK == 0; }

int64_t MatmulOp::x16_cols() const { return decoded_ ? std::max(k_pad_, decoded_k_pad(n_in_)) : k_pad_; }

MatmulOp::TileBuffers MatmulOp::tile_buffers(void* scratch) const {
  auto* base = static_cast<uint8_t*>(scratch);
  uint64_t off = 0;
  auto take = [&](uint64_t bytes) {  // (offsets alone where scratch is null: init's sizing)
    const uint64_t at = off;
    off += align_up(bytes);
    return base ? base + at : nullptr;
  };
  TileBuffers b;
  b.x16 = take(uint64_t(max_rows_ * x16_cols()) * 2);
  b.inv = reinterpret_cast<float*>(take(uint64_t(max_rows_) * 4));
  b.xq = reinterpret_cast<int8_t*>(take(uint64_t(max_rows_ * n_in_)));
  b.xd = reinterpret_cast<float*>(take(uint64_t(max_rows_ * (n_in_ / 32)) * 4));
  b.w16_start = off;
  b.w16 = w16_direct() ? nullptr : take(uint64_t(chunk_rows_ * k_pad_) * 2);
  return b;
}

void MatmulOp::run_tiles(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias,
                         void* scratch, void* queue) const {
  auto s = static_cast<cudaStream_t>(queue);
  const TileBuffers buf = tile_buffers(scratch);
  uint8_t* x16 = buf.x16;
  float* inv_s = buf.inv;
  int8_t* xq = buf.xq;
  float* xd = buf.xd;
  const bool direct = w16_direct();
  uint8_t* w16 = buf.w16;

  int mode = 0;
  int act = 32;
  if (rounding_ == kern::Rounding::GgmlCpu) {
    if (type_ == GgmlType::F16) {
      mode = 1;
    } else if (type_ == GgmlType::BF16) {
      mode = 2;
    } else {
      mode = 3;
      act = act_block(type_);
      quantize_rows(x, ldx, rows, n_in_, act, xq, xd, s);
    }
  }
  auto gemm = [&](auto hc) {
    using H = decltype(hc);
    launch(prep_x<H>, unsigned(rows), 256, 0, s, x, ldx, n_in_, k_pad_, mode, xq, xd, act, reinterpret_cast<H*>(x16),
           inv_s);
    check_launch("cuda matmul (activations to 16 bits)", queue);
    for (int64_t r0 = 0; r0 < n_out_; r0 += chunk_rows_) {
      const int64_t m = std::min(chunk_rows_, n_out_ - r0);
      const H* a;
      int64_t lda;
      if (direct) {
        a = reinterpret_cast<const H*>(w_ + uint64_t(r0) * row_bytes_);
        lda = n_in_;
      } else {
        const int64_t n = m * k_pad_ / 8;
        with_type(type_, [&](auto tc) {
          constexpr GgmlType T = decltype(tc)::value;
          if constexpr (T != GgmlType::F32)
            launch(dequant_to<T, H>, unsigned(ceil_div(n, 256)), 256, 0, s, w_ + uint64_t(r0) * row_bytes_, row_bytes_,
                   n_in_, k_pad_, m, reinterpret_cast<H*>(w16));
        });
        check_launch("cuda matmul (weights to 16 bits)", queue);
        a = reinterpret_cast<const H*>(w16);
        lda = k_pad_;
      }
      const dim3 grid(unsigned(ceil_div(m, kBM)), unsigned(ceil_div(rows, kBN)));
      launch(gemm_wmma<H>, grid, 256, 0, s, a, lda, reinterpret_cast<const H*>(x16), k_pad_, m, rows, k_pad_, y + r0,
             ldy, inv_s, bias ? bias + r0 : nullptr);
      check_launch("cuda matmul (wmma)", queue);
    }
  };
  if (type_ == GgmlType::BF16)
    gemm(__nv_bfloat16{});
  else
    gemm(__half{});
}

}  // namespace kt::cuda
