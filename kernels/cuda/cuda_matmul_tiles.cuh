// What cuda_matmul.cu and cuda_matmul_tiles.cu (MatmulOp's tile path) share:
// the tile GEMM's block shape, which sizes MatmulOp's scratch, the scratch's
// alignment, and the 8-bit rounding of activation rows.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kt::cuda {

// The tile GEMM's block: kBM weight rows x kBN activation rows, k in steps of kBK.
constexpr int kBM = 128, kBN = 64, kBK = 32;
// fp16 weights dequantized per pass of the tile path (rows in chunks of this size).
constexpr uint64_t kTileChunkBytes = 64ull << 20;
// Scratch buffers start at multiples of this.
constexpr uint64_t kAlign = 256;
inline uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Rows of x rounded to 8-bit blocks of `act` values (32: Q8_0, 256: Q8_K), as
// ggml's CPU backend rounds them: xq [rows][n] int8, xd [rows][n / act] scales.
void quantize_rows(const float* x, int64_t ldx, int64_t rows, int64_t n, int act, int8_t* xq, float* xd,
                   cudaStream_t s);

// The tile path's activations for 8-bit-block weights under Rounding::GgmlCpu:
// rows rounded to blocks of `act` (into xq, xd), then each scaled by a power
// of two that puts its largest magnitude in [2^14, 2^15) and written as f16
// [rows][k_pad] (zeros past n_in), inv_scale[row] undoing the power. Also the
// grouped experts' (cuda_moe_grouped_gemm.cu).
void rows_to_f16(const float* x, int64_t ldx, int64_t rows, int64_t n_in, int64_t k_pad, int act, int8_t* xq,
                 float* xd, __half* out, float* inv_scale, cudaStream_t s);

}  // namespace kt::cuda
