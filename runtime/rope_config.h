// How llama.cpp turns a model's rope hyper-parameters into ggml_rope_ext's
// parameters and the attention scale (llama-context.cpp, llm_build_deepseek2).
// One function for both readers of hyper-parameters: the reference model
// (from GGUF metadata) and the compiler's lowering (from the kt IR), so the
// plan's rope and kq_scale are the reference's by construction.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops_ref.h"

namespace kt {

enum class RopeScaling { None, Linear, Yarn };

struct RopeConfigInputs {
  int n_dims = 0;               // rotated values per head (rope.dimension_count)
  cpu::ref::RopeMode mode = cpu::ref::RopeMode::Normal;
  double freq_base = 10000.0;   // rope.freq_base / rope_theta
  RopeScaling scaling = RopeScaling::None;
  double factor = 0.0;          // rope.scaling.factor (0: none)
  int64_t n_ctx_orig = 0;       // rope.scaling.original_context_length
  double beta_fast = 32.0, beta_slow = 1.0;
  // rope.scaling.yarn_log_multiplier as GGUF stores it (0.1 * HF mscale_all_dim).
  double yarn_log_multiplier = 0.0;
  double attn_factor = 1.0;     // rope.scaling.attn_factor
};

// ggml_rope_ext's parameters as llama.cpp's context sets them up: YaRN gets
// ext_factor 1, and attn_factor cancels ggml's magnitude factor 1 + 0.1 ln(s)
// unless the log multiplier asks for DeepSeek's mscale ratio (1 when mscale ==
// mscale_all_dim; deepseek2 then puts mscale into kq_scale instead).
cpu::ref::RopeParams rope_config(const RopeConfigInputs& in);

// DeepSeek-V2/V3's softmax scale under YaRN: mscale^2 / sqrt(head_dim_k) with
// mscale = 1 + 0.1 * mscale_all_dim * ln(factor) (both q and k are scaled by
// mscale in the reference implementation). Without YaRN, 1 / sqrt(head_dim_k).
float deepseek2_kq_scale(const cpu::ref::RopeParams& rope, double yarn_log_multiplier,
                         int64_t head_dim_k);

}  // namespace kt
