// Hyper-parameters and weights of the reference model runner, read from GGUF
// with the keys, defaults and tensor names llama.cpp uses (src/llama-arch.cpp,
// llama-model.cpp load_hparams/load_tensors, llama-context.cpp for the YaRN
// factors). Every missing or malformed item is an Error naming the file and it.
#include <cmath>
#include <optional>
#include <string>

#include "runtime/reference_model_state.h"
#include "runtime/rope_config.h"

namespace kt {

namespace {

using cpu::ref::MoeGating;
using cpu::ref::RopeMode;

class KeyReader {
 public:
  KeyReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  // "{arch}.<key>" as an integer; `fallback` when absent (nullopt: required).
  Result<int64_t> i64(std::string_view key, std::optional<int64_t> fallback = {}) const {
    const std::string full = arch_ + "." + std::string(key);
    const GgufValue* v = f_.find(full);
    if (!v) {
      if (fallback) return *fallback;
      return err(f_.path(), ": missing metadata key '", full, "'");
    }
    int64_t out = 0;
    if (!v->get_i64(&out)) return err(f_.path(), ": metadata key '", full, "' is not an integer");
    return out;
  }
  Result<double> f64(std::string_view key, std::optional<double> fallback = {}) const {
    const std::string full = arch_ + "." + std::string(key);
    const GgufValue* v = f_.find(full);
    if (!v) {
      if (fallback) return *fallback;
      return err(f_.path(), ": missing metadata key '", full, "'");
    }
    double out = 0;
    if (!v->get_f64(&out)) return err(f_.path(), ": metadata key '", full, "' is not a number");
    return out;
  }
  Result<bool> boolean(std::string_view key, bool fallback) const {
    const std::string full = arch_ + "." + std::string(key);
    const GgufValue* v = f_.find(full);
    if (!v) return fallback;
    bool out = false;
    if (!v->get_bool(&out)) return err(f_.path(), ": metadata key '", full, "' is not a bool");
    return out;
  }
  std::string_view str(std::string_view key) const {
    return f_.get_string(arch_ + "." + std::string(key));
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

#define KT_ASSIGN(lhs, expr)               \
  do {                                     \
    auto kt_assign_r_ = (expr);            \
    if (!kt_assign_r_.ok()) return kt_assign_r_.error(); \
    lhs = *kt_assign_r_;                   \
  } while (0)

// Rope parameters and DeepSeek's attention scale: runtime/rope_config.h, from
// the GGUF keys llama.cpp reads.
Status read_rope(const KeyReader& k, ModelHParams& hp, int64_t n_ctx_train) {
  RopeConfigInputs in;
  in.n_dims = hp.rope.n_dims;
  in.mode = hp.rope.mode;
  KT_ASSIGN(in.freq_base, k.f64("rope.freq_base", 10000.0));
  const std::string_view type = k.str("rope.scaling.type");
  in.scaling = type == "yarn" ? RopeScaling::Yarn : type == "none" ? RopeScaling::None : RopeScaling::Linear;
  KT_ASSIGN(in.factor, k.f64("rope.scaling.factor", 0.0));
  if (in.factor == 0.0) KT_ASSIGN(in.factor, k.f64("rope.scale_linear", 0.0));  // older key
  KT_ASSIGN(in.n_ctx_orig, k.i64("rope.scaling.original_context_length", n_ctx_train));
  KT_ASSIGN(in.beta_fast, k.f64("rope.scaling.yarn_beta_fast", 32.0));
  KT_ASSIGN(in.beta_slow, k.f64("rope.scaling.yarn_beta_slow", 1.0));
  KT_ASSIGN(in.yarn_log_multiplier, k.f64("rope.scaling.yarn_log_multiplier", 0.0));
  KT_ASSIGN(in.attn_factor, k.f64("rope.scaling.attn_factor", 1.0));
  hp.rope = rope_config(in);
  return ok_status();
}

Status read_deepseek2_kq_scale(const KeyReader& k, ModelHParams& hp) {
  double log_mul = 0;
  KT_ASSIGN(log_mul, k.f64("rope.scaling.yarn_log_multiplier", 0.0));
  hp.kq_scale = deepseek2_kq_scale(hp.rope, log_mul, hp.head_dim_k);
  return ok_status();
}

}  // namespace

Result<ModelHParams> read_reference_hparams(const GgufFile& file) {
  ModelHParams hp;
  const std::string arch(file.architecture());
  if (arch == "llama")
    hp.arch = ModelArch::Llama;
  else if (arch == "qwen2moe")
    hp.arch = ModelArch::Qwen2Moe;
  else if (arch == "deepseek2")
    hp.arch = ModelArch::Deepseek2;
  else
    return err(file.path(), ": general.architecture '", arch,
               "' is not supported by the reference model (llama, qwen2moe, deepseek2)");
  const KeyReader k(file, arch);

  KT_ASSIGN(hp.n_embd, k.i64("embedding_length"));
  KT_ASSIGN(hp.n_layer, k.i64("block_count"));
  KT_ASSIGN(hp.n_head, k.i64("attention.head_count"));
  KT_ASSIGN(hp.n_head_kv, k.i64("attention.head_count_kv", hp.n_head));
  KT_ASSIGN(hp.n_ff, k.i64("feed_forward_length", 0));
  double eps = 0;
  KT_ASSIGN(eps, k.f64("attention.layer_norm_rms_epsilon"));
  hp.rms_eps = float(eps);
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 ||
      hp.n_head % hp.n_head_kv != 0)
    return err(file.path(), ": bad shape: embedding_length ", hp.n_embd, ", block_count ",
               hp.n_layer, ", head_count ", hp.n_head, ", head_count_kv ", hp.n_head_kv);
  KT_ASSIGN(hp.head_dim_k, k.i64("attention.key_length", hp.n_embd / hp.n_head));
  KT_ASSIGN(hp.head_dim_v, k.i64("attention.value_length", hp.n_embd / hp.n_head));
  int64_t n_rot = 0, n_ctx_train = 0;
  KT_ASSIGN(n_rot, k.i64("rope.dimension_count", hp.head_dim_k));
  KT_ASSIGN(n_ctx_train, k.i64("context_length", 0));
  hp.rope.n_dims = int(n_rot);
  // llama.cpp's rope type per architecture (llama_model_rope_type).
  hp.rope.mode = hp.arch == ModelArch::Qwen2Moe ? RopeMode::NeoX : RopeMode::Normal;
  KT_TRY(read_rope(k, hp, n_ctx_train));
  hp.kq_scale = 1.0f / std::sqrt(float(hp.head_dim_k));

