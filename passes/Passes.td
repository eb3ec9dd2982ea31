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

def PlaceExperts : Pass<"kt-place-experts", "::mlir::ModuleOp"> {
  let summary = "Put the most used routed experts on the GPU, from a routing profile";
  let description = [{
    Pass 4b (issue 13), after kt-place. With a routing profile (kt-exec
    --routing-profile-out), the GPU memory kt-place left (its gpu_budget,
    less what it placed) holds single experts of the MoE layers whose
    routed experts run on the CPU while the block runs on the GPU: across
    all layers, those that save the most CPU DRAM traffic per GPU byte
    (decode share of the layer's choices; all choices when the profile has
    no decode), until the room is used. Each such experts op gets
    gpu_experts (expert ids) and gpu_expert_share (the fraction of its
    routed choices they take); kt-lower then runs them on the GPU. The
    root gets the predicted decode tok/s: cpu-bandwidth over the bytes the
    CPU still reads per token (its dense weights, plus n_used experts per
    MoE layer times the share left on the CPU); GPU time is taken as
    hidden behind it. "random:SEED" in place of a file draws a random
    profile (tests: random placements). Without a profile nothing changes.
  }];
  let options = [
    Option<"profile", "profile", "std::string", /*default=*/"\"\"", "routing profile JSON, or random:SEED">,
    Option<"gguf", "gguf", "std::string", /*default=*/"\"\"",
           "the model's GGUF: a profile recorded on another file is refused">,
    Option<"cpuBandwidth", "cpu-bandwidth", "double", /*default=*/"80.0",
           "CPU memory bandwidth in GB/s for the prediction (kt-bench's triad)">,
    Option<"splitTest", "split-test", "int64_t", /*default=*/"0",
           "tests: split every CPU experts op, a random half (seeded) held by a second CPU call">,
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

def AbsorbMla : Pass<"kt-absorb-mla", "::mlir::ModuleOp"> {
  let summary = "Choose, per phase, the absorbed or decompressed form of MLA";
  let description = [{
    Pass 3 (DESIGN.md). DeepSeek's multi-head latent attention caches only the
    compressed latent and the shared rope key per token (MLA_LATENT); kv_b
    (or its k_b / v_b halves) then either decompresses K and V for every
    cached token, or is folded into the query (K half) and the output (V
    half) so attention runs against the latents ("absorbed", DeepSeek-V2
    2.1.2). Decode is memory-bound and always gains from absorption; prefill
    of long prompts can prefer the decompressed form. Sets absorb_decode and
    absorb_prefill on every kt.mla_attention: mode "auto" absorbs decode and
    follows the rule's absorb_for_prefill kwarg, by default decompressed
    (KTransformers' default: the latents' matmul goes to tensor cores or AMX
    tiles, the attention multiplies 3.4x fewer values); "absorbed" and
    "decompressed" force both phases. It runs after kt-place.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"", "auto, absorbed or decompressed">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

def LowerToExec : Pass<"kt-lower", "::mlir::ModuleOp"> {
  let summary = "Lower the placed kt IR to kt_exec kernel calls";
  let description = [{
    Pass 8a (DESIGN.md "lower"). Replaces the kt.model with a kt_exec.plan:
    for each phase the kernel calls of the model in execution order (device
    from generate_device / prefill_device, kernel "<device>.<op>"), one SSA
    buffer per value on its producer's device, the weights each call reads,
    and the KV caches (KV per layer for GQA, MLA_LATENT for MLA). Rope and
    attention parameters are llama.cpp's (runtime/rope_config.h). The GGUF
    file fills in its size, fingerprint and chat template.
  }];
  let options = [
    Option<"gguf", "gguf", "std::string", /*default=*/"\"\"", "the GGUF file the model was imported from">,
    Option<"ggufRef", "gguf-ref", "std::string", /*default=*/"\"\"", "the path the plan records (default: gguf)">,
    Option<"ctx", "ctx", "int64_t", /*default=*/"4096", "context tokens per sequence">,
    Option<"ubatch", "ubatch", "int64_t", /*default=*/"512", "prompt tokens per prefill step">,
    Option<"maxBatch", "max-batch", "int64_t", /*default=*/"32", "tokens per decode step (all sequences)">,
    Option<"kvType", "kv-type", "std::string", /*default=*/"\"F16\"", "KV cache element type: F16, BF16 or F32">,
    Option<"deferExperts", "defer-experts", "int64_t", /*default=*/"0",
           "decode: each token's K weakest routed choices on the CPU join the residual after the next "
           "layer's attention (KTransformers' expert deferral; changes results slightly; 0: off)">,
    Option<"deferExpertsPrefill", "defer-experts-prefill", "int64_t", /*default=*/"0",
           "the same for prefill">,
    Option<"ubatchLong", "ubatch-long", "int64_t", /*default=*/"2048",
           "prompt tokens per prefill.long step (at most ctx): streamed experts cross PCIe once per step, "
           "so long steps amortize them">,
    Option<"streamExperts", "stream-experts", "int64_t", /*default=*/"0",
           "prefill steps of at least this many tokens compute the routed experts placed on the CPU on "
           "the MoE block's GPU, copying their weights over (a phase prefill.long); 0: never; -1: from "
           "the length where the copies cost less than the CPU's GEMMs (estimated from the shapes)">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect", "::kt::exec::KtExecDialect"];
}

def InsertTransfers : Pass<"kt-insert-transfers", "::mlir::ModuleOp"> {
  let summary = "Copy buffers between devices where producer and consumer differ";
  let description = [{
    Pass 6 (DESIGN.md). In each phase, a call reading a buffer that lives on
    another device reads a copy on its own device instead, made by a copy
    call inserted before it ("cuda.upload" host to GPU, "cuda.download" GPU
    to host, "cuda.peer_copy" between GPUs), once per buffer and device.
  }];
  let dependentDialects = ["::kt::exec::KtExecDialect"];
}

def FuseCalls : Pass<"kt-fuse-calls", "::mlir::ModuleOp"> {
  let summary = "Join adjacent kernel calls that one kernel does at once";
  let description = [{
    After kt-insert-transfers, before kt-plan-memory (not in DESIGN.md's
    seven: passes/README.md). In each phase, "X.add" [a, b] -> [y] followed
    by "X.rms_norm" [y] -> [h] over whole rows, on one device, becomes
    "X.add_rms_norm" [a, b] -> [y, h]: the same operations, one kernel call
    (on a GPU, one launch less in decode's chain of small kernels). Two
    "cuda.matmul" of one input and "cuda.silu_mul" of their products (read by
    nothing else) become "cuda.matmul_glu" [x] -> [h] with weights [gate, up].
    A "cuda.add_rms_norm" whose output h int8 products read gets a third
    output h.q8 (h rounded to their 8-bit blocks, param round_act), which
    those "cuda.matmul" / "cuda.matmul_glu" calls read as a second input.
    Two to four "cuda.matmul" of the same inputs over quantized weights of
    one type become "cuda.matmul_multi" (one launch), and q's "cuda.rope"
    right before "cuda.mla_cache_store" becomes "cuda.rope_mla_store",
    and that with the "cuda.mla_attention_absorbed" of its roped rows
    "cuda.mla_attention_store".
  }];
  let dependentDialects = ["::kt::exec::KtExecDialect"];
}

def PlanMemory : Pass<"kt-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Give buffers arena offsets from their lifetimes";
  let description = [{
    Pass 7 (DESIGN.md). Per phase and device, a buffer lives from the call
    that writes it to the last call that reads it (the phase's logits to the
    end); buffers whose lifetimes do not overlap share memory (first fit,
    64-byte aligned). Each device's arena is the largest phase's; devices
    also get their resident weight bytes and KV bytes per token.
  }];
  let dependentDialects = ["::kt::exec::KtExecDialect"];
}

#endif  // KT_PASSES_TD
