// One CUDA thread per output value, one thread block per ggml block: simple and
// bandwidth-bound, which is all dequantization needs. Products use __fmul_rn /
// __fsub_rn so nvcc cannot contract them into FMAs with a different rounding
// from the reference (kernels/cpu/quant_ref_*.cpp).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/dequant_cuda.h"

namespace kt::cuda {
namespace {

__device__ __forceinline__ float h2f(const uint8_t* p) {
  __half_raw r;
  r.x = uint16_t(p[0] | (p[1] << 8));
  return __half2float(__half(r));
}

__global__ void k_f16(const uint8_t* src, float* dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = h2f(src + 2 * i);
}

__global__ void k_bf16(const uint8_t* src, float* dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __uint_as_float(uint32_t(src[2 * i] | (src[2 * i + 1] << 8)) << 16);
}

// Q8_0: { f16 d; i8 qs[32] }, 34 bytes.
__global__ void k_q8_0(const uint8_t* src, float* dst) {
  const uint8_t* b = src + int64_t(blockIdx.x) * 34;
  const int j = threadIdx.x;
  dst[int64_t(blockIdx.x) * 32 + j] = __fmul_rn(h2f(b), float(int8_t(b[2 + j])));
}

// Q4_0: { f16 d; u8 qs[16] }: low nibbles are values 0..15, high nibbles 16..31, offset 8.
__global__ void k_q4_0(const uint8_t* src, float* dst) {
  const uint8_t* b = src + int64_t(blockIdx.x) * 18;
  const int j = threadIdx.x;
  const uint8_t q = b[2 + (j & 15)];
  const int v = (j < 16 ? (q & 0xf) : (q >> 4)) - 8;
  dst[int64_t(blockIdx.x) * 32 + j] = __fmul_rn(float(v), h2f(b));
}

// Q4_K: { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }: 8 sub-blocks of 32 with
// 6-bit scales and mins packed as ggml's get_scale_min_k4.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

__global__ void k_q4_k(const uint8_t* src, float* dst) {
  const uint8_t* b = src + int64_t(blockIdx.x) * 144;
  const int i = threadIdx.x;         // 0..255
  const int chunk = i / 64, l = i % 64;  // 64 values share 32 bytes of qs
  const int sub = 2 * chunk + (l >= 32);
  int sc, m;
  scale_min_k4(sub, b + 4, &sc, &m);
  const uint8_t q = b[16 + 32 * chunk + (l & 31)];
  const int v = l < 32 ? (q & 0xf) : (q >> 4);
  const float d1 = __fmul_rn(h2f(b), float(sc));
  const float m1 = __fmul_rn(h2f(b + 2), float(m));
  dst[int64_t(blockIdx.x) * 256 + i] = __fsub_rn(__fmul_rn(d1, float(v)), m1);
}

// Q6_K: { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }: 6-bit values, offset 32.
__global__ void k_q6_k(const uint8_t* src, float* dst) {
  const uint8_t* b = src + int64_t(blockIdx.x) * 210;
  const int i = threadIdx.x;           // 0..255
  const int half = i / 128, r = i % 128;
  const int quarter = r / 32, l = r % 32;
  const uint8_t* ql = b + 64 * half;
  const uint8_t* qh = b + 128 + 32 * half;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half;
  const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
  const int nib = (quarter < 2) ? (lo & 0xf) : (lo >> 4);
  const int hi = (qh[l] >> (2 * quarter)) & 3;
  const int v = (nib | (hi << 4)) - 32;
  const int is = l / 16 + 2 * quarter;
  dst[int64_t(blockIdx.x) * 256 + i] = __fmul_rn(__fmul_rn(h2f(b + 208), float(sc[is])), float(v));
}

}  // namespace

bool dequant_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

int dequant_rows(GgmlType t, const void* src, float* dst, int64_t n, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const auto* in = static_cast<const uint8_t*>(src);
  if (n <= 0) return 0;
  switch (t) {
    case GgmlType::F16: k_f16<<<unsigned((n + 255) / 256), 256, 0, s>>>(in, dst, n); break;
    case GgmlType::BF16: k_bf16<<<unsigned((n + 255) / 256), 256, 0, s>>>(in, dst, n); break;
    case GgmlType::Q8_0: k_q8_0<<<unsigned(n / 32), 32, 0, s>>>(in, dst); break;
    case GgmlType::Q4_0: k_q4_0<<<unsigned(n / 32), 32, 0, s>>>(in, dst); break;
    case GgmlType::Q4_K: k_q4_k<<<unsigned(n / 256), 256, 0, s>>>(in, dst); break;
    case GgmlType::Q6_K: k_q6_k<<<unsigned(n / 256), 256, 0, s>>>(in, dst); break;
    default: return int(cudaErrorNotSupported);
  }
  return int(cudaGetLastError());
}

}  // namespace kt::cuda
