// The architecture table of the GGUF importer, in the style of llama.cpp's
// llama-arch: which tensor names, metadata keys and module classes each
// supported architecture has, as data. Adding a model family is adding rows.
// Plain C++ (no MLIR): the importer turns the result into kt IR.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "runtime/gguf.h"
#include "runtime/result.h"

namespace kt {

// The model's hyper-parameters while importing, named as in Hugging Face
// config.json (the kt.model op's #kt.hparams uses the same names). Integers
// left at 0 are absent (q_lora_rank = 0: no q-LoRA).
struct ModelConfig {
  int64_t vocab_size = 0, hidden_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;
  int64_t intermediate_size = 0, max_position_embeddings = 0;
  double rms_norm_eps = 0, rope_theta = 0;
  std::string rope_scaling_type;  // "" / "none" or "yarn"
  double rope_scaling_factor = 0;
  int64_t rope_original_max_position_embeddings = 0;
  double rope_yarn_log_multiplier = 0;  // llama.cpp's; 0.1 * HF mscale_all_dim
  double rope_beta_fast = 32, rope_beta_slow = 1;
  int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t n_routed_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
  int64_t n_shared_experts = 0, shared_expert_intermediate_size = 0;
  int64_t first_k_dense_replace = 0;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1;
  int64_t scoring_func = 0;  // llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid
  int64_t n_group = 0, topk_group = 0;
  bool tie_word_embeddings = false;
  // GGUF values that only feed derived ones (never in config.json).
  int64_t gguf_rope_dim = 0, gguf_key_length = 0, gguf_value_length = 0;
  int64_t gguf_key_length_mla = 0, gguf_value_length_mla = 0;

  // Names (as in kHParams) whose value came from the GGUF file, directly or
  // derived; config.json must agree with these and may supply the others.
  std::set<std::string, std::less<>> from_gguf;
  bool known(std::string_view name) const { return from_gguf.count(name) > 0; }
};

using ConfigField = std::variant<int64_t ModelConfig::*, double ModelConfig::*,
                                 bool ModelConfig::*, std::string ModelConfig::*>;

// One hyper-parameter: where GGUF keeps it and where config.json does.
struct HParamKey {
  std::string_view name;      // ModelConfig / kt IR name
  std::string_view gguf_key;  // after "<arch>."; "" when GGUF has no such key
  // config.json keys, '|'-separated alternatives, '.' for nesting
  // ("rope_scaling.factor"); "" when config.json has no such key.
  std::string_view hf_keys;
  ConfigField field;
  double hf_scale = 1;  // config value * hf_scale = ours (mscale_all_dim -> log multiplier)
};
std::span<const HParamKey> hparam_keys();

// GGUF tensor names (llama.cpp's LLM_TENSOR_NAMES), "%d" for the layer.
enum class Tensor {
  kTokenEmbd, kOutputNorm, kOutput,
  kAttnNorm, kAttnQ, kAttnK, kAttnV, kAttnOut, kAttnQNorm, kAttnKNorm,
  kAttnQA, kAttnQANorm, kAttnQB, kAttnKvAMqa, kAttnKvANorm, kAttnKvB, kAttnKB, kAttnVB,
  kFfnNorm, kFfnGate, kFfnUp, kFfnDown,
  kFfnGateInp, kExpProbsB, kFfnGateExps, kFfnUpExps, kFfnDownExps,
  kFfnGateShexp, kFfnUpShexp, kFfnDownShexp, kFfnGateInpShexp,
};
// "blk.3.attn_q.bias" for (kAttnQ, 3, "bias").
std::string tensor_name(Tensor t, int layer = -1, std::string_view suffix = "weight");

enum class Use : uint8_t { kNo, kOptional, kRequired };
enum class Attention : uint8_t { kMla, kGqa };
// How the shared experts appear: DeepSeek stacks n_shared_experts experts into
// `shared_experts`; Qwen2-MoE has one `shared_expert` scaled by
// sigmoid(shared_expert_gate(x)).
enum class SharedExperts : uint8_t { kNone, kStacked, kGated };
// When a family is the one an architecture's file belongs to (without a
// config.json saying so): GGUF names the architecture, not the model family.
enum class FamilyWhen : uint8_t { kAlways, kSigmoidRouting, kSoftmaxRouting, kExperts, kDense };

// The Python classes of one model family, as KTransformers' rule files name
// them: module + "." + prefix + "RMSNorm" etc.
struct ModelFamily {
  std::string_view hf_model_type;  // config.json "model_type"
  std::string_view module;         // "ktransformers.models.modeling_deepseek_v3"
  std::string_view prefix;         // "DeepseekV3"
  std::string_view moe_class;      // "DeepseekV3MoE" (in module)
  std::string_view gate_class;     // router class, fully qualified
  std::string_view moe_leaf;       // "mlp" or "block_sparse_moe"
  FamilyWhen when;
  std::string cls(std::string_view suffix) const;  // module.prefix+suffix
  std::string in_module(std::string_view name) const;  // module.name
};

struct ArchInfo {
  std::string_view name;  // GGUF general.architecture
  Attention attention;
  Use qkv_bias;         // GQA q/k/v biases
  Use qk_norm;          // GQA per-head q/k RMSNorm (Qwen3)
  Use expert_bias;      // router e_score_correction_bias (exp_probs_b)
  SharedExperts shared;
  bool norm_topk_prob;  // default when neither file nor config says
  std::span<const std::string_view> required;  // hyper-parameters that must be known
  std::span<const ModelFamily> families;
};

const ArchInfo* find_arch(std::string_view gguf_arch);
std::string supported_archs();  // "deepseek2, qwen2moe, ..."

// The hyper-parameters the GGUF file states (and those derived from them).
Result<ModelConfig> read_gguf_hparams(const GgufFile& file, const ArchInfo& arch);
// Merges a Hugging Face config.json: keys the GGUF lacks are taken, keys both
// give must agree. Sets *model_type to its "model_type" ("" when absent).
Status apply_hf_config(const std::string& path, const std::string& gguf_path,
                       ModelConfig& cfg, std::string* model_type);
// Defaults, derived values and checks once all sources are in.
Status finish_hparams(const std::string& gguf_path, const ArchInfo& arch, ModelConfig& cfg);
// The model family (class names) of the file: config.json's model_type when
// given, else the first family of the architecture whose `when` holds.
Result<const ModelFamily*> choose_family(const ArchInfo& arch, const ModelConfig& cfg,
                                         std::string_view model_type);

}  // namespace kt
