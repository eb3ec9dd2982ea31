// The architecture table (see arch_table.h) and reading hyper-parameters from
// GGUF metadata through it.
#include "passes/arch_table.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace kt {
namespace {

using M = ModelConfig;

// Every hyper-parameter kt knows: GGUF key (llama.cpp's LLM_KV names without
// the "<arch>." prefix) and config.json key(s).
const HParamKey kHParams[] = {
    {"vocab_size", "vocab_size", "vocab_size", &M::vocab_size},
    {"hidden_size", "embedding_length", "hidden_size", &M::hidden_size},
    {"num_hidden_layers", "block_count", "num_hidden_layers", &M::num_hidden_layers},
    {"num_attention_heads", "attention.head_count", "num_attention_heads", &M::num_attention_heads},
    {"num_key_value_heads", "attention.head_count_kv", "num_key_value_heads", &M::num_key_value_heads},
    {"head_dim", "", "head_dim", &M::head_dim},
    {"intermediate_size", "feed_forward_length", "intermediate_size", &M::intermediate_size},
    {"max_position_embeddings", "context_length", "max_position_embeddings", &M::max_position_embeddings},
    {"rms_norm_eps", "attention.layer_norm_rms_epsilon", "rms_norm_eps", &M::rms_norm_eps},
    {"rope_theta", "rope.freq_base", "rope_theta", &M::rope_theta},
    {"rope_scaling.type", "rope.scaling.type", "rope_scaling.type|rope_scaling.rope_type",
     &M::rope_scaling_type},
    {"rope_scaling.factor", "rope.scaling.factor", "rope_scaling.factor", &M::rope_scaling_factor},
    {"rope_scaling.original_max_position_embeddings", "rope.scaling.original_context_length",
     "rope_scaling.original_max_position_embeddings", &M::rope_original_max_position_embeddings},
    {"rope_scaling.log_multiplier", "rope.scaling.yarn_log_multiplier",
     "rope_scaling.mscale_all_dim", &M::rope_yarn_log_multiplier, 0.1},
    {"rope_scaling.beta_fast", "rope.scaling.yarn_beta_fast", "rope_scaling.beta_fast",
     &M::rope_beta_fast},
    {"rope_scaling.beta_slow", "rope.scaling.yarn_beta_slow", "rope_scaling.beta_slow",
     &M::rope_beta_slow},
    {"q_lora_rank", "attention.q_lora_rank", "q_lora_rank", &M::q_lora_rank},
    {"kv_lora_rank", "attention.kv_lora_rank", "kv_lora_rank", &M::kv_lora_rank},
    {"qk_nope_head_dim", "", "qk_nope_head_dim", &M::qk_nope_head_dim},
    {"qk_rope_head_dim", "", "qk_rope_head_dim", &M::qk_rope_head_dim},
    {"v_head_dim", "", "v_head_dim", &M::v_head_dim},
    {"n_routed_experts", "expert_count", "n_routed_experts|num_experts|num_local_experts",
     &M::n_routed_experts},
    {"num_experts_per_tok", "expert_used_count", "num_experts_per_tok", &M::num_experts_per_tok},
    {"moe_intermediate_size", "expert_feed_forward_length", "moe_intermediate_size",
     &M::moe_intermediate_size},
    {"n_shared_experts", "expert_shared_count", "n_shared_experts", &M::n_shared_experts},
    {"shared_expert_intermediate_size", "expert_shared_feed_forward_length",
     "shared_expert_intermediate_size", &M::shared_expert_intermediate_size},
    {"first_k_dense_replace", "leading_dense_block_count", "first_k_dense_replace",
     &M::first_k_dense_replace},
    {"norm_topk_prob", "expert_weights_norm", "norm_topk_prob", &M::norm_topk_prob},
    {"routed_scaling_factor", "expert_weights_scale", "routed_scaling_factor",
     &M::routed_scaling_factor},
    // config.json spells it "softmax" / "sigmoid"; hf_config.cpp maps it.
    {"scoring_func", "expert_gating_func", "scoring_func", &M::scoring_func},
    {"n_group", "expert_group_count", "n_group", &M::n_group},
    {"topk_group", "expert_group_used_count", "topk_group", &M::topk_group},
    {"tie_word_embeddings", "", "tie_word_embeddings", &M::tie_word_embeddings},
    {"rope.dimension_count", "rope.dimension_count", "", &M::gguf_rope_dim},
    {"attention.key_length", "attention.key_length", "", &M::gguf_key_length},
    {"attention.value_length", "attention.value_length", "", &M::gguf_value_length},
    {"attention.key_length_mla", "attention.key_length_mla", "", &M::gguf_key_length_mla},
    {"attention.value_length_mla", "attention.value_length_mla", "", &M::gguf_value_length_mla},
};

const char* const kTensorNames[] = {
    "token_embd", "output_norm", "output",
    "blk.%d.attn_norm", "blk.%d.attn_q", "blk.%d.attn_k", "blk.%d.attn_v", "blk.%d.attn_output",
    "blk.%d.attn_q_norm", "blk.%d.attn_k_norm",
    "blk.%d.attn_q_a", "blk.%d.attn_q_a_norm", "blk.%d.attn_q_b", "blk.%d.attn_kv_a_mqa",
    "blk.%d.attn_kv_a_norm", "blk.%d.attn_kv_b", "blk.%d.attn_k_b", "blk.%d.attn_v_b",
    "blk.%d.ffn_norm", "blk.%d.ffn_gate", "blk.%d.ffn_up", "blk.%d.ffn_down",
    "blk.%d.ffn_gate_inp", "blk.%d.exp_probs_b", "blk.%d.ffn_gate_exps", "blk.%d.ffn_up_exps",
    "blk.%d.ffn_down_exps",
    "blk.%d.ffn_gate_shexp", "blk.%d.ffn_up_shexp", "blk.%d.ffn_down_shexp",
    "blk.%d.ffn_gate_inp_shexp",
};
static_assert(std::size(kTensorNames) == size_t(Tensor::kFfnGateInpShexp) + 1);

constexpr std::string_view kBasics[] = {"hidden_size", "num_hidden_layers",
                                        "num_attention_heads", "rms_norm_eps"};
constexpr std::string_view kDeepseek2Required[] = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "rms_norm_eps", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"};
constexpr std::string_view kQwen2MoeRequired[] = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "rms_norm_eps",
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size"};
constexpr std::string_view kQwen3MoeRequired[] = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "rms_norm_eps",
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"};

constexpr const char* kV3 = "ktransformers.models.modeling_deepseek_v3";
const ModelFamily kDeepseek2Families[] = {
    {"deepseek_v3", kV3, "DeepseekV3", "DeepseekV3MoE",
     "ktransformers.models.modeling_deepseek_v3.MoEGate", "mlp", FamilyWhen::kSigmoidRouting},
    {"kimi_k2", kV3, "DeepseekV3", "DeepseekV3MoE",
     "ktransformers.models.modeling_deepseek_v3.MoEGate", "mlp", FamilyWhen::kSigmoidRouting},
    {"deepseek_v2", "ktransformers.models.modeling_deepseek", "DeepseekV2", "DeepseekV2MoE",
     "ktransformers.models.modeling_deepseek.MoEGate", "mlp", FamilyWhen::kAlways},
};
const ModelFamily kQwen2MoeFamilies[] = {
    {"qwen2_moe", "ktransformers.models.modeling_qwen2_moe", "Qwen2Moe",
     "Qwen2MoeSparseMoeBlock", "torch.nn.Linear", "mlp", FamilyWhen::kAlways},
};
const ModelFamily kQwen3MoeFamilies[] = {
    {"qwen3_moe", "ktransformers.models.modeling_qwen3_moe", "Qwen3Moe",
     "Qwen3MoeSparseMoeBlock", "torch.nn.Linear", "mlp", FamilyWhen::kAlways},
};
// GGUF calls Mixtral "llama": its experts tell them apart.
const ModelFamily kLlamaFamilies[] = {
    {"mixtral", "ktransformers.models.modeling_mixtral", "Mixtral", "MixtralSparseMoeBlock",
     "torch.nn.Linear", "block_sparse_moe", FamilyWhen::kExperts},
    {"llama", "ktransformers.models.modeling_llama", "Llama", "", "", "mlp",
     FamilyWhen::kDense},
};

const ArchInfo kArchs[] = {
    {"deepseek2", Attention::kMla, Use::kNo, Use::kNo, Use::kOptional, SharedExperts::kStacked,
     false, kDeepseek2Required, kDeepseek2Families},
    {"qwen2moe", Attention::kGqa, Use::kRequired, Use::kNo, Use::kNo, SharedExperts::kGated,
     false, kQwen2MoeRequired, kQwen2MoeFamilies},
    {"qwen3moe", Attention::kGqa, Use::kNo, Use::kRequired, Use::kNo, SharedExperts::kNone,
     true, kQwen3MoeRequired, kQwen3MoeFamilies},
    {"llama", Attention::kGqa, Use::kOptional, Use::kNo, Use::kNo, SharedExperts::kNone, true,
     kBasics, kLlamaFamilies},
};

// GGUF stores most floats as f32: take the shortest decimal that reads back as
// that f32 (1e-06, not 9.99999997e-07), as the HF config wrote it.
double f32_as_written(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf - 1, float(v));
  *r.ptr = 0;
  return std::strtod(buf, nullptr);
}

