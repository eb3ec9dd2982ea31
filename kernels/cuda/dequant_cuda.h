// GPU dequantization of ggml blocks to float, bit-exact with the reference
// kernels in kernels/cpu (tested on the device machine against llama.cpp's
// quant vectors). The building block for GPU matmuls on quantized weights.
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

// Whether dequant_rows handles this type on the GPU.
bool dequant_supported(GgmlType t);

// Decodes n values (a multiple of the type's block size) from device memory src
// into device memory dst, asynchronously on `stream` (a cudaStream_t; 0 = default).
// Returns 0 on success, or the cudaError_t of the launch.
int dequant_rows(GgmlType t, const void* src, float* dst, int64_t n, void* stream);

}  // namespace kt::cuda
