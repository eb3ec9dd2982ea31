// Reference causal attention: grouped-query attention over a KV cache, and
// DeepSeek's multi-head latent attention in its two forms (ops_ref.h). Scores,
// softmax and the weighted sums are in double; llama.cpp keeps K/V in F16, so
// it differs from these by F16 rounding (about 1e-3 relative on logits).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/ops_ref.h"

namespace kt::cpu::ref {

namespace {

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Softmax in place over scores[0..n); to_f16: then rounded to F16, as ggml's
// mul_mat rounds them to meet an F16 V cache.
void softmax_scores(std::vector<double>& scores, int64_t n, bool to_f16) {
  double max_s = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max_s = std::fmax(max_s, scores[size_t(j)]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[size_t(j)] = std::exp(scores[size_t(j)] - max_s);
    sum += scores[size_t(j)];
  }
  for (int64_t j = 0; j < n; ++j) {
    scores[size_t(j)] /= sum;
    if (to_f16) scores[size_t(j)] = fp16_to_f32(f32_to_fp16(float(scores[size_t(j)])));
  }
}

// kv_b decoded to floats: [n_heads * (d_nope + d_v)][kv_lora_rank].
std::vector<float> decode_kv_b(GgmlType type, const void* kv_b, const MlaShape& s) {
  const TypeTraits& t = type_traits(type);
  if (!t.supported()) std::abort();  // the model loader rejects such files first
  const int64_t rows = s.n_heads * (s.d_nope + s.d_v);
  std::vector<float> w(size_t(rows * s.kv_lora_rank));
  const auto* base = static_cast<const uint8_t*>(kv_b);
  for (int64_t r = 0; r < rows; ++r)
    t.dequant_row(base + uint64_t(r) * t.row_bytes(s.kv_lora_rank), &w[size_t(r * s.kv_lora_rank)],
                  s.kv_lora_rank);
  return w;
}

}  // namespace

void attention(const float* q, const float* k, const float* v, int64_t n_tokens, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t dk, int64_t dv, float kq_scale,
               float* out, ActRounding rounding) {
  const bool f16 = rounding == ActRounding::GgmlCpu;
  const int64_t n_kv = pos0 + n_tokens;
  // The cache as the products see it: F16 under llama.cpp's rounding.
  std::vector<float> k_seen(k, k + n_kv * n_kv_heads * dk), v_seen(v, v + n_kv * n_kv_heads * dv);
  std::vector<float> q_seen(q, q + n_tokens * n_heads * dk);
  if (f16) {
    round_to_f16(k_seen.data(), int64_t(k_seen.size()));
    round_to_f16(v_seen.data(), int64_t(v_seen.size()));
    round_to_f16(q_seen.data(), int64_t(q_seen.size()));
  }

  const int64_t group = n_heads / n_kv_heads;
  std::vector<double> p(static_cast<size_t>(n_kv));
  std::vector<double> acc(static_cast<size_t>(dv));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t n_seen = pos0 + t + 1;  // causal: the cache up to and including itself
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = &q_seen[size_t((t * n_heads + h) * dk)];
      for (int64_t j = 0; j < n_seen; ++j)
        p[size_t(j)] = double(kq_scale) * dot(qh, &k_seen[size_t((j * n_kv_heads + kvh) * dk)], dk);
      softmax_scores(p, n_seen, f16);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < n_seen; ++j) {
        const float* vj = &v_seen[size_t((j * n_kv_heads + kvh) * dv)];
        for (int64_t i = 0; i < dv; ++i) acc[size_t(i)] += p[size_t(j)] * double(vj[i]);
      }
      float* oh = out + (t * n_heads + h) * dv;
      for (int64_t i = 0; i < dv; ++i) oh[i] = float(acc[size_t(i)]);
    }
  }
}