const HParamKey* key_named(std::string_view name) {
  for (const HParamKey& k : kHParams)
    if (k.name == name) return &k;
  return nullptr;
}

bool is_set(const ModelConfig& cfg, const HParamKey& k) {
  return std::visit(
      [&](auto field) {
        const auto& v = cfg.*field;
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) return !v.empty();
        else return v != 0;
      },
      k.field);
}

}  // namespace

std::span<const HParamKey> hparam_keys() { return kHParams; }

std::string tensor_name(Tensor t, int layer, std::string_view suffix) {
  char buf[96];
  std::snprintf(buf, sizeof buf, kTensorNames[size_t(t)], layer);
  std::string name = buf;
  if (!suffix.empty()) name.append(".").append(suffix);
  return name;
}

std::string ModelFamily::cls(std::string_view suffix) const {
  return std::string(module) + "." + std::string(prefix) + std::string(suffix);
}
std::string ModelFamily::in_module(std::string_view name) const {
  return std::string(module) + "." + std::string(name);
}

const ArchInfo* find_arch(std::string_view gguf_arch) {
  for (const ArchInfo& a : kArchs)
    if (a.name == gguf_arch) return &a;
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const ArchInfo& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Result<ModelConfig> read_gguf_hparams(const GgufFile& file, const ArchInfo& arch) {
  ModelConfig cfg;
  for (const HParamKey& k : kHParams) {
    if (k.gguf_key.empty()) continue;
    std::string key = std::string(arch.name) + "." + std::string(k.gguf_key);
    const GgufValue* v = file.find(key);
    if (!v) continue;
    bool ok = std::visit(
        [&](auto field) {
          auto& dst = cfg.*field;
          using T = std::decay_t<decltype(dst)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            return v->get_i64(&dst);
          } else if constexpr (std::is_same_v<T, double>) {
            if (!v->get_f64(&dst)) return false;
            if (v->type() == GgufType::FLOAT32) dst = f32_as_written(dst);
            return true;
          } else if constexpr (std::is_same_v<T, bool>) {
            return v->get_bool(&dst);
          } else {
            dst = std::string(v->str());
            return v->type() == GgufType::STRING;
          }
        },
        k.field);
    if (!ok)
      return err(file.path(), ": metadata key '", key, "' has an unexpected type (",
                 gguf_type_name(v->type()), ")");
    cfg.from_gguf.insert(std::string(k.name));
  }
  auto derive = [&](int64_t& dst, int64_t value, const char* name) {
    dst = value;
    cfg.from_gguf.insert(name);
  };
  // The vocabulary size is the embedding table's when the key is absent.
  if (!cfg.known("vocab_size"))
    if (const GgufTensor* t = file.tensor(tensor_name(Tensor::kTokenEmbd)); t && t->n_dims == 2)
      derive(cfg.vocab_size, t->ne[1], "vocab_size");
  cfg.tie_word_embeddings = file.tensor(tensor_name(Tensor::kOutput)) == nullptr;
  cfg.from_gguf.insert("tie_word_embeddings");
  if (arch.attention == Attention::kMla) {
    // key_length is nope + rope per head; files that store k_b/v_b (absorbed
    // MLA) give the per-head sizes in the *_mla keys instead.
    int64_t rope = cfg.gguf_rope_dim;
    int64_t k = cfg.gguf_key_length_mla ? cfg.gguf_key_length_mla : cfg.gguf_key_length;
    int64_t v = cfg.gguf_value_length_mla ? cfg.gguf_value_length_mla : cfg.gguf_value_length;
    if (rope) derive(cfg.qk_rope_head_dim, rope, "qk_rope_head_dim");
    if (rope && k > rope) derive(cfg.qk_nope_head_dim, k - rope, "qk_nope_head_dim");
    if (v) derive(cfg.v_head_dim, v, "v_head_dim");
  } else if (cfg.gguf_key_length) {
    derive(cfg.head_dim, cfg.gguf_key_length, "head_dim");
  }
  return cfg;
}

