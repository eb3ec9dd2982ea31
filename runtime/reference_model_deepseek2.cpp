// DeepSeek-V2/V3 multi-head latent attention in the reference model runner,
// after llama.cpp's llm_build_deepseek2 (src/models/deepseek2.cpp):
//   q      = attn_q x                         (V2-Lite)
//          | attn_q_b rms_norm(attn_q_a x)    (V2/V3 with q-LoRA)
//   [c, k_pe] = attn_kv_a_mqa x; c = rms_norm(c) with attn_kv_a_norm
//   rope on q's last d_rope values per head and on the shared k_pe
//   attention with kq_scale = mscale^2 / sqrt(d_nope + d_rope) (YaRN, see
//   reference_model_load.cpp), then attn_output.
// The cache holds decompressed per-head K/V (llama.cpp's layout for files with
// attn_kv_b) or, with absorb_mla, only c and k_pe per token.
#include "runtime/reference_model_state.h"

namespace kt {

namespace ref = cpu::ref;

void deepseek2_attention(ReferenceModel::State& s, int64_t il, const float* x, int64_t n,
                         const std::vector<int32_t>& pos, float* out) {
  const ModelHParams& hp = s.hp;
  const RefLayer& L = s.layers[size_t(il)];
  RefLayerCache& c = s.cache[size_t(il)];
  const int64_t pos0 = pos[0];
  const int64_t dk = hp.head_dim_k;  // d_nope + d_rope
  const int64_t dq = hp.n_head * dk;
  const int64_t r = hp.kv_lora_rank;

  std::vector<float> q(size_t(n * dq));
  if (L.wq_a.present()) {
    std::vector<float> qa(size_t(n * hp.q_lora_rank));
    ref_matmul(s, L.wq_a, x, n, qa.data());
    ref::rms_norm(qa.data(), L.q_a_norm.data(), hp.q_lora_rank, n, hp.rms_eps, qa.data());
    ref_matmul(s, L.wq_b, qa.data(), n, q.data());
  } else {
    ref_matmul(s, L.wq, x, n, q.data());
  }

  const int64_t d_kv_a = r + hp.d_rope;
  std::vector<float> kv_a(size_t(n * d_kv_a));
  ref_matmul(s, L.wkv_a_mqa, x, n, kv_a.data());
  std::vector<float> latent(size_t(n * r)), k_pe(size_t(n * hp.d_rope));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &kv_a[size_t(t * d_kv_a)];
    std::copy(row, row + r, &latent[size_t(t * r)]);
    std::copy(row + r, row + d_kv_a, &k_pe[size_t(t * hp.d_rope)]);
  }
  ref::rms_norm(latent.data(), L.kv_a_norm.data(), r, n, hp.rms_eps, latent.data());

  // Rope only the d_rope tail of each query head, and the one shared key.
  ref::rope(q.data() + hp.d_nope, n, dq, hp.n_head, dk, pos.data(), hp.rope);
  ref::rope(k_pe.data(), n, hp.d_rope, 1, hp.d_rope, pos.data(), hp.rope);

  const ref::MlaShape shape{hp.n_head, hp.d_nope, hp.d_rope, hp.head_dim_v, r};
  std::vector<float> attn(size_t(n * hp.n_head * hp.head_dim_v));
  if (s.options.absorb_mla) {
    c.k.resize(size_t((pos0 + n) * r));
    c.v.resize(size_t((pos0 + n) * hp.d_rope));
    std::copy(latent.begin(), latent.end(), c.k.begin() + pos0 * r);
    std::copy(k_pe.begin(), k_pe.end(), c.v.begin() + pos0 * hp.d_rope);
    ref::mla_attention_absorbed(L.wkv_b.type, L.wkv_b.data, shape, q.data(), c.k.data(),
                                c.v.data(), n, pos0, hp.kq_scale, attn.data(), act_rounding(s));
  } else {
    const int64_t row_k = hp.n_head * dk, row_v = hp.n_head * hp.head_dim_v;
    c.k.resize(size_t((pos0 + n) * row_k));
    c.v.resize(size_t((pos0 + n) * row_v));
    ref::mla_decompress_kv(L.wkv_b.type, L.wkv_b.data, shape, latent.data(), k_pe.data(), n,
                           c.k.data() + pos0 * row_k, c.v.data() + pos0 * row_v,
                           act_rounding(s));
    ref::attention(q.data(), c.k.data(), c.v.data(), n, pos0, hp.n_head, hp.n_head, dk,
                   hp.head_dim_v, hp.kq_scale, attn.data(), act_rounding(s));
  }
  ref_matmul(s, L.wo, attn.data(), n, out);
}

}  // namespace kt
