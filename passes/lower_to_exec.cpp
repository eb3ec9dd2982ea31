// kt-lower: the placed kt IR to kt_exec, the plan as IR (dialects/KtExec.td).
//
// For each phase (prefill, then decode) the model's computation is written as
// kernel calls in execution order, as llama.cpp's graph builders order them
// (src/models/llama.cpp, qwen2moe.cpp, deepseek2.cpp), so that the runtime's
// reference kernels reproduce the reference model call for call:
//
//   x = embed(tokens)
//   per layer: h = rms_norm(x); x = x + attention(h); h = rms_norm(x); x = x + ffn(h)
//   logits = lm_head(rms_norm(select_rows(x)))
//
// Every value is a new buffer (SSA) on the device of the call that writes it;
// a call runs on its op's device for the phase (generate_device for decode,
// prefill_device for prefill) and its kernel is "<device kind>.<op>".
#include <cmath>
#include <string>

#include "kernels/cpu/matmul_i8.h"
#include "passes/lowering.h"
#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "runtime/rope_config.h"

namespace kt {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "passes/Passes.h.inc"

namespace lowering {

// The child module of `m` whose path ends in `.leaf`, or null.
ModuleInterface child(ModuleInterface m, llvm::StringRef leaf) {
  for (ModuleInterface c : children(m))
    if (ir::leafName(c) == leaf) return c;
  return nullptr;
}

Value Lowering::buffer(const std::string& path, llvm::StringRef what, const std::string& device, int64_t cols,
                       llvm::StringRef type, llvm::StringRef rows) {
  std::string name = phase_->name + "." + (path.empty() ? std::string("model") : path) + "." + what.str();
  if (int64_t n = buffer_count_[name]++) name += "." + std::to_string(n);
  mlir::OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToEnd(&phase_->op.getBody().front());
  exec::BufferOp::create(b_, model_.getLoc(), name, device, type, cols, rows, mlir::IntegerAttr());
  return Value{name, device, cols, rows.str()};
}

std::string Lowering::weight(ir::WeightAttr w, const std::string& device, llvm::ArrayRef<int64_t> matrices,
                             llvm::StringRef layout) {
  std::string key = w.getName().str() + "@" + device + "/" + layout.str();
  for (int64_t m : matrices) key += "," + std::to_string(m);
  auto it = weights_.find(key);
  if (it != weights_.end()) return it->second;
  const TypeTraits* t = find_type_by_name(w.getType());
  uint64_t elems = 1;
  for (int64_t d : w.getShape()) elems *= uint64_t(d);
  if (!matrices.empty() && w.getShape().size() == 3) elems = elems / uint64_t(w.getShape()[2]) * matrices.size();
  int64_t bytes = t ? int64_t(t->row_bytes(int64_t(elems))) : 0;
  if (layout == "int8" || layout == "int4") {  // matmul_i8's blocks, per matrix
    auto shape = w.getShape();
    const int64_t n_mat = matrices.empty() ? (shape.size() > 2 ? shape[2] : 1) : int64_t(matrices.size());
    const auto bits = layout == "int4" ? kt::cpu::WeightBits::Int4 : kt::cpu::WeightBits::Int8;
    bytes = int64_t(kt::cpu::i8_matrix_bytes(shape[0], shape.size() > 1 ? shape[1] : 1, bits)) * n_mat;
  }
  const std::string sym = "w" + std::to_string(weights_.size());
  ensure_device(device);
  mlir::OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(first_phase_);
  exec::WeightOp::create(b_, model_.getLoc(), sym, w.getName(), w.getType(), b_.getDenseI64ArrayAttr(w.getShape()),
                         device, layout, bytes,
                         matrices.empty() ? mlir::DenseI64ArrayAttr() : b_.getDenseI64ArrayAttr(matrices));
  weights_[key] = sym;
  return sym;
}

void Lowering::ensure_device(const std::string& device) {
  if (devices_.count(device)) return;
  mlir::OpBuilder::InsertionGuard g(b_);
  // Devices first, in the order calls first use them.
  mlir::Operation* at = first_phase_;
  for (mlir::Operation& op : plan_.getBody().front())
    if (!llvm::isa<exec::DeviceOp>(op)) {
      at = &op;
      break;
    }
  b_.setInsertionPoint(at);
  const bool cuda = kind_of(device) == "cuda";
  int64_t index = 0;
  if (cuda) (void)llvm::StringRef(device).split(':').second.getAsInteger(10, index);  // "cuda" alone: 0
  exec::DeviceOp::create(b_, model_.getLoc(), device, kind_of(device), index, mlir::IntegerAttr(),
                         mlir::IntegerAttr(), mlir::IntegerAttr());
  devices_[device] = device;
}

int64_t Lowering::layer_of(ModuleInterface m) const {
  for (mlir::Operation* op = m; op; op = op->getParentOp())
    if (auto l = llvm::dyn_cast<ir::DecoderLayerOp>(op)) return l.getLayerIndex();
  return -1;
}

void Lowering::call(ModuleInterface m, llvm::StringRef op, const std::string& device, llvm::ArrayRef<Value> in,
                    llvm::ArrayRef<Value> out, llvm::ArrayRef<std::string> weights,
                    llvm::ArrayRef<NamedAttribute> params, const std::string& kv) {
  ensure_device(device);
  llvm::SmallVector<llvm::StringRef> ins, outs, ws;
  for (const Value& v : in) ins.push_back(v.name);
  for (const Value& v : out) outs.push_back(v.name);
  for (const std::string& w : weights) ws.push_back(w);
  mlir::OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToEnd(&phase_->op.getBody().front());
  exec::CallOp::create(b_, m->getLoc(), kernel(device, op), device, b_.getStrArrayAttr(ins), b_.getStrArrayAttr(outs),
                       b_.getStrArrayAttr(ws), kv.empty() ? mlir::StringAttr() : b_.getStringAttr(kv),
                       b_.getDictionaryAttr(params), layer_of(m), m.getPath());
}

mlir::FailureOr<Value> Lowering::linear(ModuleInterface m, const Value& x) {
  auto op = llvm::dyn_cast_or_null<ir::LinearOp>(m.getOperation());
  if (!op) return mlir::failure();
  const std::string dev = device_of(m);
  ir::WeightAttr w = op.getWeight();
  if (w.dim(0) != x.cols) return fail(m, "input has " + llvm::Twine(x.cols) + " columns, the weight expects " + llvm::Twine(w.dim(0)));
  llvm::SmallVector<std::string> ws{weight(w, dev)};
  if (auto bias = op.getBiasAttr()) ws.push_back(weight(bias, dev));
  const Value y = buffer(m.getPath().str(), "out", dev, w.dim(1));
  llvm::SmallVector<NamedAttribute> params;
  if (kind_of(dev) == "cpu") {
    amx_bf16(m, params);
    // `backend: "AMXInt8"` on a linear layer: prefill's steps (the same row
    // count as AMXBF16's) requantize W to int8 per call (cpu.matmul's
    // int8_rows); the routed experts take AMXInt8 as their repacked layout.
    // "AMXInt4" here does the same: W is read from the file each call, so
    // int4 would save no bytes, only lose accuracy (the tiles are int8's
    // either way); on the experts it is their repacked layout.
    const llvm::StringRef backend = option_str(m, "backend");
    if (backend == "AMXInt8" || backend == "AMXInt4") params.push_back(param("int8_rows", kInt8Rows));
  }
  call(m, "matmul", dev, {x}, {y}, ws, params);
  return y;
}

mlir::FailureOr<Value> Lowering::rms_norm(ModuleInterface m, const Value& x, int64_t group) {
  auto op = llvm::dyn_cast_or_null<ir::RmsNormOp>(m.getOperation());
  if (!op) return mlir::failure();
  const std::string dev = device_of(m);
  // As many rows as its input: the final norm runs on the selected output rows
  // only (it ran on every token's row, and the lm_head after it too: a 512-token
  // step's logits for one output, 5-7% of a CPU plan's prefill).
  const Value y = buffer(m.getPath().str(), "out", dev, x.cols, "F32", x.rows);
  llvm::SmallVector<NamedAttribute> params{paramf("eps", op.getEpsAttr().getValueAsDouble())};
  if (group > 0) params.push_back(param("group", group));
  call(m, "rms_norm", dev, {x}, {y}, {weight(op.getWeight(), dev)}, params);
  return y;
}

mlir::LogicalResult Lowering::lower_phase(Phase& ph) {
  phase_ = &ph;
  ModuleInterface root = model_;
  ModuleInterface base = child(root, "model");
  if (!base) return fail(root, "has no base model");
  auto embed = llvm::dyn_cast_or_null<ir::EmbeddingOp>(child(base, "embed_tokens").getOperation());
  if (!embed) return fail(base, "has no embed_tokens");
  const int64_t n_embd = hp_.getHiddenSize();
  const std::string edev = device_of(embed);
  Value x = buffer(embed.getPath().str(), "out", edev, n_embd);
  call(embed, "embed", edev, {}, {x}, {weight(embed.getWeight(), edev)}, {});

  int64_t n_layers = 0, seen = 0;
  for (ModuleInterface l : children(base)) n_layers += llvm::isa<ir::DecoderLayerOp>(l.getOperation());
  deferred_.reset();
  for (ModuleInterface l : children(base)) {
    auto layer = llvm::dyn_cast<ir::DecoderLayerOp>(l.getOperation());
    if (!layer) continue;
    last_layer_ = ++seen == n_layers;
    const int64_t il = layer.getLayerIndex();
    const std::string ldev = device_of(l), lpath = l.getPath().str();
    auto h = rms_norm(child(l, "input_layernorm"), x);
    if (mlir::failed(h)) return fail(l, "has no input_layernorm");
    ModuleInterface attn = child(l, "self_attn");
    mlir::FailureOr<Value> a = mlir::failure();
    if (attn && llvm::isa<ir::MlaAttentionOp>(attn.getOperation()))
      a = mla(attn, *h, il);
    else if (attn && llvm::isa<ir::GqaAttentionOp>(attn.getOperation()))
      a = gqa(attn, *h, il);
    else
      return fail(l, "has no self_attn");
    if (mlir::failed(a)) return mlir::failure();
    Value x1 = buffer(lpath, "residual_attn", ldev, n_embd);
    call(l, "add", ldev, {x, *a}, {x1}, {}, {});
    if (deferred_) {
      // The previous layer's deferred experts, computed by the CPU while the
      // GPU ran this attention, join the residual stream here.
      Deferred d = std::move(*deferred_);
      deferred_.reset();
      const Value yd = buffer(d.experts.getPath().str(), "out_deferred", d.device, n_embd);
      call(d.experts, "moe_experts", d.device, d.in, {yd}, d.weights, d.params);
      const Value x2 = buffer(lpath, "residual_deferred", ldev, n_embd);
      call(l, "add", ldev, {x1, yd}, {x2}, {}, {});
      x1 = x2;
    }

    auto h2 = rms_norm(child(l, "post_attention_layernorm"), x1);
    if (mlir::failed(h2)) return fail(l, "has no post_attention_layernorm");
    ModuleInterface ffn = child(l, "mlp");
    if (!ffn) ffn = child(l, "block_sparse_moe");
    mlir::FailureOr<Value> f = mlir::failure();
    if (ffn && llvm::isa<ir::MoeOp>(ffn.getOperation()))
      f = moe(ffn, *h2);
    else if (ffn && llvm::isa<ir::MlpOp>(ffn.getOperation()))
      f = mlp(ffn, *h2);
    else
      return fail(l, "has no mlp");
    if (mlir::failed(f)) return mlir::failure();
    x = buffer(lpath, "out", ldev, n_embd);
    call(l, "add", ldev, {x1, *f}, {x}, {}, {});
  }

  ModuleInterface norm = child(base, "norm");
  auto head = llvm::dyn_cast_or_null<ir::LmHeadOp>(child(root, "lm_head").getOperation());
  if (!norm || !head) return fail(root, "needs model.norm and lm_head");
  const std::string ndev = device_of(norm);
  const Value sel = buffer(norm.getPath().str(), "selected", ndev, n_embd, "F32", "outputs");
  call(norm, "select_rows", ndev, {x}, {sel}, {}, {});
  auto n = rms_norm(norm, sel);
  if (mlir::failed(n)) return mlir::failure();
  const std::string hdev = device_of(head);
  const int64_t n_vocab = head.getWeight().dim(1);
  const Value logits = buffer("lm_head", "logits", hdev, n_vocab, "F32", "outputs");
  call(head, "matmul", hdev, {*n}, {logits}, {weight(head.getWeight(), hdev)}, {});
  ph.op.setLogits(logits.name);
  return mlir::success();
}

mlir::LogicalResult Lowering::run() {
  ModuleInterface root = model_;
  if (o_.kvType != "F16" && o_.kvType != "BF16" && o_.kvType != "F32")
    return fail(root, "kv-type '" + o_.kvType + "' is not F16, BF16 or F32");
  if (o_.ctx < 1 || o_.ubatch < 1 || o_.maxBatch < 1)
    return fail(root, "ctx, ubatch and max-batch must be positive");
  if (o_.ubatchLong < 1) return fail(root, "ubatch-long must be positive");

  // The GGUF file: its size and fingerprint (a changed file is refused at
  // load), and its chat template.
  std::string ref = o_.ggufRef.empty() ? o_.gguf : o_.ggufRef;
  int64_t size = 0;
  std::string fingerprint = "0", chat_template;
  if (!o_.gguf.empty()) {
    auto g = GgufFile::open(o_.gguf);
    if (!g.ok()) return fail(root, g.error().message);
    size = int64_t(g->file_size());
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)gguf_fingerprint(*g));
    fingerprint = hex;
    chat_template = std::string(g->get_string("tokenizer.chat_template"));
  }

