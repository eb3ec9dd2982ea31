// Reference mixture-of-experts routing and expert evaluation (ops_ref.h),
// following llama.cpp's build_moe_ffn (src/llama-graph.cpp): gating by softmax
// (Mixtral, Qwen2-MoE, DeepSeek-V2) or sigmoid with a selection-only bias and
// grouped top-k (DeepSeek-V3, arXiv:2412.19437 section 2.1.2).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "kernels/cpu/ops_ref.h"

namespace kt::cpu::ref {

namespace {

// Indices of the k largest values, largest first; ties keep the lower index
// first (a stable order, so the choice does not depend on the sort).
std::vector<int64_t> top_k(const std::vector<float>& v, int64_t k) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), int64_t(0));
  std::stable_sort(idx.begin(), idx.end(),
                   [&v](int64_t a, int64_t b) { return v[size_t(a)] > v[size_t(b)]; });
  idx.resize(size_t(std::min<int64_t>(k, int64_t(idx.size()))));
  return idx;
}

// The k-th largest value minus the (k+1)-th (+inf when nothing is left out).
float gap_after(const std::vector<float>& v, const std::vector<int64_t>& order_desc, int64_t k) {
  if (k >= int64_t(v.size())) return INFINITY;
  std::vector<float> rest;
  for (size_t i = 0; i < v.size(); ++i)
    if (std::find(order_desc.begin(), order_desc.end(), int64_t(i)) == order_desc.end())
      rest.push_back(v[i]);
  const float best_rest = *std::max_element(rest.begin(), rest.end());
  return v[size_t(order_desc.back())] - best_rest;
}

// DeepSeek-V3 group-limited routing: keep only experts of the topk_group groups
// whose two best selection scores sum highest; the rest become -inf. Returns
// the margin of the group choice.
float mask_to_best_groups(std::vector<float>& sel, int64_t n_group, int64_t topk_group) {
  const int64_t per_group = int64_t(sel.size()) / n_group;
  std::vector<float> group_score(static_cast<size_t>(n_group));
  for (int64_t g = 0; g < n_group; ++g) {
    std::vector<float> members(sel.begin() + g * per_group, sel.begin() + (g + 1) * per_group);
    double s = 0.0;
    for (int64_t i : top_k(members, 2)) s += double(members[size_t(i)]);
    group_score[size_t(g)] = float(s);
  }
  std::vector<bool> keep(static_cast<size_t>(n_group), false);
  const std::vector<int64_t> best = top_k(group_score, topk_group);
  for (int64_t g : best) keep[size_t(g)] = true;
  for (int64_t g = 0; g < n_group; ++g)
    if (!keep[size_t(g)])
      std::fill(sel.begin() + g * per_group, sel.begin() + (g + 1) * per_group, -INFINITY);
  return gap_after(group_score, best, topk_group);
}

}  // namespace

void moe_route(const float* logits, int64_t n_tokens, const MoeRouting& r, int32_t* ids,
               float* weights, float* margins, const uint8_t* take_runner_up) {
  std::vector<float> probs(static_cast<size_t>(r.n_expert)), sel(size_t(r.n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::copy(logits + t * r.n_expert, logits + (t + 1) * r.n_expert, probs.begin());
    if (r.gating == MoeGating::Softmax)
      softmax(probs.data(), r.n_expert, 1);
    else
      sigmoid_inplace(probs.data(), r.n_expert);

    // The bias only steers the choice (DeepSeek-V3's auxiliary-loss-free
    // balancing); the weights below come from the unbiased probs.
    for (int64_t e = 0; e < r.n_expert; ++e)
      sel[size_t(e)] = probs[size_t(e)] + (r.selection_bias ? r.selection_bias[e] : 0.0f);
    float margin = INFINITY;
    if (r.n_group > 1) margin = mask_to_best_groups(sel, r.n_group, r.topk_group);

    std::vector<int64_t> chosen = top_k(sel, r.n_used);
    if (margins) margins[t] = std::min(margin, gap_after(sel, chosen, r.n_used));
    const int64_t drop = take_runner_up ? take_runner_up[t] : 0;
    if (drop > 0 && drop <= r.n_used && r.n_used < r.n_expert) {
      const std::vector<int64_t> ranked = top_k(sel, r.n_used + 1);
      if (sel[size_t(ranked.back())] > -INFINITY) chosen[size_t(r.n_used - drop)] = ranked.back();
    }
    int32_t* ids_t = ids + t * r.n_used;
    float* w_t = weights + t * r.n_used;
    double sum = 0.0;
    for (int64_t k = 0; k < r.n_used; ++k) {
      ids_t[k] = int32_t(chosen[size_t(k)]);
      w_t[k] = probs[size_t(chosen[size_t(k)])];
      sum += double(w_t[k]);
    }
    if (r.norm_weights) {
      // llama.cpp clamps the sum to F16's smallest normal before dividing.
      sum = std::max(sum, 6.103515625e-5);
      for (int64_t k = 0; k < r.n_used; ++k) w_t[k] = float(double(w_t[k]) / sum);
    }
    if (r.weights_scale != 0.0f && r.weights_scale != 1.0f)
      for (int64_t k = 0; k < r.n_used; ++k) w_t[k] *= r.weights_scale;
  }
}

void moe_experts(const FfnWeights& w, int64_t n_expert, const float* x, int64_t n_tokens,
                 const int32_t* ids, const float* weights, int64_t n_used, float* out,
                 const ExpertSubset& subset) {
  // Bytes of one expert's matrix in each 3-D tensor.
  const uint64_t gate_bytes = type_traits(w.gate_type).row_bytes(w.n_embd) * uint64_t(w.n_ff);
  const uint64_t up_bytes = type_traits(w.up_type).row_bytes(w.n_embd) * uint64_t(w.n_ff);
  const uint64_t down_bytes = type_traits(w.down_type).row_bytes(w.n_ff) * uint64_t(w.n_embd);
  std::vector<float> y(static_cast<size_t>(w.n_embd));
  std::vector<double> acc(static_cast<size_t>(w.n_embd));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const int64_t k_end = subset.k_end < 0 ? n_used : std::min(subset.k_end, n_used);
    for (int64_t k = std::max<int64_t>(subset.k_begin, 0); k < k_end; ++k) {
      int64_t e = ids[t * n_used + k];
      if (subset.slots) {
        if (e < 0 || e >= subset.n_slots || subset.slots[e] < 0) continue;
        e = subset.slots[e];
      }
      if (e < 0 || e >= n_expert) std::abort();  // moe_route never yields one
      FfnWeights expert = w;
      expert.gate = static_cast<const uint8_t*>(w.gate) + uint64_t(e) * gate_bytes;
      expert.up = static_cast<const uint8_t*>(w.up) + uint64_t(e) * up_bytes;
      expert.down = static_cast<const uint8_t*>(w.down) + uint64_t(e) * down_bytes;
      if (subset.bf16 && subset.bf16[e]) expert.rounding = ActRounding::Bf16;
      ffn_swiglu(expert, x + t * w.n_embd, 1, y.data());
      const double wk = double(weights[t * n_used + k]);
      for (int64_t i = 0; i < w.n_embd; ++i) acc[size_t(i)] += wk * double(y[size_t(i)]);
    }
    for (int64_t i = 0; i < w.n_embd; ++i) out[t * w.n_embd + i] = float(acc[size_t(i)]);
  }
}

}  // namespace kt::cpu::ref
