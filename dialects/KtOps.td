// kt ops: one per kind of Hugging Face module. Leaves hold weights and
// attributes; composites hold their children in one region (single block, no
// terminator) in the order the HF __init__ creates them. Verifiers check every
// weight's shape against the enclosing kt.model's hyper-parameters.
#ifndef KT_OPS_TD
#define KT_OPS_TD

include "dialects/KtAttrs.td"
include "mlir/IR/OpBase.td"

// Attributes common to all modules, around the op's own.
class Kt_ModuleOp<string mnemonic, dag extraArgs, list<Trait> traits = []>
    : Kt_Op<mnemonic, traits # [Kt_ModuleInterface]> {
  let arguments = !con((ins StrAttr:$path, StrAttr:$hf_class), extraArgs,
                       (ins OptionalAttr<DictionaryAttr>:$options));
}

class Kt_CompositeOp<string mnemonic, dag extraArgs = (ins),
                     string extraFormat = "">
    : Kt_ModuleOp<mnemonic, extraArgs, [NoTerminator, SingleBlock, NoRegionArguments]> {
  let regions = (region MaxSizedRegion<1>:$children);
  let assemblyFormat = "$path `class` $hf_class " # extraFormat #
                       " (`options` $options^)? attr-dict-with-keyword $children";
  let hasRegionVerifier = 1;
}

class Kt_LeafOp<string mnemonic, dag extraArgs, string extraFormat>
    : Kt_ModuleOp<mnemonic, extraArgs> {
  let assemblyFormat = "$path `class` $hf_class " # extraFormat #
                       " (`options` $options^)? attr-dict";
}

//===--- composites ----------------------------------------------------===//

def Kt_ModelOp : Kt_CompositeOp<"model",
    (ins StrAttr:$arch, Kt_HParamsAttr:$hparams),
    "`arch` $arch `hparams` $hparams"> {
  let summary = "the whole model (XForCausalLM): base model and lm_head";
  let description = [{
    The root module (path ""), holding every hyper-parameter. `arch` is the
    GGUF architecture the model was imported from.
  }];
  let hasVerifier = 1;
}

def Kt_BaseModelOp : Kt_CompositeOp<"base_model"> {
  let summary = "XModel: embed_tokens, layers.0 .. layers.N-1, norm";
}

def Kt_DecoderLayerOp : Kt_CompositeOp<"decoder_layer"> {
  let summary = "one transformer block: norms, self_attn, mlp or MoE";
  let extraClassDeclaration = [{
    // The N of "....layers.N" (-1 when the path does not end that way).
    int64_t getLayerIndex();
  }];
}

def Kt_MlaAttentionOp : Kt_CompositeOp<"mla_attention"> {
  let summary = "DeepSeek multi-head latent attention (q-LoRA optional)";
  let description = [{
    Children: q_proj, or q_a_proj + q_a_layernorm + q_b_proj (q-LoRA);
    kv_a_proj_with_mqa, kv_a_layernorm; kv_b_proj, or its per-head halves
    k_b_proj [nope, kv_lora_rank, heads] and v_b_proj [kv_lora_rank, v, heads]
    as newer GGUF files store them; o_proj; rotary_emb.
  }];
}

def Kt_GqaAttentionOp : Kt_CompositeOp<"gqa_attention"> {
  let summary = "grouped-query attention (q/k/v bias and q/k norm optional)";
  let description = [{
    Children: q_proj, k_proj, v_proj (each with an optional bias), o_proj,
    optional q_norm and k_norm (per-head RMSNorm, Qwen3), rotary_emb.
  }];
}

def Kt_MlpOp : Kt_CompositeOp<"mlp"> {
  let summary = "gated MLP: down_proj(silu(gate_proj(x)) * up_proj(x))";
}