  KT_ASSIGN(hp.n_expert, k.i64("expert_count", 0));
  KT_ASSIGN(hp.n_expert_used, k.i64("expert_used_count", 0));
  KT_ASSIGN(hp.n_ff_exp, k.i64("expert_feed_forward_length", hp.n_ff));
  KT_ASSIGN(hp.n_expert_groups, k.i64("expert_group_count", 1));
  KT_ASSIGN(hp.n_group_used, k.i64("expert_group_used_count", 1));
  if (hp.n_expert > 0 && (hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert ||
                          hp.n_expert_groups <= 0 || hp.n_expert % hp.n_expert_groups != 0))
    return err(file.path(), ": bad experts: expert_count ", hp.n_expert, ", expert_used_count ",
               hp.n_expert_used, ", expert_group_count ", hp.n_expert_groups);

  switch (hp.arch) {
    case ModelArch::Llama:
      // Mixtral: softmax over the chosen experts' logits (llm_build_llama passes
      // norm_w = true).
      hp.expert_weights_norm = true;
      break;
    case ModelArch::Qwen2Moe:
      hp.expert_weights_norm = false;  // llm_build_qwen2moe: norm_w = false
      break;
    case ModelArch::Deepseek2: {
      KT_ASSIGN(hp.n_layer_dense_lead, k.i64("leading_dense_block_count", 0));
      KT_ASSIGN(hp.q_lora_rank, k.i64("attention.q_lora_rank", 0));
      KT_ASSIGN(hp.kv_lora_rank, k.i64("attention.kv_lora_rank"));
      double scale = 0;
      KT_ASSIGN(scale, k.f64("expert_weights_scale", 0.0));
      hp.expert_weights_scale = float(scale);
      KT_ASSIGN(hp.expert_weights_norm, k.boolean("expert_weights_norm", false));
      int64_t gating = 0;
      KT_ASSIGN(gating, k.i64("expert_gating_func", 0));
      if (gating == 0 || gating == 1)  // 0: older V2 files without the key
        hp.gating = MoeGating::Softmax;
      else if (gating == 2)
        hp.gating = MoeGating::Sigmoid;
      else
        return err(file.path(), ": ", arch, ".expert_gating_func ", gating, " is not supported");
      hp.d_rope = n_rot;
      hp.d_nope = hp.head_dim_k - n_rot;
      if (hp.d_nope <= 0 || hp.n_head_kv != hp.n_head)
        return err(file.path(), ": bad MLA shape: key_length ", hp.head_dim_k,
                   ", rope.dimension_count ", n_rot);
      KT_TRY(read_deepseek2_kq_scale(k, hp));
      break;
    }
  }
  return hp;
}

namespace {

// Looks tensors up by name and checks their shapes and types.
class TensorReader {
 public:
  explicit TensorReader(const GgufFile& f) : f_(f) {}

