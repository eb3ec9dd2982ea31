// The GGUF importer: walks the module tree of the model's Hugging Face class
// (the order of its __init__), creating one kt op per module and pointing each
// weight at its GGUF tensor. What the tree contains per architecture comes from
// arch_table; the shapes are checked by the dialect's verifiers.
#include "passes/import_gguf.h"

#include <optional>
#include <utility>

#include "dialects/KtDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "passes/arch_table.h"
#include "runtime/gguf.h"

namespace kt {
namespace {

using namespace mlir;
using ir::WeightAttr;

class Importer {
 public:
  Importer(MLIRContext& ctx, const GgufFile& file, const ArchInfo& arch, const ModelFamily& fam,
           const ModelConfig& cfg)
      : ctx_(ctx), b_(&ctx), file_(file), arch_(arch), fam_(fam), cfg_(cfg),
        file_loc_(FileLineColLoc::get(&ctx, file.path(), 0, 0)) {}

  Result<OwningOpRef<ModuleOp>> run();

 private:
  std::string child(std::string_view leaf) const {
    return path_.empty() ? std::string(leaf) : path_ + "." + std::string(leaf);
  }
  Location loc(const std::string& path) {
    return NameLoc::get(b_.getStringAttr(path), file_loc_);
  }
  bool has(Tensor t, int layer, std::string_view suffix = "weight") const {
    return file_.tensor(tensor_name(t, layer, suffix)) != nullptr;
  }

  // The tensor as a weight reference. A missing required tensor records the
  // import's error and yields a placeholder so building can go on.
  WeightAttr weight(const std::string& path, Tensor t, int layer,
                    std::string_view suffix = "weight", Use use = Use::kRequired) {
    std::string name = tensor_name(t, layer, suffix);
    const GgufTensor* g = use == Use::kNo ? nullptr : file_.tensor(name);
    if (!g) {
      if (use != Use::kRequired) return {};
      if (!error_) error_ = err(file_.path(), ": tensor '", name, "' is missing (", path, ")");
      return WeightAttr::get(&ctx_, name, "F32", {1});
    }
    return WeightAttr::get(&ctx_, name, type_name(g->type),
                           llvm::ArrayRef<int64_t>(g->ne, g->n_dims));
  }

  // Builds a composite child op and, inside its region, its children.
  template <class OpT, class Body>
  void composite(std::string_view leaf, const std::string& cls, Body&& body) {
    std::string path = child(leaf);
    auto op = OpT::create(b_, loc(path), path, cls, DictionaryAttr());
    enter(op.getChildren(), path, body);
  }
  template <class Body>
  void enter(Region& region, const std::string& path, Body&& body) {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&region.emplaceBlock());
    std::string saved = std::exchange(path_, path);
    body();
    path_ = saved;
  }

  void linear(std::string_view leaf, Tensor t, int layer, Use bias = Use::kNo) {
    std::string path = child(leaf);
    WeightAttr w = weight(path, t, layer);
    WeightAttr b = weight(path, t, layer, "bias", bias);
    ir::LinearOp::create(b_, loc(path), path, "torch.nn.Linear", w, b, DictionaryAttr());
  }
  void norm(std::string_view leaf, Tensor t, int layer, Use use = Use::kRequired) {
    std::string path = child(leaf);
    if (use == Use::kOptional && !has(t, layer)) return;
    ir::RmsNormOp::create(b_, loc(path), path, fam_.cls("RMSNorm"), weight(path, t, layer),
                          llvm::APFloat(cfg_.rms_norm_eps), DictionaryAttr());
  }
  void mlp(std::string_view leaf, Tensor gate, Tensor up, Tensor down, int layer) {
    composite<ir::MlpOp>(leaf, fam_.cls("MLP"), [&] {
      linear("gate_proj", gate, layer);
      linear("up_proj", up, layer);
      linear("down_proj", down, layer);
    });
  }
  void rotary_embedding() {
    std::string path = child("rotary_emb");
    bool yarn = !cfg_.rope_scaling_type.empty();
    int64_t dim = arch_.attention == Attention::kMla ? cfg_.qk_rope_head_dim : cfg_.head_dim;
    ir::RotaryEmbeddingOp::create(b_, loc(path), path,
                                  fam_.cls(yarn ? "YarnRotaryEmbedding" : "RotaryEmbedding"),
                                  dim, llvm::APFloat(cfg_.rope_theta), yarn_attr(),
                                  DictionaryAttr());
  }

