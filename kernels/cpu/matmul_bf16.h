// Matrix products in BF16 from GGUF-encoded weights, for many activation rows at
// once (the MoE operator's prefill when a plan asks for it: KTransformers'
// `backend: "AMXBF16"`). Not ggml's rounding: each weight is decoded as the
// reference decoder does (float), then weights and activations are rounded to
// BF16 (nearest even) and the products summed in float:
//   y[b][o] = sum_k bf16(w[o][k]) * bf16(x[b][k])
// which is ref::matmul(..., ActRounding::Bf16) up to float summation order.
//
// Why. matmul_q's AMX-INT8 kernel keeps ggml's integer sums, so every 32-value
// sub-block's tile product is read back and scaled (each has its own scale):
// those read-backs bound it at ~0.4 TFLOP/s a core. Here a block of 32 weight
// rows is decoded once per call into a BF16 panel (no copy of the model is kept;
// the panel lives in L2) and the tiles accumulate in float over the whole row,
// read back once per 16 x 16 outputs. Decoding costs per weight, the tiles per
// weight and token, so it pays from a few tens of tokens per call.
//
// Usage (per matrix; threads split the output rows):
//   std::vector<uint8_t> acts(bf16_acts_bytes(n_in, n_batch));   // 64-byte aligned
//   pack_bf16_acts(x, x_stride, n_in, n_batch, acts.data());      // once
//   matmul_bf16(type, w, row_bytes, n_in, acts.data(), n_batch, y, y_stride, o0, o1);
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cpu {

// Whether this CPU runs matmul_bf16 (AVX-512 F/BW at least; AMX-BF16 tiles where
// the active ISA level is Amx, an AVX-512 emulation of them otherwise) for this
// weight type (every type with a reference decoder).
bool matmul_bf16_available(GgmlType weight_type);
// "amx-bf16", "avx512-bf16" (the emulation) or "unsupported".
const char* matmul_bf16_impl();

// The activations' layout: tiles of 16 rows, n_in rounded up to 32 (zeros).
size_t bf16_acts_bytes(int64_t n_in, int64_t n_batch);
void pack_bf16_acts(const float* x, int64_t x_stride, int64_t n_in, int64_t n_batch, void* dst);

// y[b * y_stride + o] for o in [o_begin, o_end), b in [0, n_batch). n_in must be
// a multiple of the type's block size. Thread-safe. emulate: the AVX-512
// emulation even where the CPU has AMX (tests).
void matmul_bf16(GgmlType weight_type, const void* w, uint64_t w_row_bytes, int64_t n_in, const void* acts,
                 int64_t n_batch, float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool emulate = false);

// ---- the ISA file's entry points (matmul_bf16_amx.cpp); not an interface --------
namespace matmul_detail {
void bf16_pack(const float* x, int64_t x_stride, int64_t n_in, int64_t n_batch, void* dst);
// tiles: AMX instructions, else their emulation; ne: AVX512-BF16's rounding
// instruction (the caller checked the CPU for both).
void bf16_run(GgmlType t, const uint8_t* w, uint64_t w_row_bytes, int64_t n_in, const uint8_t* acts, int64_t n_batch,
              float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool tiles, bool ne);
}  // namespace matmul_detail

}  // namespace kt::cpu
