// Shapes of real models for synthetic GGUF files: the exact tensor names, shapes,
// metadata keys and the type mix of llama.cpp's quantization recipes, so kt and
// llama.cpp-family peers can run the same file (../shared/PEERS.md layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/type_traits.h"
#include "runtime/gguf_writer.h"
#include "runtime/result.h"

namespace kt::synth {

struct ModelShape {
  std::string name;       // "deepseek-v2-lite"
  std::string arch;       // GGUF architecture
  std::string tokenizer;  // "llama" (SentencePiece) or "gpt2" (BPE)
  std::string pre;        // tokenizer.ggml.pre for gpt2
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t ffn = 0;                 // dense FFN
  int64_t leading_dense = 0;       // deepseek2: first layers with a dense FFN
  int64_t experts = 0, experts_used = 0, expert_ffn = 0;
  int64_t shared_experts = 0;      // deepseek2: count of shared experts (of expert_ffn)
  int64_t shared_ffn = 0;          // qwen2moe: shared expert FFN
  // deepseek2 MLA
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  int gating = 1;                  // 1 softmax, 2 sigmoid
  int64_t expert_groups = 0, expert_groups_used = 0;
  float expert_scale = 1.0f;
  bool expert_norm = false;
  float rope_base = 10000.0f;
  int64_t ctx = 4096;
  // Newer llama.cpp conversions of deepseek2 also carry kv_b split per head into
  // attn_k_b [qk_nope, kv_lora, heads] and attn_v_b [kv_lora, v_head, heads].
  bool mla_split = false;
};

// Known shapes: deepseek-v2-lite, deepseek-v3, qwen2-57b-a14b, mixtral-8x7b.
const std::vector<ModelShape>& known_shapes();
const ModelShape* find_shape(const std::string& name);

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> shape;  // ggml order
  float center = 0.0f, spread = 0.05f;  // for float tensors (norms sit around 1)
  uint64_t bytes() const;
};

// The tensor table for a recipe: "Q4_K_M", "Q8_0", "IQ4_XS" or "BF16".
Result<std::vector<TensorSpec>> tensor_table(const ModelShape& m, const std::string& recipe);
// The architecture's metadata (hyper-parameters, and a tokenizer of the right size:
// a synthetic vocabulary unless a vocab GGUF is given to copy tokens from).
Status add_metadata(GgufWriter& w, const ModelShape& m, const std::string& recipe, const GgufFile* vocab);

}  // namespace kt::synth