  void mla_attention(int i);
  void gqa_attention(int i);
  void moe(int i);
  ir::YarnAttr yarn_attr();
  ir::HParamsAttr hparams();

  MLIRContext& ctx_;
  OpBuilder b_;
  const GgufFile& file_;
  const ArchInfo& arch_;
  const ModelFamily& fam_;
  const ModelConfig& cfg_;
  Location file_loc_;
  std::string path_;  // of the module whose children are being built
  std::optional<Error> error_;
};

ir::YarnAttr Importer::yarn_attr() {
  if (cfg_.rope_scaling_type.empty()) return {};
  return ir::YarnAttr::get(&ctx_, cfg_.rope_scaling_factor,
                           cfg_.rope_original_max_position_embeddings,
                           cfg_.rope_yarn_log_multiplier, cfg_.rope_beta_fast,
                           cfg_.rope_beta_slow);
}

ir::HParamsAttr Importer::hparams() {
  const ModelConfig& c = cfg_;
  return ir::HParamsAttr::get(
      &ctx_, c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
      c.num_key_value_heads, arch_.attention == Attention::kGqa ? c.head_dim : 0,
      c.intermediate_size, c.max_position_embeddings, c.rms_norm_eps, c.rope_theta, yarn_attr(),
      c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim,
      c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.n_shared_experts,
      c.shared_expert_intermediate_size, c.first_k_dense_replace, c.norm_topk_prob,
      c.routed_scaling_factor, ir::ScoringFunc(c.scoring_func), c.n_group, c.topk_group,
      c.tie_word_embeddings);
}

// DeepseekV2Attention / DeepseekV3Attention.
void Importer::mla_attention(int i) {
  composite<ir::MlaAttentionOp>("self_attn", fam_.cls("Attention"), [&] {
    if (cfg_.q_lora_rank > 0) {
      linear("q_a_proj", Tensor::kAttnQA, i);
      norm("q_a_layernorm", Tensor::kAttnQANorm, i);
      linear("q_b_proj", Tensor::kAttnQB, i);
    } else {
      linear("q_proj", Tensor::kAttnQ, i);
    }
    linear("kv_a_proj_with_mqa", Tensor::kAttnKvAMqa, i);
    norm("kv_a_layernorm", Tensor::kAttnKvANorm, i);
    // Newer llama.cpp files store kv_b_proj split per head into k_b and v_b.
    bool split = has(Tensor::kAttnKB, i) || has(Tensor::kAttnVB, i);
    if (!split || has(Tensor::kAttnKvB, i)) linear("kv_b_proj", Tensor::kAttnKvB, i);
    if (split) {
      linear("k_b_proj", Tensor::kAttnKB, i);
      linear("v_b_proj", Tensor::kAttnVB, i);
    }
    linear("o_proj", Tensor::kAttnOut, i);
    rotary_embedding();
  });
}

// LlamaAttention and its Qwen/Mixtral copies.
void Importer::gqa_attention(int i) {
  composite<ir::GqaAttentionOp>("self_attn", fam_.cls("Attention"), [&] {
    linear("q_proj", Tensor::kAttnQ, i, arch_.qkv_bias);
    linear("k_proj", Tensor::kAttnK, i, arch_.qkv_bias);
    linear("v_proj", Tensor::kAttnV, i, arch_.qkv_bias);
    linear("o_proj", Tensor::kAttnOut, i);
    if (arch_.qk_norm != Use::kNo) {
      norm("q_norm", Tensor::kAttnQNorm, i, arch_.qk_norm);
      norm("k_norm", Tensor::kAttnKNorm, i, arch_.qk_norm);
    }
    rotary_embedding();
  });
}

void Importer::moe(int i) {
  composite<ir::MoeOp>(fam_.moe_leaf, fam_.in_module(fam_.moe_class), [&] {
    std::string gate = child("gate");
    OpBuilder& b = b_;
    ir::MoeGateOp::create(
        b, loc(gate), gate, std::string(fam_.gate_class), weight(gate, Tensor::kFfnGateInp, i),
        weight(gate, Tensor::kExpProbsB, i, "bias", arch_.expert_bias),
        ir::ScoringFunc(cfg_.scoring_func), cfg_.num_experts_per_tok, cfg_.norm_topk_prob,
        llvm::APFloat(cfg_.routed_scaling_factor),
        cfg_.n_group ? b.getI64IntegerAttr(cfg_.n_group) : IntegerAttr(),
        cfg_.topk_group ? b.getI64IntegerAttr(cfg_.topk_group) : IntegerAttr(), DictionaryAttr());
    std::string experts = child("experts");
    ir::ExpertsOp::create(b, loc(experts), experts, "torch.nn.ModuleList",
                          weight(experts, Tensor::kFfnGateExps, i),
                          weight(experts, Tensor::kFfnUpExps, i),
                          weight(experts, Tensor::kFfnDownExps, i), DictionaryAttr());
    switch (arch_.shared) {
      case SharedExperts::kNone: break;
      case SharedExperts::kStacked:
        if (cfg_.n_shared_experts > 0)
          mlp("shared_experts", Tensor::kFfnGateShexp, Tensor::kFfnUpShexp, Tensor::kFfnDownShexp,
              i);
        break;
      case SharedExperts::kGated:
        mlp("shared_expert", Tensor::kFfnGateShexp, Tensor::kFfnUpShexp, Tensor::kFfnDownShexp, i);
        linear("shared_expert_gate", Tensor::kFfnGateInpShexp, i);
        break;
    }
  });
}

Result<OwningOpRef<ModuleOp>> Importer::run() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(file_loc_);
  b_.setInsertionPointToEnd(module->getBody());
  auto model = ir::ModelOp::create(b_, loc(""), "", fam_.cls("ForCausalLM"), arch_.name,
                                   hparams(), DictionaryAttr());
  enter(model.getChildren(), "", [&] {
    composite<ir::BaseModelOp>("model", fam_.cls("Model"), [&] {
      std::string embed = child("embed_tokens");
      ir::EmbeddingOp::create(b_, loc(embed), embed, "torch.nn.Embedding",
                              weight(embed, Tensor::kTokenEmbd, -1), DictionaryAttr());
      for (int i = 0; i < int(cfg_.num_hidden_layers) && !error_; ++i) {
        composite<ir::DecoderLayerOp>("layers." + std::to_string(i), fam_.cls("DecoderLayer"),
                                      [&] {
          if (arch_.attention == Attention::kMla) mla_attention(i);
          else gqa_attention(i);
          bool is_moe = cfg_.n_routed_experts > 0 && i >= cfg_.first_k_dense_replace;
          if (is_moe) moe(i);
          else mlp("mlp", Tensor::kFfnGate, Tensor::kFfnUp, Tensor::kFfnDown, i);
          norm("input_layernorm", Tensor::kAttnNorm, i);
          norm("post_attention_layernorm", Tensor::kFfnNorm, i);
        });
      }
      norm("norm", Tensor::kOutputNorm, -1);
    });
    // Tied embeddings (no output.weight): lm_head reads the embedding table.
    ir::LmHeadOp::create(
        b_, loc("lm_head"), "lm_head", "torch.nn.Linear",
        weight("lm_head", cfg_.tie_word_embeddings ? Tensor::kTokenEmbd : Tensor::kOutput, -1),
        DictionaryAttr());
  });
  if (error_) return *error_;