  llvm::SmallVector<NamedAttribute> hp{
      param("hidden_size", hp_.getHiddenSize()), param("num_hidden_layers", hp_.getNumHiddenLayers()),
      param("num_attention_heads", hp_.getNumAttentionHeads()),
      param("num_key_value_heads", hp_.getNumKeyValueHeads()), param("n_routed_experts", hp_.getNRoutedExperts()),
      param("num_experts_per_tok", hp_.getNumExpertsPerTok()), param("kv_lora_rank", hp_.getKvLoraRank())};
  llvm::SmallVector<NamedAttribute> opts{b_.getNamedAttr("kv_type", b_.getStringAttr(o_.kvType)),
                                         param("ubatch", o_.ubatch), param("max_batch", o_.maxBatch)};
  if (auto rules = llvm::dyn_cast_or_null<mlir::StringAttr>(option(root, "rules_file")))
    opts.push_back(b_.getNamedAttr("rules", rules));
  if (auto budget = option(root, "gpu_budget")) opts.push_back(b_.getNamedAttr("gpu_budget", budget));
  // kt-place-experts' profile and its prediction, which kt-exec prints beside
  // the achieved figure.
  for (llvm::StringRef k : {"routing_profile", "predicted_decode_tok_s", "predicted_decode_tok_s_without_profile",
                            "cpu_bandwidth_gbs"})
    if (auto v = option(root, k)) opts.push_back(b_.getNamedAttr(k, v));

