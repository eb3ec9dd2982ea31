// The reference model runner: executes a GGUF model directly with the
// reference kernels (kernels/cpu/ops_ref.h), one op after another as llama.cpp's
// graph builders do (src/llama-model.cpp: llm_build_llama, llm_build_qwen2moe,
// llm_build_deepseek2). It is the oracle of kt: slow, single-threaded, simple,
// and tested against llama.cpp's logits; the plan-driven executor is compared
// with it.
//
// Architectures: llama (dense Llama; Mixtral through ffn_*_exps + ffn_gate_inp),
// qwen2moe (GQA with q/k/v bias, sigmoid-gated shared expert), deepseek2
// (DeepSeek-V2/V2-Lite/V3: MLA with or without q-LoRA, leading dense layers,
// softmax or sigmoid routing, YaRN rope).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/ops_ref.h"
#include "runtime/gguf.h"
#include "runtime/result.h"

namespace kt {

enum class ModelArch { Llama, Qwen2Moe, Deepseek2 };

struct ReferenceModelOptions {
  // deepseek2 only: run MLA in its absorbed form (the KV cache holds the latent
  // and the rope key per token; kv_b is folded into the query and the output)
  // instead of decompressing K and V per head. Both give the same logits up to
  // rounding.
  bool absorb_mla = false;
  // Round as llama.cpp's CPU backend does instead of computing exactly
  // (cpu::ref::ActRounding::GgmlCpu): activations before each product with an
  // encoded weight as ggml's vec_dot_type for its type (8-bit blocks for
  // quantized weights); attention with an F16 K/V cache (llama.cpp's default),
  // queries and probabilities rounded to F16 as ggml_mul_mat does. With it, the
  // logits agree with llama.cpp's to about 1e-7 until a rounding decision falls
  // differently, and to 1e-4 (F32) / 2e-2 (quantized) after; exact math is off
  // by 1-5% on quantized models. Absorbed MLA rounds only what it shares with
  // the non-absorbed form (see cpu::ref::mla_attention_absorbed).
  bool ggml_rounding = false;
};

// Hyper-parameters as llama.cpp derives them from the GGUF metadata.
struct ModelHParams {
  ModelArch arch = ModelArch::Llama;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // per head; deepseek2: d_nope + d_rope
  int64_t head_dim_v = 0;
  int64_t n_ff = 0;        // dense feed-forward width
  float rms_eps = 1e-6f;
  cpu::ref::RopeParams rope;
  float kq_scale = 1.0f;   // applied to q.k before the softmax

  // Mixture of experts (n_expert == 0: dense).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_layer_dense_lead = 0;  // deepseek2: the first layers are dense
  cpu::ref::MoeGating gating = cpu::ref::MoeGating::Softmax;
  bool expert_weights_norm = false;
  float expert_weights_scale = 0.0f;
  int64_t n_expert_groups = 1;
  int64_t n_group_used = 1;

  // deepseek2 multi-head latent attention.
  int64_t q_lora_rank = 0;  // 0: plain attn_q (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t d_nope = 0;
  int64_t d_rope = 0;
};

class ReferenceModel {
 public:
  // Maps and loads path; errors name the file and the missing or malformed key
  // or tensor.
  static Result<std::unique_ptr<ReferenceModel>> open(const std::string& path,
                                                      ReferenceModelOptions options = {});
  static Result<std::unique_ptr<ReferenceModel>> load(GgufFile file,
                                                      ReferenceModelOptions options = {});
  ~ReferenceModel();

  const ModelHParams& hparams() const;
  // Tokens whose keys and values the cache holds.
  int64_t n_cached() const;

  // Runs tokens at positions pos, pos+1, ... and returns their logits,
  // [tokens.size()][n_vocab]. pos may be at most n_cached(); the cache is cut
  // back to pos first, so pos 0 starts a new sequence and pos == n_cached()
  // continues one (a whole prompt as one batch, then one token at a time).
  Result<std::vector<float>> forward(std::span<const int32_t> tokens, int pos);

  // The margins of the last forward()'s expert choices, [tokens][n_layer]
  // (cpu::ref::moe_route's margins; +inf in dense layers). A choice whose
  // margin is within rounding noise may legitimately fall the other way in
  // another implementation.
  const std::vector<float>& routing_margins() const;
  // For telling such near ties from errors: from now on, the token at position
  // pos takes the runner-up expert in place of its weakest chosen one in layer
  // il (moe_route's take_runner_up), until clear_routing_swaps().
  void add_routing_swap(int64_t il, int64_t pos, int k = 1);
  void clear_routing_swaps();

  struct State;  // weights and cache (runtime/reference_model_state.h)

 private:
  explicit ReferenceModel(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace kt