  // A matrix [n_in, n_out] or [n_in, n_out, n_mat]; absent -> error unless optional.
  Result<RefMatrix> matrix(const std::string& name, int64_t n_in, int64_t n_out,
                           int64_t n_mat = 1, bool optional = false) const {
    const GgufTensor* t = f_.tensor(name);
    if (!t) {
      if (optional) return RefMatrix{};
      return err(f_.path(), ": missing tensor '", name, "'");
    }
    const int64_t want[4] = {n_in, n_out, n_mat, 1};
    if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != want[2] || t->ne[3] != 1)
      return err(f_.path(), ": tensor '", name, "' has shape ", t->shape_string(), ", expected [",
                 n_in, ", ", n_out, n_mat > 1 ? ", " + std::to_string(n_mat) : std::string(), "]");
    if (!type_traits(t->type).supported())
      return err(f_.path(), ": tensor '", name, "': type ", type_name(t->type),
                 " is not supported by the reference kernels");
    return RefMatrix{t->type, t->data, n_in, n_out, n_mat};
  }

  // A vector of n values decoded to float; empty when absent and optional.
  Result<std::vector<float>> vector(const std::string& name, int64_t n,
                                   bool optional = false) const {
    auto m = matrix(name, n, 1, 1, optional);
    if (!m.ok()) {
      // 1-D tensors have ne[1] == 1 already; the message above fits them too.
      return m.error();
    }
    std::vector<float> out;
    if (!m->present()) return out;
    out.resize(size_t(n));
    type_traits(m->type).dequant_row(m->data, out.data(), n);
    return out;
  }

