// Whole rows to floats: one thread per value for F16 / BF16, 32 values a
// thread for the block types (deq32); bandwidth-bound, which is all
// dequantization needs. Products use __fmul_rn / __fsub_rn so nvcc cannot
// contract them into FMAs with a different rounding from the reference
// (kernels/cpu/quant_ref_*.cpp).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/dequant_cuda.h"

#include "kernels/cuda/cuda_quant.cuh"

namespace kt::cuda {
namespace {

__global__ void k_f16(const uint8_t* src, float* dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = deq1<GgmlType::F16>(src, i);
}

__global__ void k_bf16(const uint8_t* src, float* dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = deq1<GgmlType::BF16>(src, i);
}

// 32 values a thread (one block of the 32-value types, a sub-block of the
// 256-value ones), decoded by cuda_quant.cuh's deq32: the decoder the GEMMs
// that read quantized weights share, tested bit for bit here.
template <GgmlType T>
__global__ void k_deq32(const uint8_t* src, float* dst, int64_t n) {
  const int64_t i0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 32;
  if (i0 >= n) return;
  float v[32];
  deq32<T>(src, i0, v);
#pragma unroll
  for (int e = 0; e < 32; ++e) dst[i0 + e] = v[e];
}

template <GgmlType T>
void launch_deq32(const uint8_t* src, float* dst, int64_t n, cudaStream_t s) {
  const int64_t groups = n / 32;
  k_deq32<T><<<unsigned((groups + 127) / 128), 128, 0, s>>>(src, dst, n);
}

}  // namespace

bool dequant_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
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
    case GgmlType::Q8_0: launch_deq32<GgmlType::Q8_0>(in, dst, n, s); break;
    case GgmlType::Q4_0: launch_deq32<GgmlType::Q4_0>(in, dst, n, s); break;
    case GgmlType::Q5_0: launch_deq32<GgmlType::Q5_0>(in, dst, n, s); break;
    case GgmlType::Q4_K: launch_deq32<GgmlType::Q4_K>(in, dst, n, s); break;
    case GgmlType::Q5_K: launch_deq32<GgmlType::Q5_K>(in, dst, n, s); break;
    case GgmlType::Q6_K: launch_deq32<GgmlType::Q6_K>(in, dst, n, s); break;
    case GgmlType::IQ4_XS: launch_deq32<GgmlType::IQ4_XS>(in, dst, n, s); break;
    default: return int(cudaErrorNotSupported);
  }
  return int(cudaGetLastError());
}

}  // namespace kt::cuda
