// Attributes of the kt dialect: weight references, rope scaling and the model's
// hyper-parameters (named as in Hugging Face config.json, so they read like it).
#ifndef KT_ATTRS_TD
#define KT_ATTRS_TD

include "dialects/KtDialect.td"
include "mlir/IR/EnumAttr.td"

// Router scoring, numbered like llama.cpp's `expert_gating_func`.
def Kt_ScoringFunc : I32EnumAttr<"ScoringFunc", "MoE router scoring function", [
    I32EnumAttrCase<"softmax", 1>, I32EnumAttrCase<"sigmoid", 2>]> {
  let cppNamespace = "::kt::ir";
  let genSpecializedAttr = 0;
}
def Kt_ScoringFuncAttr : EnumAttr<Kt_Dialect, Kt_ScoringFunc, "scoring_func"> {
  let assemblyFormat = "$value";
}

class Kt_Attr<string name, string attrMnemonic> : AttrDef<Kt_Dialect, name> {
  let mnemonic = attrMnemonic;
}

// MLIR's float literals need a '.', and HF-style values (0.0707, 1e-06) should
// print as written: these parameters print the shortest round-trip form.
class Kt_F64Param<string default> : AttrOrTypeParameter<"::kt::ir::F64", "a float"> {
  let comparator = "double($_lhs) == double($_rhs)";
  let parser = "::kt::ir::parseF64Param($_parser)";
  let printer = "::kt::ir::printF64Param($_printer, $_self)";
  let defaultValue = default;
}
class Kt_BoolParam<string default> : AttrOrTypeParameter<"bool", "true or false"> {
  let parser = "::kt::ir::parseBoolParam($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
  let defaultValue = default;
}
// 0 means "not present" (no q-LoRA, no shared experts, ...), as in llama.cpp.
def Kt_IntParam : DefaultValuedParameter<"int64_t", "0">;
def Kt_ScoringParam : EnumParameter<Kt_ScoringFunc> {
  let defaultValue = "::kt::ir::ScoringFunc::softmax";
}

// A reference to one tensor of the GGUF file: its name, ggml type and shape in
// ggml order (first dimension fastest: a Linear's weight is [in, out], routed
// experts are [in, out, n_expert]). Never the data.
def Kt_WeightAttr : Kt_Attr<"Weight", "weight"> {
  let summary = "a GGUF tensor reference: name, ggml type, ggml-order shape";
  let parameters = (ins StringRefParameter<"GGUF tensor name">:$name,
                        StringRefParameter<"ggml type name (Q4_K, F32, ...)">:$type,
                        ArrayRefParameter<"int64_t", "shape, fastest first">:$shape);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t dim(unsigned i) const { return i < getShape().size() ? getShape()[i] : 1; }
    unsigned rank() const { return getShape().size(); }
  }];
}

// YaRN context extension as DeepSeek uses it. log_multiplier is llama.cpp's
// `rope.scaling.yarn_log_multiplier`, i.e. 0.1 * HF's mscale_all_dim: the
// attention softmax scale is multiplied by (1 + log_multiplier * ln(factor))^2.
def Kt_YarnAttr : Kt_Attr<"Yarn", "yarn"> {
  let summary = "YaRN rope scaling parameters";
  let parameters = (ins Kt_F64Param<"">:$factor,
                        "int64_t":$original_max_position_embeddings,
                        Kt_F64Param<"0.0">:$log_multiplier,
                        Kt_F64Param<"32.0">:$beta_fast,
                        Kt_F64Param<"1.0">:$beta_slow);
  let assemblyFormat = "`<` struct(params) `>`";
}

// Every hyper-parameter of the model, named as in Hugging Face config.json.
// Integer parameters left at 0 are absent (e.g. q_lora_rank = 0: no q-LoRA).
def Kt_HParamsAttr : Kt_Attr<"HParams", "hparams"> {
  let summary = "model hyper-parameters (Hugging Face config names)";
  let parameters = (ins
    "int64_t":$vocab_size,
    "int64_t":$hidden_size,
    "int64_t":$num_hidden_layers,
    "int64_t":$num_attention_heads,
    "int64_t":$num_key_value_heads,
    Kt_IntParam:$head_dim,
    Kt_IntParam:$intermediate_size,
    Kt_IntParam:$max_position_embeddings,
    Kt_F64Param<"">:$rms_norm_eps,
    Kt_F64Param<"">:$rope_theta,
    OptionalParameter<"::kt::ir::YarnAttr">:$rope_scaling,
    // Multi-head latent attention (DeepSeek).
    Kt_IntParam:$q_lora_rank,
    Kt_IntParam:$kv_lora_rank,
    Kt_IntParam:$qk_nope_head_dim,
    Kt_IntParam:$qk_rope_head_dim,
    Kt_IntParam:$v_head_dim,
    // Mixture of experts.
    Kt_IntParam:$n_routed_experts,
    Kt_IntParam:$num_experts_per_tok,
    Kt_IntParam:$moe_intermediate_size,
    Kt_IntParam:$n_shared_experts,
    Kt_IntParam:$shared_expert_intermediate_size,
    Kt_IntParam:$first_k_dense_replace,
    Kt_BoolParam<"false">:$norm_topk_prob,
    Kt_F64Param<"1.0">:$routed_scaling_factor,
    Kt_ScoringParam:$scoring_func,
    Kt_IntParam:$n_group,
    Kt_IntParam:$topk_group,
    Kt_BoolParam<"false">:$tie_word_embeddings);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    bool isMla() const { return getKvLoraRank() > 0; }
    bool isMoeLayer(int64_t layer) const {
      return getNRoutedExperts() > 0 && layer >= getFirstKDenseReplace();
    }
    // Width of the shared experts' MLP (0: none): DeepSeek stacks
    // n_shared_experts experts of moe_intermediate_size, Qwen2-MoE gives it.
    int64_t sharedIntermediateSize() const {
      return getSharedExpertIntermediateSize() > 0
                 ? getSharedExpertIntermediateSize()
                 : getNSharedExperts() * getMoeIntermediateSize();
    }
  }];
}

#endif  // KT_ATTRS_TD
