// Reference rotary position embedding (RoFormer, arXiv:2104.09864) with YaRN
// context extension (arXiv:2309.00071), computed as ggml's CPU rope does
// (ggml-cpu/ops.cpp: ggml_rope_cache_init, rope_yarn; ggml.c:
// ggml_rope_yarn_corr_dims): the per-pair angle starts at the position and is
// multiplied by theta_scale = base^(-2/n_dims) in float, pair after pair, so the
// angles round as llama.cpp's do.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/cpu/ops_ref.h"

namespace kt::cpu::ref {

namespace {

// The dimension index whose wavelength fits n_rot rotations in n_ctx_orig
// positions (YaRN paper, eq. 17, solved for the dimension).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return float(n_dims) *
         std::log(float(n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

// 1 for pairs below the ramp (extrapolated: high frequencies keep their angle),
// 0 above it (interpolated), linear in between.
float yarn_ramp(float low, float high, int64_t i0) {
  const float y = (float(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// cos/sin of pair i0's angle with YaRN's blend and magnitude correction.
void yarn_cos_sin(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0,
                  float ext_factor, float mscale, float* cos_theta, float* sin_theta) {
  const float theta_interp = freq_scale * theta_extrap;
  float theta = theta_interp;
  if (ext_factor != 0.0f) {
    const float ramp_mix = yarn_ramp(corr_dims[0], corr_dims[1], i0) * ext_factor;
    theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    // YaRN's attention temperature, sqrt(1/t) = 0.1 ln(s) + 1, folded into q and k.
    mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  }
  *cos_theta = std::cos(theta) * mscale;
  *sin_theta = std::sin(theta) * mscale;
}

}  // namespace

void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]) {
  const float start = std::floor(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(float(n_dims - 1), end);
}

void rope(float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads,
          int64_t head_stride, const int32_t* pos, const RopeParams& p) {
  const int64_t n_dims = p.n_dims;
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(n_dims));
  float corr_dims[2];
  rope_yarn_corr_dims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr_dims);

  std::vector<float> cos_sin(static_cast<size_t>(n_dims));  // [cos, sin] per pair
  for (int64_t t = 0; t < n_tokens; ++t) {
    float theta = float(pos[t]);
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
      yarn_cos_sin(theta, p.freq_scale, corr_dims, i0, p.ext_factor, p.attn_factor,
                   &cos_sin[size_t(i0)], &cos_sin[size_t(i0 + 1)]);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const float c = cos_sin[size_t(i0)];
        const float s = cos_sin[size_t(i0 + 1)];
        // Normal pairs neighbours; NeoX pairs value i with value i + n_dims/2.
        const int64_t a = p.mode == RopeMode::Normal ? i0 : i0 / 2;
        const int64_t b = p.mode == RopeMode::Normal ? i0 + 1 : i0 / 2 + n_dims / 2;
        const float x0 = v[a];
        const float x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace kt::cpu::ref