void mla_decompress_kv(GgmlType kv_b_type, const void* kv_b, const MlaShape& s, const float* latent,
                       const float* k_pe, int64_t n, float* k, float* v, ActRounding rounding) {
  const int64_t per_head = s.d_nope + s.d_v;
  const int64_t dk = s.d_nope + s.d_rope;
  std::vector<float> kv(size_t(n * s.n_heads * per_head));
  matmul(kv_b_type, kv_b, s.kv_lora_rank, s.n_heads * per_head, latent, n, kv.data(), rounding);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* src = &kv[size_t((i * s.n_heads + h) * per_head)];
      float* kh = k + (i * s.n_heads + h) * dk;
      float* vh = v + (i * s.n_heads + h) * s.d_v;
      for (int64_t j = 0; j < s.d_nope; ++j) kh[j] = src[j];
      // Every head shares the token's one rope key (llama.cpp: ggml_repeat of k_pe).
      for (int64_t j = 0; j < s.d_rope; ++j) kh[s.d_nope + j] = k_pe[i * s.d_rope + j];
      for (int64_t j = 0; j < s.d_v; ++j) vh[j] = src[s.d_nope + j];
    }
  }
}

void mla_attention_absorbed(GgmlType kv_b_type, const void* kv_b, const MlaShape& s, const float* q,
                            const float* latent_cache, const float* pe_cache, int64_t n_tokens,
                            int64_t pos0, float kq_scale, float* out, ActRounding rounding) {
  const int64_t per_head = s.d_nope + s.d_v;
  const int64_t dq = s.d_nope + s.d_rope;
  const int64_t r = s.kv_lora_rank;
  const int64_t n_kv = pos0 + n_tokens;
  const std::vector<float> w = decode_kv_b(kv_b_type, kv_b, s);

  // The latents as kv_b's products see them (the non-absorbed form multiplies
  // them by kv_b). The attention itself stays exact: see ops_ref.h.
  std::vector<float> lat(size_t(n_kv * r));
  for (int64_t j = 0; j < n_kv; ++j)
    round_activations(kv_b_type, rounding, latent_cache + j * r, r, &lat[size_t(j * r)]);

  std::vector<double> q_abs(static_cast<size_t>(r)), latent_out(static_cast<size_t>(r));
  std::vector<double> p(static_cast<size_t>(n_kv));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t n_seen = pos0 + t + 1;
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* q_nope = q + (t * s.n_heads + h) * dq;
      const float* q_pe = q_nope + s.d_nope;
      const float* w_k = &w[size_t(h * per_head * r)];               // [d_nope][r]
      const float* w_v = &w[size_t((h * per_head + s.d_nope) * r)];  // [d_v][r]

      // q_abs = W_K_h^T q_nope: the query moved into latent space.
      std::fill(q_abs.begin(), q_abs.end(), 0.0);
      for (int64_t j = 0; j < s.d_nope; ++j)
        for (int64_t c = 0; c < r; ++c)
          q_abs[size_t(c)] += double(q_nope[j]) * double(w_k[j * r + c]);

      for (int64_t j = 0; j < n_seen; ++j) {
        const float* lat_j = &lat[size_t(j * r)];
        double score = 0.0;
        for (int64_t c = 0; c < r; ++c) score += q_abs[size_t(c)] * double(lat_j[c]);
        score += dot(q_pe, pe_cache + j * s.d_rope, s.d_rope);
        p[size_t(j)] = double(kq_scale) * score;
      }
      softmax_scores(p, n_seen, false);

      // Attend over latents, then expand with W_V_h (V = W_V_h c is linear in c).
      std::fill(latent_out.begin(), latent_out.end(), 0.0);
      for (int64_t j = 0; j < n_seen; ++j) {
        const float* lat_j = &lat[size_t(j * r)];
        for (int64_t c = 0; c < r; ++c) latent_out[size_t(c)] += p[size_t(j)] * double(lat_j[c]);
      }
      float* oh = out + (t * s.n_heads + h) * s.d_v;
      for (int64_t i = 0; i < s.d_v; ++i) {
        double acc = 0.0;
        for (int64_t c = 0; c < r; ++c) acc += double(w_v[i * r + c]) * latent_out[size_t(c)];
        oh[i] = float(acc);
      }
    }
  }
}

}  // namespace kt::cpu::ref
