// Internals of the reference model runner shared by its source files: the
// weights of each layer (views into the mapped GGUF; small vectors decoded to
// float) and the KV cache. Not an API: runtime/reference_model.h is.
#pragma once

#include <cstdint>
#include <utility>
#include <tuple>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/reference_model.h"

namespace kt {

// An encoded weight tensor: n_mat matrices of n_out rows of n_in values
// (ggml [n_in, n_out, n_mat]). data == nullptr when the tensor is absent.
struct RefMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t n_mat = 1;
  bool present() const { return data != nullptr; }
};

struct RefLayer {
  std::vector<float> attn_norm, ffn_norm;

  // llama / qwen2moe attention; biases empty when absent.
  RefMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;

  // deepseek2 MLA (wq above when there is no q-LoRA).
  RefMatrix wq_a, wq_b, wkv_a_mqa, wkv_b;
  std::vector<float> q_a_norm, kv_a_norm;

  // Dense feed-forward.
  RefMatrix ffn_gate, ffn_up, ffn_down;

  // Mixture of experts: router, selection bias, routed experts (3-D), shared
  // expert and its sigmoid gate (qwen2moe).
  RefMatrix gate_inp;
  std::vector<float> exp_probs_b;
  RefMatrix gate_exps, up_exps, down_exps;
  RefMatrix gate_shexp, up_shexp, down_shexp;
  RefMatrix gate_inp_shexp;

  bool is_moe() const { return gate_inp.present(); }
};

// Per layer. GQA and non-absorbed MLA: k [n][n_head_kv][head_dim_k],
// v [n][n_head_kv][head_dim_v]. Absorbed MLA: k holds latents [n][kv_lora_rank]
// and v the rope keys [n][d_rope].
struct RefLayerCache {
  std::vector<float> k, v;
};

struct ReferenceModel::State {
  GgufFile file;
  ReferenceModelOptions options;
  ModelHParams hp;
  RefMatrix token_embd, output;
  std::vector<float> output_norm;
  std::vector<RefLayer> layers;
  std::vector<RefLayerCache> cache;
  int64_t n_cached = 0;
  std::vector<float> routing_margins;  // of the last forward(), [n][n_layer]
  std::vector<std::tuple<int64_t, int64_t, int>> routing_swaps;  // (layer, position, k)
};

// reference_model_load.cpp
Result<ModelHParams> read_reference_hparams(const GgufFile& file);
Status load_reference_weights(ReferenceModel::State& s);

// reference_model_deepseek2.cpp: MLA attention of layer il for n tokens at
// positions pos..; x: [n][n_embd] (normed), out: [n][n_embd] (after attn_output).
void deepseek2_attention(ReferenceModel::State& s, int64_t il, const float* x, int64_t n,
                         const std::vector<int32_t>& pos, float* out);

// Matrix product through a RefMatrix (matrix 0), activations rounded per the
// model's options.
void ref_matmul(const ReferenceModel::State& s, const RefMatrix& w, const float* x,
                int64_t n_batch, float* y);
cpu::ref::ActRounding act_rounding(const ReferenceModel::State& s);

}  // namespace kt
