// Split-K ("flash-decoding") attention over a KV cache, shared by cuda.attention
// (grouped-query heads over a K/V cache) and cuda.mla_attention* (all heads
// over MLA's latent cache, in absorbed form).
//
// A block takes one token, GH query heads that read the same keys, and one
// split of the token's keys (positions 0..pos); splits let a single decode
// token fill the GPU. Keys go through shared memory 32 at a time: scores for
// GH heads x 32 keys (float4 dot products, each thread 4 heads x 1 key over a
// slice of the head dims), an online softmax per head (running max and sum),
// then acc[head][c] += p * V[key][c] with each thread owning 4 value columns of
// HPT heads, so one read of V serves HPT heads. With one split the block
// writes the normalized output; with several it writes (max, sum, acc) and a
// combine pass merges them. float32 throughout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cuda {

struct AttnArgs {
  // Queries: token t, head h at q + t * q_stride + h * q_head_stride; dk values.
  const float* q = nullptr;
  int64_t q_stride = 0, q_head_stride = 0;
  int dk = 0;
  int dv = 0;
  int n_heads = 0;     // H
  int group = 1;       // query heads per KV head (GQA); MLA: all H share the latents
  int gh = 1;          // heads per block
  float scale = 1.0f;  // kq_scale
  // Keys and values: the cache of one layer (E elements), rows [slot][n_ctx].
  const void* k = nullptr;  // GQA: K cache; MLA: latent cache (r = dv values)
  const void* v = nullptr;  // GQA: V cache; MLA: rope-key cache (dk - dv values)
  int64_t k_cols = 0, v_cols = 0, n_ctx = 0;
  bool vec = false;      // 16-byte aligned rows: vector loads
  int round_kv = 0;      // GQA: 1 = q, K, V rounded to F16 (ggml's F16 cache)
  int round_lat = 0;     // MLA: 0 none, 1 F16, 2 BF16, 3 Q8_0 blocks, 4 Q8_K blocks
  // MLA, steps of one slot, round_lat 3 or 4: the slot's latents rounded
  // already (launch_round_latents), position p's 8-bit values at lat_q + p * dv
  // and its scales, one a 32 values, at lat_d + p * dv / 32; null: each block
  // rounds the latents of its tiles itself.
  const int8_t* lat_q = nullptr;
  const float* lat_d = nullptr;
  const int32_t* pos = nullptr;   // device, per token
  const int32_t* slot = nullptr;  // device, per token
  int tiles_per_split = 1;
  int n_split = 1;
  // Output: normalized rows out + t * out_stride + h * out_head_stride (n_split 1),
  // or partials [t][h][split][dv + 2] (m, l, acc).
  float* out = nullptr;
  int64_t out_stride = 0, out_head_stride = 0;
  float* partial = nullptr;
};

// Launches the split kernel (and the combine when n_split > 1) for n_tokens
// tokens on `stream`. cache_type: F32, F16 or BF16. mla: keys are [latent,
// rope key] rows, values the latents.
void launch_attention(const AttnArgs& a, GgmlType cache_type, bool mla, int64_t n_tokens, void* stream);

// MLA, round_lat 3 or 4: the latents of positions [0, pos[n_tokens - 1]] of
// cache slot slot[0] (device values; one slot's tokens in position order)
// rounded as the split kernel rounds a tile, into out_q (r 8-bit values a row)
// and out_d (r / 32 scales a row), for AttnArgs::lat_q and lat_d. Every head
// group and token of the step then reads them rounded once rather than
// rounding its own copy. max_pos (host): the grid covers split_horizon(max_pos).
void launch_round_latents(const AttnArgs& a, GgmlType cache_type, int64_t n_tokens, int max_pos, int8_t* out_q,
                          float* out_d, void* stream);

// MLA's absorbed attention for a prompt's chunk on tensor cores
// (cuda_mla_mma.cu): the same function as the split kernel, float-accurate
// (every product exact, float32 sums). Applies to steps of at least 16 tokens
// of one slot whose latents were rounded once (lat_q), one split of the keys,
// r 256 or 512, d_rope a multiple of 16 up to 64. launch_attention takes it
// where it applies.
// mla_tensor_cores(): false when KT_CUDA_MLA_MMA=0, which keeps a prompt's MLA
// (this and cuda_mla.cu's q_abs and W_V products) on the CUDA-core kernels.
bool mla_tensor_cores();
bool mla_mma_applies(const AttnArgs& a, int64_t n_tokens);
void launch_mla_mma(const AttnArgs& a, GgmlType cache_type, int64_t n_tokens, void* stream);
// Launches of it so far in this process (tests: the path they mean to cover ran).
uint64_t mla_mma_launches();

// Shared memory the kernel needs for these shapes (bytes).
size_t attention_smem(const AttnArgs& a, bool mla);
// Heads per block and per thread for dv value columns and `need` heads that
// share keys (the GQA group, or all MLA heads): gh heads per block.
int attention_heads_per_block(int dv, int need, bool divides);

// The furthest position splits are planned for: max_pos rounded up to a whole
// 256 positions. Splits past a token's own position do nothing, and the plan
// (the launch's shape) then stays the same for 256 decode steps, so a
// recorded decode (CUDA graph) is recorded again only that often.
inline int split_horizon(int max_pos) { return (max_pos / 256 + 1) * 256 - 1; }

// Chooses a.n_split and a.tiles_per_split for keys up to split_horizon(max_pos):
// enough blocks to fill the GPU twice over (sms multiprocessors), whole tiles
// of 32 keys per split, at most max_partial_floats of partials.
void plan_splits(AttnArgs& a, int64_t n_tokens, int max_pos, int sms, uint64_t max_partial_floats);
// Partials (floats) plan_splits can ask for with these shapes.
uint64_t partial_floats_bound(int n_heads, int gh, int dv, int sms);

}  // namespace kt::cuda