  std::string first_error;
  ScopedDiagnosticHandler handler(&ctx_, [&](Diagnostic& d) {
    if (first_error.empty() && d.getSeverity() == DiagnosticSeverity::Error) first_error = d.str();
    return success();
  });
  if (failed(verify(*module)))
    return err(file_.path(), ": ", first_error.empty() ? "invalid model" : first_error);
  return module;
}

}  // namespace

Result<OwningOpRef<ModuleOp>> import_gguf(MLIRContext& context, const std::string& gguf_path,
                                          const ImportOptions& options) {
  context.loadDialect<ir::KtDialect>();
  auto file = GgufFile::open(gguf_path);
  if (!file) return file.error();
  std::string_view arch_name = file->architecture();
  if (arch_name.empty()) return err(gguf_path, ": no general.architecture key");
  const ArchInfo* arch = find_arch(arch_name);
  if (!arch)
    return err(gguf_path, ": unknown architecture '", arch_name, "' (kt supports ",
               supported_archs(), ")");
  auto cfg = read_gguf_hparams(*file, *arch);
  if (!cfg) return cfg.error();
  std::string model_type;
  if (!options.config_path.empty())
    KT_TRY(apply_hf_config(options.config_path, gguf_path, *cfg, &model_type));
  KT_TRY(finish_hparams(gguf_path, *arch, *cfg));
  auto family = choose_family(*arch, *cfg, model_type);
  if (!family)
    return err(model_type.empty() ? gguf_path : options.config_path, ": ",
               family.error().message);
  return Importer(context, *file, *arch, **family, *cfg).run();
}

}  // namespace kt