Status finish_hparams(const std::string& gguf_path, const ArchInfo& arch, ModelConfig& cfg) {
  // llama.cpp's defaults for keys files may omit.
  if (!cfg.num_key_value_heads) cfg.num_key_value_heads = cfg.num_attention_heads;
  if (!cfg.rope_theta) cfg.rope_theta = 10000;
  if (!cfg.scoring_func) cfg.scoring_func = 1;
  if (!cfg.known("norm_topk_prob") && cfg.n_routed_experts > 0)
    cfg.norm_topk_prob = arch.norm_topk_prob;
  if (arch.attention == Attention::kGqa && !cfg.head_dim && cfg.num_attention_heads)
    cfg.head_dim = cfg.hidden_size / cfg.num_attention_heads;
  // Mixtral's experts are feed_forward_length wide (no expert_* key).
  if (cfg.n_routed_experts && !cfg.moe_intermediate_size)
    cfg.moe_intermediate_size = cfg.intermediate_size;

  for (std::string_view name : arch.required) {
    const HParamKey* k = key_named(name);
    if (k && !is_set(cfg, *k))
      return err(gguf_path, ": missing hyper-parameter '", name, "'",
                 k->gguf_key.empty() ? std::string()
                                     : " (GGUF key '" + std::string(arch.name) + "." +
                                           std::string(k->gguf_key) + "')");
  }
  if (cfg.scoring_func != 1 && cfg.scoring_func != 2)
    return err(gguf_path, ": expert_gating_func ", cfg.scoring_func,
               " is not 1 (softmax) or 2 (sigmoid)");
  if (cfg.rope_scaling_type == "none") cfg.rope_scaling_type.clear();
  if (!cfg.rope_scaling_type.empty()) {
    if (cfg.rope_scaling_type != "yarn")
      return err(gguf_path, ": rope scaling '", cfg.rope_scaling_type, "' is not supported");
    if (!(cfg.rope_scaling_factor > 0) || cfg.rope_original_max_position_embeddings <= 0)
      return err(gguf_path, ": yarn rope scaling needs a factor and original_context_length");
  }
  if (arch.attention == Attention::kGqa) {
    if (cfg.gguf_rope_dim && cfg.gguf_rope_dim != cfg.head_dim)
      return err(gguf_path, ": partial rotary embedding (rope.dimension_count ",
                 cfg.gguf_rope_dim, " < head_dim ", cfg.head_dim, ") is not supported");
    if (cfg.gguf_value_length && cfg.gguf_value_length != cfg.head_dim)
      return err(gguf_path, ": value_length ", cfg.gguf_value_length, " differs from head_dim ",
                 cfg.head_dim);
  }
  return ok_status();
}

Result<const ModelFamily*> choose_family(const ArchInfo& arch, const ModelConfig& cfg,
                                         std::string_view model_type) {
  std::string names;
  for (const ModelFamily& f : arch.families) {
    if (!model_type.empty()) {
      if (f.hf_model_type == model_type) return &f;
      names += (names.empty() ? "" : ", ") + std::string(f.hf_model_type);
      continue;
    }
    bool holds = false;
    switch (f.when) {
      case FamilyWhen::kAlways: holds = true; break;
      case FamilyWhen::kSigmoidRouting: holds = cfg.scoring_func == 2; break;
      case FamilyWhen::kSoftmaxRouting: holds = cfg.scoring_func == 1; break;
      case FamilyWhen::kExperts: holds = cfg.n_routed_experts > 0; break;
      case FamilyWhen::kDense: holds = cfg.n_routed_experts == 0; break;
    }
    if (holds) return &f;
  }
  if (!model_type.empty())
    return err("model_type '", model_type, "' is not a GGUF '", arch.name,
               "' model (", names, ")");
  return err("no model family of architecture '", arch.name, "' fits this file");
}

}  // namespace kt