 private:
  const GgufFile& f_;
};

}  // namespace

Status load_reference_weights(ReferenceModel::State& s) {
  const TensorReader tr(s.file);
  ModelHParams& hp = s.hp;
  const GgufTensor* embd = s.file.tensor("token_embd.weight");
  if (!embd) return err(s.file.path(), ": missing tensor 'token_embd.weight'");
  hp.n_vocab = embd->ne[1];
  KT_ASSIGN(s.token_embd, tr.matrix("token_embd.weight", hp.n_embd, hp.n_vocab));
  KT_ASSIGN(s.output_norm, tr.vector("output_norm.weight", hp.n_embd));
  KT_ASSIGN(s.output, tr.matrix("output.weight", hp.n_embd, hp.n_vocab, 1, /*optional=*/true));
  if (!s.output.present()) s.output = s.token_embd;  // tied embeddings

  s.layers.resize(size_t(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    RefLayer& L = s.layers[size_t(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t n_q = hp.n_head * hp.head_dim_k;
    KT_ASSIGN(L.attn_norm, tr.vector(p + "attn_norm.weight", hp.n_embd));
    KT_ASSIGN(L.ffn_norm, tr.vector(p + "ffn_norm.weight", hp.n_embd));
    KT_ASSIGN(L.wo, tr.matrix(p + "attn_output.weight", hp.n_head * hp.head_dim_v, hp.n_embd));

    if (hp.arch == ModelArch::Deepseek2) {
      if (hp.q_lora_rank > 0) {
        KT_ASSIGN(L.wq_a, tr.matrix(p + "attn_q_a.weight", hp.n_embd, hp.q_lora_rank));
        KT_ASSIGN(L.q_a_norm, tr.vector(p + "attn_q_a_norm.weight", hp.q_lora_rank));
        KT_ASSIGN(L.wq_b, tr.matrix(p + "attn_q_b.weight", hp.q_lora_rank, n_q));
      } else {
        KT_ASSIGN(L.wq, tr.matrix(p + "attn_q.weight", hp.n_embd, n_q));
      }
      KT_ASSIGN(L.wkv_a_mqa,
                tr.matrix(p + "attn_kv_a_mqa.weight", hp.n_embd, hp.kv_lora_rank + hp.d_rope));
      KT_ASSIGN(L.kv_a_norm, tr.vector(p + "attn_kv_a_norm.weight", hp.kv_lora_rank));
      KT_ASSIGN(L.wkv_b, tr.matrix(p + "attn_kv_b.weight", hp.kv_lora_rank,
                                   hp.n_head * (hp.d_nope + hp.head_dim_v)));
    } else {
      const int64_t n_kv = hp.n_head_kv * hp.head_dim_k;
      const int64_t n_v = hp.n_head_kv * hp.head_dim_v;
      KT_ASSIGN(L.wq, tr.matrix(p + "attn_q.weight", hp.n_embd, n_q));
      KT_ASSIGN(L.wk, tr.matrix(p + "attn_k.weight", hp.n_embd, n_kv));
      KT_ASSIGN(L.wv, tr.matrix(p + "attn_v.weight", hp.n_embd, n_v));
      const bool bias_optional = hp.arch != ModelArch::Qwen2Moe;
      KT_ASSIGN(L.bq, tr.vector(p + "attn_q.bias", n_q, bias_optional));
      KT_ASSIGN(L.bk, tr.vector(p + "attn_k.bias", n_kv, bias_optional));
      KT_ASSIGN(L.bv, tr.vector(p + "attn_v.bias", n_v, bias_optional));
    }

    // Dense layers: llama without experts, deepseek2's leading layers.
    const bool moe = hp.n_expert > 0 &&
                     !(hp.arch == ModelArch::Deepseek2 && il < hp.n_layer_dense_lead);
    if (!moe) {
      KT_ASSIGN(L.ffn_gate, tr.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff));
      KT_ASSIGN(L.ffn_up, tr.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff));
      KT_ASSIGN(L.ffn_down, tr.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd));
      continue;
    }
    const int64_t ne = hp.n_expert, nf = hp.n_ff_exp;
    KT_ASSIGN(L.gate_inp, tr.matrix(p + "ffn_gate_inp.weight", hp.n_embd, ne));
    KT_ASSIGN(L.gate_exps, tr.matrix(p + "ffn_gate_exps.weight", hp.n_embd, nf, ne));
    KT_ASSIGN(L.up_exps, tr.matrix(p + "ffn_up_exps.weight", hp.n_embd, nf, ne));
    KT_ASSIGN(L.down_exps, tr.matrix(p + "ffn_down_exps.weight", nf, hp.n_embd, ne));
    KT_ASSIGN(L.exp_probs_b, tr.vector(p + "exp_probs_b.bias", ne, /*optional=*/true));
    if (hp.arch == ModelArch::Llama) continue;  // Mixtral has no shared expert

    // Shared expert: its width is the tensor's (qwen2moe:
    // expert_shared_feed_forward_length; deepseek2: n_ff_exp * expert_shared_count).
    const GgufTensor* sh = s.file.tensor(p + "ffn_gate_shexp.weight");
    if (!sh) return err(s.file.path(), ": missing tensor '", p, "ffn_gate_shexp.weight'");
    const int64_t n_sh = sh->ne[1];
    KT_ASSIGN(L.gate_shexp, tr.matrix(p + "ffn_gate_shexp.weight", hp.n_embd, n_sh));
    KT_ASSIGN(L.up_shexp, tr.matrix(p + "ffn_up_shexp.weight", hp.n_embd, n_sh));
    KT_ASSIGN(L.down_shexp, tr.matrix(p + "ffn_down_shexp.weight", n_sh, hp.n_embd));
    if (hp.arch == ModelArch::Qwen2Moe)
      KT_ASSIGN(L.gate_inp_shexp, tr.matrix(p + "ffn_gate_inp_shexp.weight", hp.n_embd, 1));
  }
  return ok_status();
}

#undef KT_ASSIGN

}  // namespace kt
