// kt's passes (DESIGN.md "Passes"), each testable alone in kt-opt.
#ifndef KT_PASSES_TD
#define KT_PASSES_TD

include "mlir/Pass/PassBase.td"

def ImportGguf : Pass<"kt-import-gguf", "::mlir::ModuleOp"> {
  let summary = "Import a GGUF model into the module as a kt.model";
  let description = [{
    Pass 1 of the pipeline, for kt-opt: appends the kt IR of a GGUF file
    (and optionally a Hugging Face config.json) to the module, as
    `kt-compile model.gguf --emit=mlir` prints it.
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"\"\"", "GGUF model file">,
    Option<"config", "config", "std::string", /*default=*/"\"\"",
           "Hugging Face config.json (keys the GGUF lacks; must agree otherwise)">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

def ApplyRules : Pass<"kt-apply-rules", "::mlir::ModuleOp"> {
  let summary = "Apply a KTransformers optimize-rule file to the kt.model";
  let description = [{
    Pass 2 (DESIGN.md "Rules"). Walks the module tree pre-order from kt.model
    ""; for each op the first rule whose name (re.search over the path) and
    class (isinstance, through the alias table's bases) hold decides it, and
    its decision goes into the op's `options`: rule ("file:line:col"),
    replace, kt_op, generate_device / prefill_device / out_device ("cpu",
    "cuda:N"), generate_op / prefill_op (kt kernel families) and the other
    kwargs. Children of a `recursive: False` rule follow their parent
    (decided_by = "parent"). Unknown or unsupported names, devices beyond
    `gpus`, bad regexes and malformed YAML fail naming file:line:col.
  }];
  let options = [
    Option<"rules", "rules", "std::string", /*default=*/"\"\"", "KTransformers rule file (YAML)">,
    Option<"gpus", "gpus", "int", /*default=*/"1", "GPUs of the machine (cuda:0 .. cuda:gpus-1)">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

def Place : Pass<"kt-place", "::mlir::ModuleOp"> {
  let summary = "Place the ops no rule placed, by arithmetic intensity";
  let description = [{
    Pass 4 (DESIGN.md "place"). Every op with weights gets weight_bytes,
    flops_per_token, intensity_decode and intensity_prefill (FLOPs per byte of
    weights moved at decode batch 1 and over prefill-len tokens). Ops no rule
    placed go, highest prefill intensity first, onto the GPU while the budget
    holds them (gpu-mem per GPU times gpus, minus the KV cache for ctx tokens
    and an activation reserve), the rest onto the CPU; routed experts, whose
    tokens are shared among n_experts, are the lowest and land on the CPU
    first, and lookups (the embedding) never take GPU memory. Weightless
    composites run with their children, rope with its attention. A
    rule-forced placement beyond the budget fails naming the rule.
  }];
  let options = [
    Option<"gpuMem", "gpu-mem", "std::string", /*default=*/"\"24GiB\"",
           "GPU memory per GPU: bytes, or with B, KiB, MiB, GiB, MB, GB">,
    Option<"gpus", "gpus", "int", /*default=*/"1", "GPUs of the machine">,
    Option<"prefillLen", "prefill-len", "int64_t", /*default=*/"512",
           "prompt tokens per prefill, for the prefill intensity">,
    Option<"ctx", "ctx", "int64_t", /*default=*/"4096", "context tokens the KV cache holds">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

def SplitLayers : Pass<"kt-split-layers", "::mlir::ModuleOp"> {
  let summary = "Give each decoder layer's GPU ops the layer's GPU";
  let description = [{
    Pass 5 (DESIGN.md). KTransformers' transfer_map (layer index -> device:
    that layer and the ones after it run there) from any op's options or,
    without one and with gpus > 1, a split of the decoder layers across the
    GPUs balancing their GPU weight bytes (written back as transfer_map on
    the base model). Ops placed on a GPU without an explicit index ("cuda",
    or by kt-place) move to their layer's GPU.
  }];
  let options = [
    Option<"gpus", "gpus", "int", /*default=*/"1", "GPUs of the machine">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

#endif  // KT_PASSES_TD
