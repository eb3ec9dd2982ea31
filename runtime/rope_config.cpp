#include "runtime/rope_config.h"

#include <cmath>

namespace kt {

cpu::ref::RopeParams rope_config(const RopeConfigInputs& in) {
  cpu::ref::RopeParams r;
  r.n_dims = in.n_dims;
  r.mode = in.mode;
  r.freq_base = float(in.freq_base);
  r.freq_scale = (in.factor == 0.0 || in.scaling == RopeScaling::None) ? 1.0f : float(1.0 / in.factor);
  r.n_ctx_orig = int(in.n_ctx_orig);
  r.beta_fast = float(in.beta_fast);
  r.beta_slow = float(in.beta_slow);
  r.ext_factor = in.scaling == RopeScaling::Yarn ? 1.0f : 0.0f;
  r.attn_factor = 1.0f;
  if (r.ext_factor != 0.0f) {
    const float s = 1.0f / r.freq_scale;
    // get_mscale(scale, mscale) of transformers' YaRN.
    auto mscale_of = [s](float m) { return s <= 1.0f ? 1.0f : 0.1f * m * std::log(s) + 1.0f; };
    r.attn_factor = in.yarn_log_multiplier != 0.0 ? 1.0f : mscale_of(1.0f);
    r.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(s));
  }
  r.attn_factor *= float(in.attn_factor);
  return r;
}

float deepseek2_kq_scale(const cpu::ref::RopeParams& rope, double yarn_log_multiplier,
                         int64_t head_dim_k) {
  // llama.cpp undoes the converter's 0.1 ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]).
  const float log_mul = float(yarn_log_multiplier) / 0.1f;
  const float s = 1.0f / rope.freq_scale;
  const float attn_factor_org = rope.attn_factor * (1.0f + 0.1f * std::log(s));
  const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * std::log(s));
  return mscale * mscale / std::sqrt(float(head_dim_k));
}

}  // namespace kt
