// The arithmetic of placement, MLIR-free so it is unit-tested alone: sizes as
// users write them (--gpu-mem 24GiB), devices as KTransformers' rule files name
// them, and the roofline numbers that decide CPU or GPU (DESIGN.md "place"):
// FLOPs per byte of weights moved, at decode batch 1 and at prefill length L.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/result.h"

namespace kt::rules {

// "24GiB", "512 MiB", "1.5GB", "4096B", "4096" (bytes), "0". Binary suffixes
// KiB/MiB/GiB/TiB, decimal KB/MB/GB/TB.
Result<uint64_t> parse_size(std::string_view text);
// "1.2 GiB", "512.0 KiB", "37 B": for messages and --explain.
std::string format_bytes(uint64_t bytes);

// A device as rule files write it. Plain "cuda" is the first GPU until
// split-layers gives the op its layer's GPU; "cuda:N" names one GPU and stays.
struct Device {
  bool gpu = false;
  int index = 0;
  bool index_given = false;  // written as "cuda:N"
  std::string str() const { return gpu ? "cuda:" + std::to_string(index) : "cpu"; }
};
// "cpu", "cuda", "cuda:N"; nullopt for anything else.
std::optional<Device> parse_device(std::string_view text);

// How an op's work grows with the tokens it sees.
enum class CostKind {
  Dense,          // linear, lm_head, router: 2 FLOPs per weight element per token
  RoutedExperts,  // each token runs top_k of n_experts experts
  Norm,           // RMSNorm: ~4 FLOPs per weight element per token
  Lookup,         // embedding: a row copy, no arithmetic
};

struct CostInputs {
  CostKind kind = CostKind::Dense;
  uint64_t elements = 0;  // weight elements, all tensors of the op
  uint64_t bytes = 0;     // their bytes in the GGUF file (quantized)
  int64_t prefill_len = 512;
  int64_t top_k = 0, n_experts = 0;  // RoutedExperts only
};

struct OpCost {
  uint64_t weight_bytes = 0;
  uint64_t flops_per_token = 0;  // one token at decode
  double intensity_decode = 0;   // FLOPs / bytes of weights moved, batch 1
  double intensity_prefill = 0;  // FLOPs / bytes moved for prefill_len tokens at once
};

// At decode a dense op moves all its bytes for one token; routed experts move
// only the top_k experts a token picked, so per byte they are as dense as a
// linear. At prefill the weights are moved once for L tokens: a dense op does
// 2*L FLOPs per element, routed experts only 2*L*top_k/n_experts (each expert
// sees that share of the tokens) — the lowest intensity of the model, which is
// why KTransformers keeps them on the CPU.
OpCost op_cost(const CostInputs& in);

// The model dimensions the GPU reserve depends on.
struct ModelDims {
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t kv_lora_rank = 0, qk_rope_head_dim = 0;  // MLA when kv_lora_rank > 0
  int64_t intermediate = 0, moe_intermediate = 0, top_k = 0;
};

// KV cache for ctx tokens in F16: MLA keeps the compressed latent and the rope
// key per token and layer (kv_lora_rank + qk_rope_head_dim, DESIGN.md
// absorb-mla), GQA keeps K and V for each KV head.
uint64_t kv_cache_bytes(const ModelDims& d, int64_t ctx);
// F32 activations of one prefill of L tokens, one layer live at a time: the
// residual stream and attention projections (4*hidden), the MLP's widest
// intermediate (3x: gate, up, product), the L x L scores of every head, and one
// row of logits.
uint64_t activation_bytes(const ModelDims& d, int64_t prefill_len);

}  // namespace kt::rules