  ModuleInterface head = child(root, "lm_head");
  auto lm = llvm::dyn_cast_or_null<ir::LmHeadOp>(head.getOperation());
  if (!lm) return fail(root, "has no lm_head");
  b_.setInsertionPoint(model_);
  plan_ = exec::PlanOp::create(b_, model_.getLoc(), model_.getArch(), lm.getWeight().dim(1),
                               hp_.getNumHiddenLayers(), o_.ctx, ref, size, fingerprint, b_.getDictionaryAttr(hp),
                               chat_template, b_.getDictionaryAttr(opts));
  plan_.getBody().emplaceBlock();
  b_.setInsertionPointToStart(&plan_.getBody().front());
  // The host is always a device: it reads the logits.
  exec::DeviceOp::create(b_, model_.getLoc(), "cpu", "cpu", 0, mlir::IntegerAttr(), mlir::IntegerAttr(),
                         mlir::IntegerAttr());
  devices_["cpu"] = "cpu";

  const int64_t stream_from = o_.streamExperts < 0 ? auto_stream_tokens() : o_.streamExperts;
  Phase prefill{"prefill", true, {}}, prefill_long{"prefill.long", true, {}, true}, decode{"decode", false, {}};
  for (Phase* ph : {&prefill, &prefill_long, &decode}) {
    // prefill.long takes over from min_tokens (at most ubatch, so every step
    // length has a phase) up to its own, longer steps.
    if (ph->streamed && (stream_from <= 0 || stream_from > o_.ubatch)) continue;
    const int64_t max_tokens = !ph->prefill ? o_.maxBatch
                               : ph->streamed ? std::max(o_.ubatch, std::min(o_.ubatchLong, o_.ctx))
                                              : o_.ubatch;
    b_.setInsertionPointToEnd(&plan_.getBody().front());
    ph->op = exec::PhaseOp::create(b_, model_.getLoc(), ph->name, max_tokens, "",
                                   ph->streamed ? b_.getI64IntegerAttr(stream_from) : mlir::IntegerAttr());
    ph->op.getBody().emplaceBlock();
    if (!first_phase_) first_phase_ = ph->op;
    if (mlir::failed(lower_phase(*ph))) return mlir::failure();
    // A plan without CPU experts under a GPU block has nothing to stream; one
    // whose routed experts all live on GPUs keeps the longer steps, which read
    // each weight once for up to --ubatch-long tokens (all-GPU V2-Lite, H200,
    // 2048-token prompt: 8.6k tok/s in 512-token steps, 10.7k in 2048; V3-5L
    // 7.3k -> 10.9k), from the first step the short phase cannot take.
    const bool resident = ph->streamed_calls == 0 && ph->gpu_expert_calls > 0 && ph->cpu_expert_calls == 0;
    if (ph->streamed && ph->streamed_calls == 0 && (!resident || max_tokens <= o_.ubatch)) {
      ph->op->erase();
      continue;
    }
    if (ph->streamed && resident && o_.streamExperts < 0) ph->op.setMinTokens(o_.ubatch + 1);
  }
  // The KV cache lives on one device: a layer whose attention runs on
  // different devices in the two phases cannot share it.
  std::map<int64_t, std::string> kv_dev;
  for (auto& [layer, sym_dev] : kvs_) kv_dev[layer] = sym_dev.second;
  bool ok = true;
  plan_.walk([&](exec::CallOp c) {
    if (!c.getKv() || !ok) return;
    const std::string dev = c.getDevice().str();
    if (dev != kv_dev[c.getLayer()]) {
      c->emitError() << c.getPath() << ": kt-lower: attention runs on " << dev << " in one phase and on "
                     << kv_dev[c.getLayer()]
                     << " in the other; its KV cache lives on one device (give prefill_device = generate_device)";
      ok = false;
    }
  });
  if (!ok) return mlir::failure();
  model_->erase();
  return mlir::success();
}

}  // namespace lowering

namespace {

class LowerToExecPass : public impl::LowerToExecBase<LowerToExecPass> {
 public:
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    llvm::SmallVector<ir::ModelOp> models;
    getOperation()->walk([&](ir::ModelOp m) { models.push_back(m); });
    if (models.size() != 1) {
      getOperation().emitError() << "kt-lower: expected one kt.model, found " << models.size();
      return signalPassFailure();
    }
    LowerToExecOptions o{gguf, ggufRef, ctx, ubatch, maxBatch, kvType, deferExperts, deferExpertsPrefill,
                         ubatchLong, streamExperts};
    lowering::Lowering l(models.front(), o);
    if (mlir::failed(l.run())) signalPassFailure();
  }
};

}  // namespace
}  // namespace kt
