// Resident routed experts over a long step with no host round trip
// (cuda_moe_grouped_gemm.cu): the (token, choice) pairs sorted by expert on
// the GPU, then one launch per projection for every expert at once, the
// weights decoded inside the GEMM. The tile path's numbers (cuda_matmul_tiles.cu:
// activations rounded to 8-bit blocks as the reference rounds them, scaled by a
// power of two into f16, weights rounded to f16, f32 sums), so the same 2e-3
// class of error against the reference. The default where it applies
// (KT_CUDA_GROUPED_DEVICE=0 turns it off, cuda_moe_grouped.cu): with every
// expert busy it beats the host's grouping (kernels/cuda/README.md).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

struct ResidentExperts {
  // gate, up, down: n_held matrices each, ggml [n_in, n_out, n_held].
  const uint8_t* w[3] = {};
  GgmlType type[3] = {};
  uint64_t row_bytes[3] = {}, mat_bytes[3] = {};
  int64_t n_embd = 0, n_ff = 0, nu = 0, n_held = 0;
  // Router id -> held matrix (-1: held elsewhere), device, n_slots entries; null: identity.
  const int32_t* slots = nullptr;
  int64_t n_slots = 0;
};

// Whether run_resident_experts computes these: 8-bit-block types for all three
// (the tile path's activation rounding), rows that fill whole blocks, at most
// kMaxHeld matrices.
constexpr int64_t kResidentMaxHeld = 1024;
bool resident_experts_apply(const ResidentExperts& e);
// Workspace run_resident_experts needs for up to max_tokens tokens.
uint64_t resident_experts_workspace(const ResidentExperts& e, int64_t max_tokens);
// ypairs [n_tokens * nu][n_embd]: each pair's expert output (rows of pairs whose
// expert is held elsewhere are left as they are). x [n_tokens][n_embd], ids
// [n_tokens][nu] on the device; asynchronous on stream.
void run_resident_experts(const ResidentExperts& e, const float* x, int64_t n_tokens, const int32_t* ids,
                          float* ypairs, void* workspace, void* stream);
// Launches of it so far in this process (tests: the path they mean to cover ran).
uint64_t resident_experts_runs();

// The same GEMM over dense rows (MatmulOp's decoded path, cuda_matmul.h): one
// matrix of type t (n_out = N rows of row_bytes, K values each), every row of
// a its own output row: y [rows][N] (row stride ldy) = a W0^T (+ bias [N]), or
// with w1 (GLU) swiglu(a W0^T, a W1^T). a: the rows rounded and scaled into
// f16 by rows_to_f16 (cuda_matmul_tiles.cuh) with k_pad = decoded_k_pad(K),
// inv their scales. Asynchronous on s. Where decoded_gemm_applies(t, K).
bool decoded_gemm_applies(GgmlType t, int64_t K);
int64_t decoded_k_pad(int64_t K);
void run_decoded_gemm(GgmlType t, const uint8_t* w0, const uint8_t* w1, uint64_t row_bytes, int64_t K, int64_t N,
                      const __half* a, const float* inv, int64_t rows, float* y, int64_t ldy, const float* bias,
                      cudaStream_t s);

}  // namespace kt::cuda
