#include "kernels/cpu/cpu_kernels.h"

namespace kt::kern {

std::span<const KernelEntry> cpu_kernels() {
  static const KernelEntry table[] = {
      {"cpu.embed", make_cpu_embed, "token embedding rows of a (quantized) table"},
      {"cpu.rms_norm", make_cpu_rms_norm, "RMSNorm times a weight, per row or per group of columns"},
      {"cpu.add", make_cpu_add, "elementwise sum of two buffers"},
      {"cpu.add_rms_norm", make_cpu_add_rms_norm, "a sum of two buffers and its RMSNorm times a weight (kt-fuse-calls)"},
      {"cpu.silu_mul", make_cpu_silu_mul, "SwiGLU's product silu(gate) * up"},
      {"cpu.sigmoid_gate_add", make_cpu_sigmoid_gate_add, "a + sigmoid(g) * b (Qwen2-MoE's gated shared expert)"},
      {"cpu.select_rows", make_cpu_select_rows, "the step's output rows (the tokens whose logits are wanted)"},
      {"cpu.matmul", make_cpu_matmul, "x W^T (+ bias) with W in any supported GGUF type"},
      {"cpu.rope", make_cpu_rope, "rotary position embedding (plain, NeoX, YaRN) in place"},
      {"cpu.kv_store", make_cpu_kv_store, "writes the step's keys and values into the layer's KV cache"},
      {"cpu.attention", make_cpu_attention, "causal grouped-query attention over the KV cache"},
      {"cpu.mla_cache_store", make_cpu_mla_cache_store, "MLA: normed latent and roped shared key into the latent cache"},
      {"cpu.mla_attention", make_cpu_mla_attention, "MLA with K and V decompressed from the latent cache"},
      {"cpu.mla_attention_absorbed", make_cpu_mla_attention_absorbed, "MLA in absorbed form over the latent cache"},
      {"cpu.moe_gate", make_cpu_moe_gate, "MoE router: scores, (grouped) top-k, weights"},
      {"cpu.moe_experts", make_cpu_moe_experts, "routed SwiGLU experts combined with the routing weights"},
  };
  return table;
}

}  // namespace kt::kern
