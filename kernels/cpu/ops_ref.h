// Reference operators of kt in plain C++: what every model op computes. Fast CPU
// and CUDA kernels are tested against these, and runtime/reference_model runs a
// whole GGUF model with them (compared with llama.cpp's logits).
//
// Conventions (ggml's): plain functions over raw pointers, shapes in the
// arguments, activations are row-major float arrays whose fastest index is the
// last one named in a shape comment ("[n_tokens][n_embd]": token t's values at
// x + t * n_embd). Weights stay encoded in their GGUF type and are read through
// the type table (kernels/type_traits.h); a matrix of n_out rows of n_in values
// is ggml's [n_in, n_out] tensor. Sums are accumulated in double: these kernels
// define the exact answer, not a fast one.
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt::cpu::ref {

// ---- basic ops (ops_ref_basic.cpp) -----------------------------------------

// ggml_get_rows on an embedding table of any type: out[i] = decoded row ids[i]
// of a table whose rows hold n_cols values. out: [n_ids][n_cols].
void get_rows(GgmlType type, const void* table, int64_t n_cols, const int32_t* ids,
              int64_t n_ids, float* out);

// ggml_rms_norm then ggml_mul by the weight: y = x / sqrt(mean(x^2) + eps) * w,
// per row of n values. w may be null (no weight). y may alias x.
void rms_norm(const float* x, const float* w, int64_t n, int64_t n_rows, float eps, float* y);
// rms_norm's second half for one row whose sum of squares (in double, in
// value order) is sum_sq: what a faster caller that sums rows its own way
// shares with it, so the same bits.
void rms_norm_apply(const float* x, const float* w, int64_t n, double sum_sq, float eps, float* y);

// y = a + b elementwise over n values; y may alias a or b.
void add(const float* a, const float* b, int64_t n, float* y);
// x[r] += bias for each of n_rows rows of n values (a linear layer's bias).
void add_bias(float* x, const float* bias, int64_t n, int64_t n_rows);
// x *= s over n values.
void scale(float* x, float s, int64_t n);

float silu(float x);  // x * sigmoid(x)
float sigmoid(float x);
// In place over n values.
void sigmoid_inplace(float* x, int64_t n);
// SwiGLU's product (llama.cpp LLM_FFN_SILU + LLM_FFN_PAR): y = silu(gate) * up.
void silu_glu(const float* gate, const float* up, int64_t n, float* y);
// Softmax of each row of n values in place, max-subtracted (ggml_soft_max).
void softmax(float* x, int64_t n, int64_t n_rows);

// What a dot product with an encoded weight sees of the activations.
//  Exact: the floats as they are.
//  GgmlCpu: the floats rounded as ggml's CPU backend rounds them for a weight of
//    that type (its vec_dot_type): 8-bit blocks of 32 with an fp16 scale (Q8_0;
//    also for Q8_1's pair types) for the 32-value quant types, 8-bit blocks of
//    256 with a float scale (Q8_K) for k-quants and IQ4_XS, F16/BF16 for F16/BF16
//    weights, nothing for F32. llama.cpp's logits carry this rounding (about
//    1e-2 relative on a quantized model); mirroring it makes kt's reference land
//    within float-summation noise of llama.cpp.
//  Bf16: weights (as decoded) and activations both rounded to BF16, nearest
//    even: what matmul_bf16 computes (KTransformers' AMXBF16 experts), summed
//    exactly here.
//  Int8: weights (as decoded) and activations both rounded per chunk of 256
//    values to int8 with one float scale (quantize_chunk_i8): what matmul_i8
//    computes over weights repacked at load (KTransformers' AMXInt8 experts),
//    summed exactly here.
//  Int4: the weights (as decoded) rounded per chunk of 256 values to int4
//    (quantize_chunk_i4), the activations to int8 as for Int8: matmul_i8 over
//    weights repacked to int4 (KTransformers' AMXInt4 experts), summed exactly.
enum class ActRounding { Exact, GgmlCpu, Bf16, Int8, Int4 };

// One chunk of n (<= 256) floats to int8 with its scale, the Int8 rounding (the
// reference of matmul_i8's repacking and quantizers, which call it or match it
// bit for bit): d = max |x| / 127 in float, q = nearest-even(x / d); d = 0 and
// q = 0 for a chunk of zeros.
float quantize_chunk_i8(const float* x, int64_t n, int8_t* q);
// One chunk of n (<= 256) weights to int4 in [-8, 7] with its scale, the Int4
// rounding (matmul_i8's int4 repacking calls it): d0 = the largest-magnitude
// value / -8 (that value lands on -8, as ggml's Q4_0 does), q = clamp(nearest-even(x / d),
// -8, 7); then d1 = sum(x q) / sum(q q) (least squares for those q) and q again
// with d1; whichever of the two has the smaller squared error (d0 on ties; the
// sums in double, eight interleaved partial sums added in a fixed tree).
// d = 0 and q = 0 for a chunk of zeros.
float quantize_chunk_i4(const float* x, int64_t n, int8_t* q);

// x rounded per `rounding` for a dot product with weight_type rows; n must be
// a multiple of weight_type's block size. out may alias x.
void round_activations(GgmlType weight_type, ActRounding rounding, const float* x, int64_t n,
                       float* out);
// Rounds to F16 and back (llama.cpp's default F16 KV cache).
void round_to_f16(float* x, int64_t n);

// ggml_mul_mat with an encoded weight: w holds n_out rows of n_in values of
// `type` (ggml [n_in, n_out]); x: [n_batch][n_in]; y: [n_batch][n_out] with
// y[b][o] = dot(w row o, x[b]) through the type table's dot_row, x rounded per
// `rounding` first.
void matmul(GgmlType type, const void* w, int64_t n_in, int64_t n_out, const float* x,
            int64_t n_batch, float* y, ActRounding rounding = ActRounding::Exact);

// The gated feed-forward of Llama-family models (llama.cpp build_ffn with
// LLM_FFN_SILU, LLM_FFN_PAR): down(silu(gate x) * up x). gate/up: [n_embd, n_ff],
// down: [n_ff, n_embd] in ggml order. Also one expert of a MoE layer.
struct FfnWeights {
  GgmlType gate_type, up_type, down_type;
  const void* gate;
  const void* up;
  const void* down;
  int64_t n_embd;
  int64_t n_ff;
  ActRounding rounding = ActRounding::Exact;  // for all three products
};
// x: [n_tokens][n_embd] -> out: [n_tokens][n_embd].
void ffn_swiglu(const FfnWeights& w, const float* x, int64_t n_tokens, float* out);

// ---- rotary position embedding (ops_ref_rope.cpp) ---------------------------

// How the rotated values pair up (ggml rope modes): Normal (mode 0) rotates
// (x[2i], x[2i+1]), used by llama and deepseek2; NeoX (GGML_ROPE_TYPE_NEOX)
// rotates (x[i], x[i + n_dims/2]), used by qwen2moe.
enum class RopeMode { Normal, NeoX };

// ggml_rope_ext's parameters. Without YaRN: freq_scale 1, ext_factor 0,
// attn_factor 1. With YaRN (arXiv:2309.00071): freq_scale = 1/factor,
// ext_factor 1, n_ctx_orig the pre-extension context, beta_fast/slow the
// correction range in rotations; ggml then also multiplies the magnitude by
// 1 + 0.1 ln(1/freq_scale), which callers cancel through attn_factor when the
// model wants it elsewhere (deepseek2, see runtime/reference_model_deepseek2.cpp).
struct RopeParams {
  int n_dims = 0;  // rotated values at the start of each head (llama.cpp n_rot)
  RopeMode mode = RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  int n_ctx_orig = 0;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// ggml_rope_yarn_corr_dims: the first and last dimension pair index of YaRN's
// interpolation ramp.
void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);

// Rotates, in place, the first p.n_dims values of each of n_heads heads of
// n_tokens tokens; token t at position pos[t]. Head h of token t starts at
// x + t * token_stride + h * head_stride (strides in floats), so a rope slice
// inside a wider head (deepseek2's q_pe) is rotated where it lies.
void rope(float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads,
          int64_t head_stride, const int32_t* pos, const RopeParams& p);

// ---- attention (ops_ref_attention.cpp) --------------------------------------

// Causal multi-head attention over a KV cache with grouped K/V heads (GQA,
// arXiv:2305.13245): query head h reads KV head h / (n_heads / n_kv_heads), as
// ggml's broadcasting mul_mat does.
//   q: [n_tokens][n_heads][dk], k: [n_kv][n_kv_heads][dk], v: [n_kv][n_kv_heads][dv]
//   out: [n_tokens][n_heads][dv]
// Query t is at cache position pos0 + t and attends to positions 0..pos0 + t
// (n_kv >= pos0 + n_tokens). out = softmax(kq_scale * q.k) . v
// rounding GgmlCpu: as llama.cpp's CPU backend with its default F16 KV cache
// and no flash attention: K and V are F16, and each ggml_mul_mat rounds its
// F32 operand to F16 (the queries for q.k, the probabilities for p.v).
void attention(const float* q, const float* k, const float* v, int64_t n_tokens, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t dk, int64_t dv, float kq_scale,
               float* out, ActRounding rounding = ActRounding::Exact);

// DeepSeek's multi-head latent attention (MLA, arXiv:2405.04434). Per token the
// model keeps a compressed latent c (kv_lora_rank values, after attn_kv_a_norm)
// and one shared rope key k_pe (d_rope values, rotated). kv_b (ggml
// [kv_lora_rank, n_heads * (d_nope + d_v)]) expands c: for head h, rows
// h*(d_nope+d_v) + [0, d_nope) give K_nope and the next d_v rows give V.
// Queries are [n_heads][d_nope + d_rope] per token, nope part first (llama.cpp's
// q layout), the rope part already rotated.
struct MlaShape {
  int64_t n_heads;
  int64_t d_nope;
  int64_t d_rope;
  int64_t d_v;
  int64_t kv_lora_rank;
};

// Non-absorbed form (llama.cpp without the MLA tensor split): decompress each
// token's latent into full per-head keys and values, for ordinary attention
// with n_kv_heads == n_heads and dk = d_nope + d_rope.
//   latent: [n][kv_lora_rank], k_pe: [n][d_rope]
//   k: [n][n_heads][d_nope + d_rope] (= [K_nope_h, k_pe]), v: [n][n_heads][d_v]
// The latent meets kv_b rounded per `rounding` (see matmul).
void mla_decompress_kv(GgmlType kv_b_type, const void* kv_b, const MlaShape& s,
                       const float* latent, const float* k_pe, int64_t n, float* k, float* v,
                       ActRounding rounding = ActRounding::Exact);

// Absorbed form (DeepSeek-V2 paper, section 2.1.2): the cache holds only latents
// and k_pe. kv_b's K half is folded into the query (q_abs = W_K_h^T q_nope, so
// q_nope . K_nope_h(c) = q_abs . c), attention runs against the latents, and
// kv_b's V half is applied to the attended latent afterwards.
//   q: [n_tokens][n_heads][d_nope + d_rope]
//   latent_cache: [n_kv][kv_lora_rank], pe_cache: [n_kv][d_rope]
//   out: [n_tokens][n_heads][d_v]
// Same causal rule and kq_scale as attention(); equal to the non-absorbed form
// up to rounding. rounding GgmlCpu rounds the latents as kv_b's products do
// in the non-absorbed form and keeps the attention exact. The F16 rounding of
// decompressed K and V in llama.cpp's cache has no counterpart here, and
// rounding the latent cache to F16 instead (as llama.cpp's own absorbed graph
// does) lands further from llama.cpp's non-absorbed logits (measured on
// tiny-dsv3-Q4_K_M: rows 0.16 off instead of 0.02).
void mla_attention_absorbed(GgmlType kv_b_type, const void* kv_b, const MlaShape& s,
                            const float* q, const float* latent_cache, const float* pe_cache,
                            int64_t n_tokens, int64_t pos0, float kq_scale, float* out,
                            ActRounding rounding = ActRounding::Exact);

// ---- mixture of experts (ops_ref_moe.cpp) ------------------------------------

// GGUF's expert_gating_func values (llama_expert_gating_func_type).
enum class MoeGating { Softmax = 1, Sigmoid = 2 };

// How a MoE layer chooses experts (llama.cpp build_moe_ffn):
//  probs = softmax(logits) or sigmoid(logits);
//  selection = probs + selection_bias (DeepSeek-V3's e_score_correction_bias,
//    GGUF exp_probs_b) when given: the bias steers which experts are chosen, the
//    weights still come from the unbiased probs;
//  with n_group > 1 (DeepSeek-V3 grouped routing), experts form n_group equal
//    groups, each scored by the sum of its two best selection values, and only
//    the best topk_group groups stay eligible;
//  the n_used best eligible experts are chosen; their weights are their probs,
//    divided by their sum when norm_weights, then multiplied by weights_scale
//    unless it is 0 or 1.
struct MoeRouting {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  MoeGating gating = MoeGating::Softmax;
  const float* selection_bias = nullptr;  // [n_expert] or null
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_weights = false;
  float weights_scale = 0.0f;
};

// logits: [n_tokens][n_expert] (the router's output, ffn_gate_inp x);
// ids, weights: [n_tokens][n_used], best expert first.
// margins (optional, [n_tokens]): how far each token's choice is from a tie,
// the weakest chosen expert's selection score minus the strongest eligible
// unchosen one's (with groups, also the last chosen group's score minus the
// next one's, when smaller). Any rounding difference larger than the margin may
// choose other experts, which changes the output wholesale: comparisons across
// implementations need it.
// take_runner_up (optional, [n_tokens]): where k > 0, the token gets the best
// eligible unchosen expert in place of its k-th weakest chosen one (1: the
// weakest), weighted by the same rules: the choice another implementation
// makes when a near tie falls the other way (for tests that must tell such
// ties from errors). k = 2 covers chosen experts tied among themselves, where
// which one is "weakest" is a tie-break.
void moe_route(const float* logits, int64_t n_tokens, const MoeRouting& r, int32_t* ids,
               float* weights, float* margins = nullptr, const uint8_t* take_runner_up = nullptr);

// Routed experts. w's tensors are 3-D, ggml [n_in, n_out, n_expert] (expert e's
// matrix is slice e); w.n_ff is the expert width.
//   out[t] = sum_k weights[t][k] * FFN_{ids[t][k]}(x[t])
// x, out: [n_tokens][n_embd]; ids, weights: [n_tokens][n_used].
// A part of the sum (the plan adds the parts):
//  - slots (one entry per expert id the router can give): w holds only some
//    experts, expert id's matrices are slice slots[id]; a choice whose slot is
//    -1 is skipped (another device holds it), as is an id the table does not
//    cover. n_expert is then the number of slices w holds.
//  - choices [k_begin, k_end): only those of each token's n_used choices
//    (expert deferral: the weakest choices' sum is added a layer later).
struct ExpertSubset {
  const int32_t* slots = nullptr;
  int64_t n_slots = 0;
  int64_t k_begin = 0, k_end = -1;  // -1: n_used
  // Per slice (null: none): its products round as ActRounding::Bf16 instead of
  // w.rounding (the MoE operator's `bf16_rows`: experts with many of a step's rows).
  const uint8_t* bf16 = nullptr;
};
void moe_experts(const FfnWeights& w, int64_t n_expert, const float* x, int64_t n_tokens,
                 const int32_t* ids, const float* weights, int64_t n_used, float* out,
                 const ExpertSubset& subset = {});

}  // namespace kt::cpu::ref
