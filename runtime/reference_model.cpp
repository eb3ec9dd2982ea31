// The reference model runner's forward pass (reference_model.h): the layer loop
// of llama.cpp's graph builders, GQA attention for llama/qwen2moe, and the dense
// and mixture-of-experts feed-forwards. MLA lives in
// reference_model_deepseek2.cpp, loading in reference_model_load.cpp.
#include "runtime/reference_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/reference_model_state.h"

namespace kt {

namespace ref = cpu::ref;

ref::ActRounding act_rounding(const ReferenceModel::State& s) {
  return s.options.ggml_rounding ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
}

void ref_matmul(const ReferenceModel::State& s, const RefMatrix& w, const float* x, int64_t n_batch,
                float* y) {
  ref::matmul(w.type, w.data, w.n_in, w.n_out, x, n_batch, y, act_rounding(s));
}

namespace {

ref::FfnWeights ffn_weights(const ReferenceModel::State& s, const RefMatrix& gate,
                            const RefMatrix& up, const RefMatrix& down) {
  return ref::FfnWeights{gate.type, up.type,   down.type,  gate.data,      up.data,
                         down.data, gate.n_in, gate.n_out, act_rounding(s)};
}

// Grows a cache tensor of `row` floats per token to hold n_total tokens and
// returns where token `first` goes.
float* cache_rows(std::vector<float>& c, int64_t row, int64_t first, int64_t n_total) {
  c.resize(size_t(n_total * row));
  return c.data() + first * row;
}

// llm_build_llama / llm_build_qwen2moe self-attention: q/k/v projections (+bias),
// rope on q and k, causal GQA over the cache, output projection.
void gqa_attention(ReferenceModel::State& s, int64_t il, const float* x, int64_t n,
                   const std::vector<int32_t>& pos, float* out) {
  const ModelHParams& hp = s.hp;
  const RefLayer& L = s.layers[size_t(il)];
  RefLayerCache& c = s.cache[size_t(il)];
  const int64_t pos0 = pos[0];
  const int64_t dq = hp.n_head * hp.head_dim_k;
  const int64_t dk = hp.n_head_kv * hp.head_dim_k;
  const int64_t dv = hp.n_head_kv * hp.head_dim_v;

  std::vector<float> q(size_t(n * dq));
  float* k = cache_rows(c.k, dk, pos0, pos0 + n);
  float* v = cache_rows(c.v, dv, pos0, pos0 + n);
  ref_matmul(s, L.wq, x, n, q.data());
  ref_matmul(s, L.wk, x, n, k);
  ref_matmul(s, L.wv, x, n, v);
  if (!L.bq.empty()) ref::add_bias(q.data(), L.bq.data(), dq, n);
  if (!L.bk.empty()) ref::add_bias(k, L.bk.data(), dk, n);
  if (!L.bv.empty()) ref::add_bias(v, L.bv.data(), dv, n);
  ref::rope(q.data(), n, dq, hp.n_head, hp.head_dim_k, pos.data(), hp.rope);
  ref::rope(k, n, dk, hp.n_head_kv, hp.head_dim_k, pos.data(), hp.rope);

  std::vector<float> attn(size_t(n * hp.n_head * hp.head_dim_v));
  ref::attention(q.data(), c.k.data(), c.v.data(), n, pos0, hp.n_head, hp.n_head_kv, hp.head_dim_k,
                 hp.head_dim_v, hp.kq_scale, attn.data(), act_rounding(s));
  ref_matmul(s, L.wo, attn.data(), n, out);
}

// build_moe_ffn plus the shared expert: deepseek2 adds it as is, qwen2moe
// scales it by sigmoid(ffn_gate_inp_shexp . x) per token.
void moe_ffn(ReferenceModel::State& s, int64_t il, const float* x, int64_t n,
             const std::vector<int32_t>& pos, float* out) {
  const RefLayer& L = s.layers[size_t(il)];
  const ModelHParams& hp = s.hp;
  const int64_t ne = hp.n_expert, nu = hp.n_expert_used;
  std::vector<float> logits(size_t(n * ne)), weights(size_t(n * nu));
  std::vector<int32_t> ids(size_t(n * nu));
  ref_matmul(s, L.gate_inp, x, n, logits.data());

  ref::MoeRouting r;
  r.n_expert = ne;
  r.n_used = nu;
  r.gating = hp.gating;
  r.selection_bias = L.exp_probs_b.empty() ? nullptr : L.exp_probs_b.data();
  r.n_group = hp.n_expert_groups;
  r.topk_group = hp.n_group_used;
  r.norm_weights = hp.expert_weights_norm;
  r.weights_scale = hp.expert_weights_scale;
  std::vector<float> margins(static_cast<size_t>(n));
  std::vector<uint8_t> swap(static_cast<size_t>(n), 0);
  for (const auto& [swap_il, swap_pos, k] : s.routing_swaps)
    for (int64_t t = 0; t < n; ++t)
      if (il == swap_il && pos[size_t(t)] == swap_pos) swap[size_t(t)] = uint8_t(k);
  ref::moe_route(logits.data(), n, r, ids.data(), weights.data(), margins.data(), swap.data());
  for (int64_t t = 0; t < n; ++t)
    s.routing_margins[size_t(t * hp.n_layer + il)] = margins[size_t(t)];
  ref::moe_experts(ffn_weights(s, L.gate_exps, L.up_exps, L.down_exps), ne, x, n, ids.data(),
                   weights.data(), nu, out);

  if (!L.gate_shexp.present()) return;
  std::vector<float> shared(size_t(n * hp.n_embd));
  ref::ffn_swiglu(ffn_weights(s, L.gate_shexp, L.up_shexp, L.down_shexp), x, n, shared.data());
  if (L.gate_inp_shexp.present()) {
    std::vector<float> gate(static_cast<size_t>(n));
    ref_matmul(s, L.gate_inp_shexp, x, n, gate.data());
    for (int64_t t = 0; t < n; ++t)
      ref::scale(&shared[size_t(t * hp.n_embd)], ref::sigmoid(gate[size_t(t)]), hp.n_embd);
  }
  ref::add(out, shared.data(), n * hp.n_embd, out);
}

}  // namespace

ReferenceModel::ReferenceModel(std::unique_ptr<State> state) : s_(std::move(state)) {}
ReferenceModel::~ReferenceModel() = default;

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::open(const std::string& path,
                                                             ReferenceModelOptions options) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  return load(std::move(*file), options);
}

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::load(GgufFile file,
                                                             ReferenceModelOptions options) {
  auto state =
      std::make_unique<State>(State{std::move(file), options, {}, {}, {}, {}, {}, {}, 0, {}, {}});
  auto hp = read_reference_hparams(state->file);
  if (!hp.ok()) return hp.error();
  state->hp = *hp;
  KT_TRY(load_reference_weights(*state));
  state->cache.resize(size_t(state->hp.n_layer));
  return std::unique_ptr<ReferenceModel>(new ReferenceModel(std::move(state)));
}