def Kt_MoeOp : Kt_CompositeOp<"moe"> {
  let summary = "mixture of experts: gate, experts, shared expert(s)";
  let description = [{
    Children: gate (kt.moe_gate), experts (kt.experts), optionally the shared
    experts as a kt.mlp (shared_experts for DeepSeek, shared_expert for
    Qwen2-MoE) and shared_expert_gate, a kt.linear whose sigmoid scales the
    shared expert's output (Qwen2-MoE).
  }];
}

//===--- leaves --------------------------------------------------------===//

def Kt_EmbeddingOp : Kt_LeafOp<"embedding", (ins Kt_WeightAttr:$weight),
                               "`weight` $weight"> {
  let summary = "token embedding table [hidden, vocab]";
}

def Kt_LinearOp : Kt_LeafOp<"linear",
    (ins Kt_WeightAttr:$weight, OptionalAttr<Kt_WeightAttr>:$bias),
    "`weight` $weight (`bias` $bias^)?"> {
  let summary = "y = x W^T (+ b); weight [in, out], or [in] when out is 1, "
                "or [in, out, heads] for per-head projections";
  let hasVerifier = 1;
}

def Kt_RmsNormOp : Kt_LeafOp<"rms_norm",
    (ins Kt_WeightAttr:$weight, F64Attr:$eps), "`eps` custom<ShortFloat>($eps) `weight` $weight"> {
  let summary = "RMSNorm with a learned scale [dim]";
  let hasVerifier = 1;
}

def Kt_RotaryEmbeddingOp : Kt_LeafOp<"rotary_embedding",
    (ins I64Attr:$dim, F64Attr:$theta, OptionalAttr<Kt_YarnAttr>:$yarn),
    "`dim` $dim `theta` custom<ShortFloat>($theta) (`yarn` $yarn^)?"> {
  let summary = "rotary position embedding, plain or YaRN (DeepSeek mscale)";
  let hasVerifier = 1;
}

def Kt_MoeGateOp : Kt_LeafOp<"moe_gate",
    (ins Kt_WeightAttr:$weight, OptionalAttr<Kt_WeightAttr>:$e_score_correction_bias,
         Kt_ScoringFuncAttr:$scoring_func, I64Attr:$top_k, BoolAttr:$norm_topk_prob,
         F64Attr:$routed_scaling_factor, OptionalAttr<I64Attr>:$n_group,
         OptionalAttr<I64Attr>:$topk_group),
    "`scoring_func` custom<ScoringFunc>($scoring_func) `top_k` $top_k "
    "`norm_topk_prob` $norm_topk_prob "
    "`routed_scaling_factor` custom<ShortFloat>($routed_scaling_factor) (`n_group` $n_group^)? "
    "(`topk_group` $topk_group^)? `weight` $weight "
    "(`e_score_correction_bias` $e_score_correction_bias^)?"> {
  let summary = "MoE router: scores = f(x W^T), top-k (group-limited) selection";
  let description = [{
    f is softmax or sigmoid. With sigmoid (DeepSeek-V3) the selection uses
    scores + e_score_correction_bias but the weights use the scores alone; with
    norm_topk_prob the selected weights are renormalised to sum 1; then they
    are multiplied by routed_scaling_factor.
  }];
  let hasVerifier = 1;
}

def Kt_ExpertsOp : Kt_LeafOp<"experts",
    (ins Kt_WeightAttr:$gate_proj, Kt_WeightAttr:$up_proj, Kt_WeightAttr:$down_proj),
    "`gate_proj` $gate_proj `up_proj` $up_proj `down_proj` $down_proj"> {
  let summary = "routed experts, each a gated MLP; weights [in, out, n_expert]";
  let hasVerifier = 1;
}

def Kt_LmHeadOp : Kt_LeafOp<"lm_head", (ins Kt_WeightAttr:$weight),
                            "`weight` $weight"> {
  let summary = "output projection to vocabulary logits, weight [hidden, vocab]";
}

#endif  // KT_OPS_TD
