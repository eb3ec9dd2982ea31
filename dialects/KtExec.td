// kt_exec: the execution dialect, what the kt IR lowers to before it is
// written as a plan (runtime/plan.fbs mirrors it one to one). A kt_exec.plan
// holds the devices, the weights (GGUF tensor references placed on a device),
// the KV caches, and one kt_exec.phase per phase (prefill, decode) holding its
// activation buffers and its kernel calls in execution order. Calls name
// buffers, weights and caches by their sym_name: the lowering writes them in
// SSA style (each buffer written by one call), insert-transfers adds copies
// between devices, plan-memory gives every buffer its arena offset.
#ifndef KT_EXEC_TD
#define KT_EXEC_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"

def KtExec_Dialect : Dialect {
  let name = "kt_exec";
  let cppNamespace = "::kt::exec";
  let summary = "Kernel calls over named buffers per device: the plan as IR";
  let usePropertiesForAttributes = 0;
}

class KtExec_Op<string mnemonic, list<Trait> traits = []>
    : Op<KtExec_Dialect, mnemonic, traits>;

def KtExec_PlanOp : KtExec_Op<"plan", [NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "a whole plan: the model, its GGUF file, devices, weights, caches, phases";
  let arguments = (ins StrAttr:$arch, I64Attr:$n_vocab, I64Attr:$n_layer, I64Attr:$n_ctx,
                       StrAttr:$gguf, I64Attr:$gguf_size, StrAttr:$gguf_fingerprint,
                       DictionaryAttr:$hparams, StrAttr:$chat_template, DictionaryAttr:$options);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$arch `gguf` $gguf attr-dict-with-keyword $body";
}

def KtExec_DeviceOp : KtExec_Op<"device"> {
  let summary = "a device: cpu or cuda:N, with its arena and resident bytes";
  let arguments = (ins StrAttr:$sym_name, StrAttr:$kind, I64Attr:$index,
                       OptionalAttr<I64Attr>:$arena_bytes, OptionalAttr<I64Attr>:$weight_bytes,
                       OptionalAttr<I64Attr>:$kv_bytes_per_token);
  let assemblyFormat = "$sym_name attr-dict";
}

def KtExec_WeightOp : KtExec_Op<"weight"> {
  let summary = "a GGUF tensor bound on a device";
  let description = [{
    `matrices`: the device holds only these slices of a 3-D tensor (routed
    experts placed from a routing profile), in this order; absent: all.
    `bytes` counts what the device holds.
  }];
  let arguments = (ins StrAttr:$sym_name, StrAttr:$tensor, StrAttr:$type, DenseI64ArrayAttr:$shape,
                       StrAttr:$device, StrAttr:$layout, I64Attr:$bytes,
                       OptionalAttr<DenseI64ArrayAttr>:$matrices);
  let assemblyFormat = "$sym_name $tensor `:` $type $shape `on` $device (`matrices` $matrices^)? attr-dict";
}

def KtExec_KvCacheOp : KtExec_Op<"kv_cache"> {
  let summary = "one layer's KV cache: per token k_cols + v_cols elements";
  let arguments = (ins StrAttr:$sym_name, I64Attr:$layer, StrAttr:$device, StrAttr:$kind,
                       I64Attr:$n_kv_heads, I64Attr:$k_cols, I64Attr:$v_cols, StrAttr:$type);
  let assemblyFormat = "$sym_name `layer` $layer $kind `on` $device attr-dict";
}

def KtExec_PhaseOp : KtExec_Op<"phase", [NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "a phase (prefill or decode): buffers and calls in order";
  let description = [{
    "prefill", "decode", or a variant of prefill ("prefill.long") that runs
    the steps of at least min_tokens tokens (runtime/plan.fbs).
  }];
  let arguments = (ins StrAttr:$sym_name, I64Attr:$max_tokens, StrAttr:$logits,
                       OptionalAttr<I64Attr>:$min_tokens);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name (`min_tokens` $min_tokens^)? `max_tokens` $max_tokens `logits` $logits attr-dict-with-keyword $body
  }];
}

def KtExec_BufferOp : KtExec_Op<"buffer"> {
  let summary = "an activation buffer: rows (tokens or outputs) of `cols` elements";
  let arguments = (ins StrAttr:$sym_name, StrAttr:$device, StrAttr:$type, I64Attr:$cols,
                       StrAttr:$rows, OptionalAttr<I64Attr>:$offset);
  let assemblyFormat = "$sym_name `on` $device `:` $type `x` $cols `per` $rows (`at` $offset^)? attr-dict";
}

def KtExec_CallOp : KtExec_Op<"call"> {
  let summary = "a kernel call over buffers, weights and a KV cache";
  let arguments = (ins StrAttr:$kernel, StrAttr:$device, StrArrayAttr:$inputs, StrArrayAttr:$outputs,
                       StrArrayAttr:$weights, OptionalAttr<StrAttr>:$kv, DictionaryAttr:$params,
                       I64Attr:$layer, StrAttr:$path);
  let assemblyFormat = [{
    $kernel `on` $device $inputs `->` $outputs `weights` $weights (`kv` $kv^)? `params` $params
    `layer` $layer `path` $path attr-dict
  }];
}

#endif  // KT_EXEC_TD