const ModelHParams& ReferenceModel::hparams() const { return s_->hp; }
int64_t ReferenceModel::n_cached() const { return s_->n_cached; }
const std::vector<float>& ReferenceModel::routing_margins() const { return s_->routing_margins; }

void ReferenceModel::add_routing_swap(int64_t il, int64_t pos, int k) {
  s_->routing_swaps.emplace_back(il, pos, k);
}
void ReferenceModel::clear_routing_swaps() { s_->routing_swaps.clear(); }

Result<std::vector<float>> ReferenceModel::forward(std::span<const int32_t> tokens, int pos) {
  State& s = *s_;
  const ModelHParams& hp = s.hp;
  const int64_t n = int64_t(tokens.size());
  if (n == 0) return err(s.file.path(), ": forward: no tokens");
  if (pos < 0 || pos > s.n_cached)
    return err(s.file.path(), ": forward: position ", pos, " is past the ", s.n_cached,
               " cached tokens");
  for (int64_t t = 0; t < n; ++t)
    if (tokens[size_t(t)] < 0 || tokens[size_t(t)] >= hp.n_vocab)
      return err(s.file.path(), ": forward: token ", tokens[size_t(t)], " at index ", t,
                 " is outside the vocabulary of ", hp.n_vocab);

  // Forget what lies beyond pos: attention reads the cache up to pos + t only,
  // and the caches are regrown from pos.
  s.n_cached = pos;
  s.routing_margins.assign(size_t(n * hp.n_layer), INFINITY);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[size_t(t)] = int32_t(pos + t);

  const int64_t d = hp.n_embd;
  std::vector<float> x(size_t(n * d)), h(x.size()), y(x.size());
  ref::get_rows(s.token_embd.type, s.token_embd.data, d, tokens.data(), n, x.data());

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const RefLayer& L = s.layers[size_t(il)];
    ref::rms_norm(x.data(), L.attn_norm.data(), d, n, hp.rms_eps, h.data());
    if (hp.arch == ModelArch::Deepseek2)
      deepseek2_attention(s, il, h.data(), n, positions, y.data());
    else
      gqa_attention(s, il, h.data(), n, positions, y.data());
    ref::add(x.data(), y.data(), n * d, x.data());

    ref::rms_norm(x.data(), L.ffn_norm.data(), d, n, hp.rms_eps, h.data());
    if (L.is_moe())
      moe_ffn(s, il, h.data(), n, positions, y.data());
    else
      ref::ffn_swiglu(ffn_weights(s, L.ffn_gate, L.ffn_up, L.ffn_down), h.data(), n, y.data());
    ref::add(x.data(), y.data(), n * d, x.data());
  }
  s.n_cached = pos + n;

  ref::rms_norm(x.data(), s.output_norm.data(), d, n, hp.rms_eps, h.data());
  std::vector<float> logits(size_t(n * hp.n_vocab));
  ref_matmul(s, s.output, h.data(), n, logits.data());
  return logits;
}

}  // namespace kt
