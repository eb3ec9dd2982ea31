#include "kernels/cuda/cuda_kernels.h"

namespace kt::kern {

std::span<const KernelEntry> cuda_kernels() {
  static const KernelEntry table[] = {
      {"cuda.embed", make_cuda_embed, "token embedding rows of a (quantized) table, on the GPU"},
      {"cuda.rms_norm", make_cuda_rms_norm, "RMSNorm times a weight, per row or per group of columns"},
      {"cuda.add", make_cuda_add, "elementwise sum of two buffers"},
      {"cuda.add_rms_norm", make_cuda_add_rms_norm, "a sum of two buffers and its RMSNorm times a weight (kt-fuse-calls)"},
      {"cuda.silu_mul", make_cuda_silu_mul, "SwiGLU's product silu(gate) * up"},
      {"cuda.sigmoid_gate_add", make_cuda_sigmoid_gate_add, "a + sigmoid(g) * b (Qwen2-MoE's gated shared expert)"},
      {"cuda.select_rows", make_cuda_select_rows, "the step's output rows"},
      {"cuda.matmul", make_cuda_matmul, "x W^T (+ bias): int8 matrix-vector for small batches, tensor cores above"},
      {"cuda.matmul_glu", make_cuda_matmul_glu,
       "silu(x gate^T) * (x up^T): two products and SwiGLU from one rounding of x (kt-fuse-calls)"},
      {"cuda.matmul_multi", make_cuda_matmul_multi,
       "x W_i^T (+ bias_i) for 2-4 matrices of one type and width: one rounding of x, one launch (kt-fuse-calls)"},
      {"cuda.rope", make_cuda_rope, "rotary position embedding (plain, NeoX, YaRN)"},
      {"cuda.kv_store", make_cuda_kv_store, "writes the step's keys and values into the layer's KV cache"},
      {"cuda.attention", make_cuda_attention, "causal grouped-query attention over the KV cache (split-K)"},
      {"cuda.mla_cache_store", make_cuda_mla_cache_store, "MLA: normed latent and roped shared key into the cache"},
      {"cuda.rope_mla_store", make_cuda_rope_mla_store,
       "cuda.rope of q and cuda.mla_cache_store of kv_a in one launch (kt-fuse-calls)"},
      {"cuda.mla_attention", make_cuda_mla_attention, "MLA (computed in absorbed form over the latent cache)"},
      {"cuda.mla_attention_absorbed", make_cuda_mla_attention_absorbed, "MLA in absorbed form over the latent cache"},
      {"cuda.mla_attention_store", make_cuda_mla_attention_store,
       "cuda.rope_mla_store then cuda.mla_attention_absorbed; one launch for the rope, store and q_abs of a token "
       "(kt-fuse-calls)"},
      {"cuda.moe_gate", make_cuda_moe_gate, "MoE router: scores, (grouped) top-k, weights"},
      {"cuda.moe_experts", make_cuda_moe_experts, "routed SwiGLU experts on the GPU"},
      {"cuda.moe_ffn", make_cuda_moe_ffn,
       "routed experts, and the shared experts beside them on a second queue at decode (kt-fuse-calls)"},
      {"cuda.upload", make_cuda_upload, "host buffer -> GPU buffer (the step's rows), on the GPU's queue"},
      {"cuda.download", make_cuda_download, "GPU buffer -> host buffer (the step's rows), on the GPU's queue"},
      {"cuda.peer_copy", make_cuda_peer_copy, "GPU buffer -> another GPU's buffer (the step's rows)"},
  };
  return table;
}

}  // namespace kt::kern
