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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dialects/KtExecDialect.h"
#include "kernels/cpu/matmul_i8.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"
#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "runtime/rope_config.h"

namespace kt {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "passes/Passes.h.inc"

namespace {

using mlir::NamedAttribute;

// backend "AMXBF16": the fewest of a step's rows an expert takes in BF16. Below
// it, decoding the weights to BF16 costs more than the tiles save (measured on
// the device's Xeon, kernels/cpu/README.md).
constexpr int64_t kBf16Rows = 32;
// backend "AMXInt8" on a linear layer: the fewest of a step's rows that
// requantize its weights to int8 per call (per weight, against the tiles' per
// weight and row).
constexpr int64_t kInt8Rows = 32;

// A value of the computation: a buffer of the current phase.
struct Value {
  std::string name;
  std::string device;
  int64_t cols = 0;
  std::string rows = "tokens";  // the buffer's row kind: one row per token, or per output
};

// The child module of `m` whose path ends in `.leaf`, or null.
ModuleInterface child(ModuleInterface m, llvm::StringRef leaf) {
  for (ModuleInterface c : children(m))
    if (ir::leafName(c) == leaf) return c;
  return nullptr;
}

class Lowering {
 public:
  Lowering(ir::ModelOp model, const LowerToExecOptions& o)
      : model_(model), o_(o), b_(model->getContext()), hp_(model.getHparams()) {}

  // Replaces the kt.model with a kt_exec.plan; errors name the module path.
  mlir::LogicalResult run();

 private:
  // ---- the phase being written ----
  struct Phase {
    std::string name;
    bool prefill = false;
    exec::PhaseOp op;
    // "prefill.long": routed experts placed on the CPU are computed on the MoE
    // block's GPU from host memory (cuda.moe_experts streamed=1).
    bool streamed = false;
    int64_t streamed_calls = 0;
  };

  std::string device_of(ModuleInterface m) const {
    llvm::StringRef d = option_str(m, phase_->prefill ? "prefill_device" : "generate_device");
    if (d.empty()) d = option_str(m, "generate_device");
    return d.empty() ? "cpu" : d.str();
  }
  static std::string kind_of(const std::string& device) { return device.rfind("cuda", 0) == 0 ? "cuda" : "cpu"; }
  std::string kernel(const std::string& device, llvm::StringRef op) const { return kind_of(device) + "." + op.str(); }

  Value buffer(const std::string& path, llvm::StringRef what, const std::string& device, int64_t cols,
               llvm::StringRef type = "F32", llvm::StringRef rows = "tokens");
  // `matrices`: only these slices of a 3-D weight (hot experts on a GPU).
  // layout "int8": repacked by the runtime at load (KTransformers' AMXInt8 experts).
  std::string weight(ir::WeightAttr w, const std::string& device, llvm::ArrayRef<int64_t> matrices = {},
                     llvm::StringRef layout = "gguf");
  mlir::NamedAttribute param(llvm::StringRef k, int64_t v) { return b_.getNamedAttr(k, b_.getI64IntegerAttr(v)); }
  mlir::NamedAttribute paramf(llvm::StringRef k, double v) { return b_.getNamedAttr(k, b_.getF64FloatAttr(v)); }
  // KTransformers' `backend: "AMXBF16"` on a CPU op: its steps of at least
  // bf16_rows rows (kBf16Rows, or the rule's `bf16_rows` kwarg) compute in BF16
  // (kernels/cpu/matmul_bf16.h); shorter steps, so decode, as ggml rounds.
  void amx_bf16(ModuleInterface m, llvm::SmallVector<NamedAttribute>& params) {
    if (option_str(m, "backend") != "AMXBF16") return;
    auto n = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(m, "bf16_rows"));
    params.push_back(param("bf16_rows", n ? n.getInt() : kBf16Rows));
  }
  void call(ModuleInterface m, llvm::StringRef op, const std::string& device, llvm::ArrayRef<Value> in,
            llvm::ArrayRef<Value> out, llvm::ArrayRef<std::string> weights, llvm::ArrayRef<NamedAttribute> params,
            const std::string& kv = "");
  int64_t layer_of(ModuleInterface m) const;
  void ensure_device(const std::string& device);

  // ---- the model's parts ----
  mlir::LogicalResult lower_phase(Phase& ph);
  mlir::FailureOr<Value> linear(ModuleInterface m, const Value& x);
  mlir::FailureOr<Value> rms_norm(ModuleInterface m, const Value& x, int64_t group = 0);
  mlir::FailureOr<Value> gqa(ModuleInterface attn, const Value& x, int64_t layer);
  mlir::FailureOr<Value> mla(ModuleInterface attn, const Value& x, int64_t layer);
  mlir::FailureOr<Value> mlp(ModuleInterface m, const Value& x);
  mlir::FailureOr<Value> moe(ModuleInterface m, const Value& x);
  mlir::FailureOr<cpu::ref::RopeParams> rope_of(ModuleInterface attn);
  void rope_params(const cpu::ref::RopeParams& r, llvm::SmallVectorImpl<NamedAttribute>& out);
  std::string kv_cache(ModuleInterface attn, int64_t layer, llvm::StringRef kind, int64_t heads, int64_t k_cols,
                       int64_t v_cols);
  mlir::LogicalResult fail(ModuleInterface m, const llvm::Twine& msg) {
    return m->emitError() << m.getPath() << ": kt-lower: " << msg;
  }

  ir::ModelOp model_;
  const LowerToExecOptions& o_;
  mlir::OpBuilder b_;
  ir::HParamsAttr hp_;
  exec::PlanOp plan_;
  mlir::Operation* first_phase_ = nullptr;      // devices, weights and caches go before it
  Phase* phase_ = nullptr;
  std::map<std::string, std::string> weights_;  // "tensor@device" -> sym
  std::map<std::string, std::string> devices_;  // device -> sym
  std::map<int64_t, std::pair<std::string, std::string>> kvs_;  // layer -> (sym, device)
  std::map<std::string, int64_t> buffer_count_;
  // A deferred experts call (--defer-experts), emitted after the next layer's
  // attention.
  struct Deferred {
    ModuleInterface experts;
    llvm::SmallVector<Value> in;
    std::string device;
    llvm::SmallVector<std::string> weights;
    llvm::SmallVector<NamedAttribute> params;
  };
  std::optional<Deferred> deferred_;
  bool last_layer_ = false;

  // --stream-experts auto: the prompt length from which copying a layer's
  // experts to the GPU beats computing them on the CPU.
  int64_t auto_stream_tokens();
};

// A long prefill step uses nearly every expert of a layer, so streaming costs
// the layer's expert bytes over PCIe (n_expert * bytes_e / P) whatever the
// step's length, while the CPU's cost grows with it (n * n_used * 2 * values_e
// / C flops). They meet at n = (n_expert / n_used) * (bytes per value / 2) *
// C / P. P: pinned host-to-device copies on the device machine's H100 (55.5
// GB/s measured, 50 taken); C: its 16-core Xeon's AMX expert GEMMs at short
// steps (0.91 TFLOP/s measured at 128 tokens, kernels/cpu/README.md). V2-Lite
// (64 experts, 6 used, Q4_K/Q6_K): ~70 tokens, where kt-bench e2e under
// uniform routing measured the crossover between 64 (CPU 287 tok/s, streamed
// 279) and 128 (359, 516); V3 (256, 8): ~190. Never below 32 tokens
// (llama.cpp offloads a CPU weight's product from 32 rows).
int64_t Lowering::auto_stream_tokens() {
  constexpr double kPcieBytesPerS = 50e9, kCpuFlopsPerS = 0.9e12;
  int64_t best = 0;
  model_->walk([&](ir::MoeOp m) {
    auto gate = llvm::dyn_cast_or_null<ir::MoeGateOp>(child(m, "gate").getOperation());
    auto experts = llvm::dyn_cast_or_null<ir::ExpertsOp>(child(m, "experts").getOperation());
    if (!gate || !experts || gate.getTopK() == 0) return;
    double bytes = 0, values = 0;
    for (ir::WeightAttr w : {experts.getGateProj(), experts.getUpProj(), experts.getDownProj()}) {
      const TypeTraits* t = find_type_by_name(w.getType());
      uint64_t elems = 1;
      for (int64_t d : w.getShape()) elems *= uint64_t(d);
      if (!t) return;
      bytes += double(t->row_bytes(int64_t(elems)));
      values += double(elems);
    }
    const double n_expert = double(experts.getGateProj().dim(2)), n_used = double(gate.getTopK());
    const double n = n_expert / n_used * (bytes / values / 2) * kCpuFlopsPerS / kPcieBytesPerS;
    best = std::max(best, std::max<int64_t>(32, int64_t(std::ceil(n))));
  });
  return best;
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
  if (layout == "int8") {  // matmul_i8's blocks, per matrix
    auto shape = w.getShape();
    const int64_t n_mat = matrices.empty() ? (shape.size() > 2 ? shape[2] : 1) : int64_t(matrices.size());
    bytes = int64_t(kt::cpu::i8_matrix_bytes(shape[0], shape.size() > 1 ? shape[1] : 1)) * n_mat;
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
    if (option_str(m, "backend") == "AMXInt8") params.push_back(param("int8_rows", kInt8Rows));
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

mlir::FailureOr<cpu::ref::RopeParams> Lowering::rope_of(ModuleInterface attn) {
  auto rot = llvm::dyn_cast_or_null<ir::RotaryEmbeddingOp>(child(attn, "rotary_emb").getOperation());
  if (!rot) {
    (void)fail(attn, "has no rotary_emb");
    return mlir::failure();
  }
  RopeConfigInputs in;
  in.n_dims = int(rot.getDim());
  const llvm::StringRef arch = model_.getArch();
  // llama.cpp's rope type per architecture (llama_model_rope_type).
  in.mode = (arch == "qwen2moe" || arch == "qwen3moe" || arch == "qwen2" || arch == "qwen3")
                ? cpu::ref::RopeMode::NeoX
                : cpu::ref::RopeMode::Normal;
  in.freq_base = rot.getThetaAttr().getValueAsDouble();
  in.n_ctx_orig = hp_.getMaxPositionEmbeddings();
  if (auto y = rot.getYarnAttr()) {
    in.scaling = RopeScaling::Yarn;
    in.factor = y.getFactor();
    in.n_ctx_orig = y.getOriginalMaxPositionEmbeddings();
    in.beta_fast = y.getBetaFast();
    in.beta_slow = y.getBetaSlow();
    in.yarn_log_multiplier = y.getLogMultiplier();
  }
  return rope_config(in);
}

void Lowering::rope_params(const cpu::ref::RopeParams& r, llvm::SmallVectorImpl<NamedAttribute>& out) {
  out.push_back(param("n_dims", r.n_dims));
  out.push_back(param("mode", r.mode == cpu::ref::RopeMode::NeoX ? 2 : 0));
  out.push_back(paramf("freq_base", r.freq_base));
  out.push_back(paramf("freq_scale", r.freq_scale));
  out.push_back(param("n_ctx_orig", r.n_ctx_orig));
  out.push_back(paramf("ext_factor", r.ext_factor));
  out.push_back(paramf("attn_factor", r.attn_factor));
  out.push_back(paramf("beta_fast", r.beta_fast));
  out.push_back(paramf("beta_slow", r.beta_slow));
}

std::string Lowering::kv_cache(ModuleInterface attn, int64_t layer, llvm::StringRef kind, int64_t heads,
                               int64_t k_cols, int64_t v_cols) {
  const std::string dev = device_of(attn);
  auto it = kvs_.find(layer);
  if (it != kvs_.end()) return it->second.first;
  const std::string sym = "kv" + std::to_string(layer);
  ensure_device(dev);
  mlir::OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(first_phase_);
  exec::KvCacheOp::create(b_, attn->getLoc(), sym, layer, dev, kind, heads, k_cols, v_cols, o_.kvType);
  kvs_[layer] = {sym, dev};
  return sym;
}

mlir::FailureOr<Value> Lowering::gqa(ModuleInterface attn, const Value& x, int64_t layer) {
  const int64_t n_head = hp_.getNumAttentionHeads(), n_head_kv = hp_.getNumKeyValueHeads();
  const int64_t head_dim = hp_.getHeadDim() > 0 ? hp_.getHeadDim() : hp_.getHiddenSize() / n_head;
  const std::string path = attn.getPath().str(), dev = device_of(attn);
  auto q = linear(child(attn, "q_proj"), x);
  auto k = linear(child(attn, "k_proj"), x);
  auto v = linear(child(attn, "v_proj"), x);
  if (mlir::failed(q) || mlir::failed(k) || mlir::failed(v)) return fail(attn, "needs q_proj, k_proj and v_proj");
  // Qwen3's per-head RMSNorm of q and k, before rope.
  if (ModuleInterface qn = child(attn, "q_norm")) {
    q = rms_norm(qn, *q, head_dim);
    k = rms_norm(child(attn, "k_norm"), *k, head_dim);
    if (mlir::failed(q) || mlir::failed(k)) return fail(attn, "q_norm needs k_norm");
  }
  auto rope = rope_of(attn);
  if (mlir::failed(rope)) return mlir::failure();
  llvm::SmallVector<NamedAttribute> pq, pk;
  rope_params(*rope, pq);
  rope_params(*rope, pk);
  pq.append({param("n_heads", n_head), param("head_dim", head_dim), param("offset", 0)});
  pk.append({param("n_heads", n_head_kv), param("head_dim", head_dim), param("offset", 0)});
  const Value qr = buffer(path, "q_roped", dev, q->cols), kr = buffer(path, "k_roped", dev, k->cols);
  call(attn, "rope", dev, {*q}, {qr}, {}, pq);
  call(attn, "rope", dev, {*k}, {kr}, {}, pk);
  const std::string kv = kv_cache(attn, layer, "kv", n_head_kv, n_head_kv * head_dim, n_head_kv * head_dim);
  call(attn, "kv_store", dev, {kr, *v}, {}, {}, {}, kv);
  const Value o = buffer(path, "attn", dev, n_head * head_dim);
  call(attn, "attention", dev, {qr}, {o}, {},
       {param("n_heads", n_head), param("n_kv_heads", n_head_kv), param("head_dim_k", head_dim),
        param("head_dim_v", head_dim), paramf("kq_scale", 1.0 / std::sqrt(double(head_dim)))},
       kv);
  return linear(child(attn, "o_proj"), o);
}

mlir::FailureOr<Value> Lowering::mla(ModuleInterface attn, const Value& x, int64_t layer) {
  const int64_t H = hp_.getNumAttentionHeads(), dn = hp_.getQkNopeHeadDim(), dr = hp_.getQkRopeHeadDim(),
                dv = hp_.getVHeadDim(), r = hp_.getKvLoraRank();
  const std::string path = attn.getPath().str(), dev = device_of(attn);
  mlir::FailureOr<Value> q = mlir::failure();
  if (ModuleInterface qa = child(attn, "q_a_proj")) {
    auto a = linear(qa, x);
    if (mlir::succeeded(a)) a = rms_norm(child(attn, "q_a_layernorm"), *a);
    if (mlir::succeeded(a)) q = linear(child(attn, "q_b_proj"), *a);
  } else {
    q = linear(child(attn, "q_proj"), x);
  }
  auto kv_a = linear(child(attn, "kv_a_proj_with_mqa"), x);
  auto norm = llvm::dyn_cast_or_null<ir::RmsNormOp>(child(attn, "kv_a_layernorm").getOperation());
  if (mlir::failed(q) || mlir::failed(kv_a) || !norm) return fail(attn, "is missing a projection or kv_a_layernorm");
  auto rope = rope_of(attn);
  if (mlir::failed(rope)) return mlir::failure();

  // Rope on the last d_rope values of each query head.
  llvm::SmallVector<NamedAttribute> pq;
  rope_params(*rope, pq);
  pq.append({param("n_heads", H), param("head_dim", dn + dr), param("offset", dn)});
  const Value qr = buffer(path, "q_roped", dev, q->cols);
  call(attn, "rope", dev, {*q}, {qr}, {}, pq);

  const std::string kv = kv_cache(attn, layer, "mla_latent", 1, r, dr);
  llvm::SmallVector<NamedAttribute> pc{paramf("eps", norm.getEpsAttr().getValueAsDouble())};
  rope_params(*rope, pc);
  call(attn, "mla_cache_store", dev, {*kv_a}, {}, {weight(norm.getWeight(), dev)}, pc, kv);

  const bool absorbed = option_bool(attn, phase_->prefill ? "absorb_prefill" : "absorb_decode");
  // Files with both forms (llama.cpp's newer conversions keep kv_b beside
  // k_b + v_b): the absorbed form takes k_b + v_b, as llama.cpp's absorbed MLA
  // does with such files (the same quantized weights, so the same rounding),
  // the decompressed form kv_b. Speed is alike since q_abs over kv_b splits
  // its rows (cuda_mla.cu): all-GPU decode 184 vs 188 tok/s (V2-Lite), 344
  // vs 333 (V3-5L), kv_b vs k_b + v_b, on an H200.
  llvm::SmallVector<std::string> ws;
  auto kv_b = llvm::dyn_cast_or_null<ir::LinearOp>(child(attn, "kv_b_proj").getOperation());
  auto k_b = llvm::dyn_cast_or_null<ir::LinearOp>(child(attn, "k_b_proj").getOperation());
  auto v_b = llvm::dyn_cast_or_null<ir::LinearOp>(child(attn, "v_b_proj").getOperation());
  if (kv_b && !(absorbed && k_b && v_b)) {
    ws.push_back(weight(kv_b.getWeight(), dev));
  } else {
    if (!k_b || !v_b) return fail(attn, "has neither kv_b_proj nor k_b_proj + v_b_proj");
    ws.push_back(weight(k_b.getWeight(), dev));
    ws.push_back(weight(v_b.getWeight(), dev));
  }
  // DeepSeek's YaRN mscale goes into the softmax scale (rope_config.h).
  double log_mul = 0;
  if (auto rot = llvm::dyn_cast_or_null<ir::RotaryEmbeddingOp>(child(attn, "rotary_emb").getOperation()))
    if (auto y = rot.getYarnAttr()) log_mul = y.getLogMultiplier();
  const Value o = buffer(path, "attn", dev, H * dv);
  call(attn, absorbed ? "mla_attention_absorbed" : "mla_attention", dev, {qr}, {o}, ws,
       {param("n_heads", H), param("d_nope", dn), param("d_rope", dr), param("d_v", dv), param("kv_lora_rank", r),
        paramf("kq_scale", deepseek2_kq_scale(*rope, log_mul, dn + dr))},
       kv);
  return linear(child(attn, "o_proj"), o);
}

mlir::FailureOr<Value> Lowering::mlp(ModuleInterface m, const Value& x) {
  auto g = linear(child(m, "gate_proj"), x);
  auto u = linear(child(m, "up_proj"), x);
  if (mlir::failed(g) || mlir::failed(u)) return fail(m, "needs gate_proj, up_proj and down_proj");
  const std::string dev = device_of(m);
  const Value a = buffer(m.getPath().str(), "act", dev, g->cols);
  call(m, "silu_mul", dev, {*g, *u}, {a}, {}, {});
  auto d = linear(child(m, "down_proj"), a);
  if (mlir::failed(d)) return fail(m, "needs down_proj");
  return d;
}

mlir::FailureOr<Value> Lowering::moe(ModuleInterface m, const Value& x) {
  auto gate = llvm::dyn_cast_or_null<ir::MoeGateOp>(child(m, "gate").getOperation());
  auto experts = llvm::dyn_cast_or_null<ir::ExpertsOp>(child(m, "experts").getOperation());
  if (!gate || !experts) return fail(m, "needs a gate and experts");
  const std::string path = m.getPath().str();
  const int64_t n_used = int64_t(gate.getTopK());

  const std::string gdev = device_of(gate);
  llvm::SmallVector<std::string> gw{weight(gate.getWeight(), gdev)};
  if (auto bias = gate.getEScoreCorrectionBiasAttr()) gw.push_back(weight(bias, gdev));
  const Value ids = buffer(gate.getPath().str(), "ids", gdev, n_used, "I32");
  const Value wts = buffer(gate.getPath().str(), "weights", gdev, n_used);
  const int64_t n_group = gate.getNGroup().value_or(1), topk_group = gate.getTopkGroup().value_or(1);
  call(gate, "moe_gate", gdev, {x}, {ids, wts}, gw,
       {param("n_used", n_used), param("gating", gate.getScoringFunc() == ir::ScoringFunc::sigmoid ? 2 : 1),
        param("n_group", n_group > 0 ? n_group : 1), param("topk_group", topk_group > 0 ? topk_group : 1),
        param("norm", gate.getNormTopkProb() ? 1 : 0),
        paramf("scale", gate.getRoutedScalingFactorAttr().getValueAsDouble())});

  // The shared expert first: on a hybrid plan the GPU computes it while the
  // CPU runs the routed experts (the runtime overlaps them).
  ModuleInterface shared = child(m, "shared_experts");
  if (!shared) shared = child(m, "shared_expert");
  mlir::FailureOr<Value> s = mlir::failure();
  if (shared) {
    s = mlp(shared, x);
    if (mlir::failed(s)) return mlir::failure();
  }

  const std::string edev = device_of(experts), dev = device_of(m);
  const std::string epath = experts.getPath().str();
  const int64_t n_expert = experts.getGateProj().dim(2);
  // KTransformers' `backend: "AMXInt8"`: the CPU's experts repacked to int8 at
  // load (kernels/cpu/matmul_i8.h); a streamed call (the GPU reading them from
  // host memory) takes the file's bytes.
  const bool int8 = option_str(experts, "backend") == "AMXInt8" && kind_of(edev) == "cpu";
  auto cpu_weights = [&](bool streamed = false) {
    const llvm::StringRef layout = int8 && !streamed ? "int8" : "gguf";
    return llvm::SmallVector<std::string>{weight(experts.getGateProj(), edev, {}, layout),
                                          weight(experts.getUpProj(), edev, {}, layout),
                                          weight(experts.getDownProj(), edev, {}, layout)};
  };
  auto slots = [&](llvm::ArrayRef<int64_t> v) { return b_.getNamedAttr("expert_slots", b_.getDenseI64ArrayAttr(v)); };
  // Expert deferral (--defer-experts K): the CPU computes each token's
  // n_used - K strongest choices now and its K weakest after the next layer's
  // attention, which the GPU runs meanwhile (the sum joins the residual
  // there). Not for the last layer (nothing follows to overlap).
  const int64_t defer = phase_->prefill ? o_.deferExpertsPrefill : o_.deferExperts;
  // prefill.long: the CPU's experts computed on the block's GPU, their weights
  // copied from host memory for each step.
  const bool streaming = phase_->streamed && kind_of(edev) == "cpu" && kind_of(dev) == "cuda";
  const bool deferring = defer > 0 && defer < n_used && kind_of(edev) == "cpu" && !last_layer_ && !streaming;
  auto cpu_call = [&](const Value& out, llvm::SmallVector<NamedAttribute> params) {
    if (!streaming) amx_bf16(experts, params);
    if (streaming) {
      params.push_back(param("streamed", 1));
      ++phase_->streamed_calls;
      call(experts, "moe_experts", dev, {x, ids, wts}, {out}, cpu_weights(true), params);
      return;
    }
    if (deferring) {
      Deferred d{experts, {x, ids, wts}, edev, cpu_weights(), params};
      d.params.push_back(b_.getNamedAttr("choices", b_.getDenseI64ArrayAttr({n_used - defer, n_used})));
      deferred_ = std::move(d);
      params.push_back(b_.getNamedAttr("choices", b_.getDenseI64ArrayAttr({0, n_used - defer})));
    }
    call(experts, "moe_experts", edev, {x, ids, wts}, {out}, cpu_weights(), params);
  };
  Value y;
  auto hot = llvm::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(option(experts, "gpu_experts"));
  // The hot experts' device: the block's GPU, or the one kt-place-experts'
  // split-test names (the CPU: the split checked without a GPU).
  llvm::StringRef hot_dev_opt = option_str(experts, "hot_device");
  const std::string hdev = hot_dev_opt.empty() ? dev : hot_dev_opt.str();
  if (hot && !hot.empty() && kind_of(edev) == "cpu" && (kind_of(hdev) == "cuda" || !hot_dev_opt.empty())) {
    // Hot experts (kt-place-experts, from a routing profile) live on the MoE
    // block's GPU: the GPU computes their share first, asynchronously, while
    // the CPU computes the rest from the whole tensor; the block adds the two.
    // expert_slots maps a router id to a slice of the call's weights (-1:
    // the other device's).
    llvm::SmallVector<int64_t> gpu_slots(size_t(n_expert), -1), cpu_slots(size_t(n_expert), 0);
    for (int64_t e = 0; e < n_expert; ++e) cpu_slots[size_t(e)] = e;
    for (auto [i, e] : llvm::enumerate(hot.asArrayRef())) {
      if (e < 0 || e >= n_expert) return fail(experts, "gpu_experts names expert " + llvm::Twine(e) + " of " + llvm::Twine(n_expert));
      gpu_slots[size_t(e)] = int64_t(i);
      cpu_slots[size_t(e)] = -1;
    }
    const Value yg = buffer(epath, "out_gpu", hdev, x.cols);
    call(experts, "moe_experts", hdev, {x, ids, wts}, {yg},
         {weight(experts.getGateProj(), hdev, hot.asArrayRef()), weight(experts.getUpProj(), hdev, hot.asArrayRef()),
          weight(experts.getDownProj(), hdev, hot.asArrayRef())},
         {slots(gpu_slots)});
    if (int64_t(hot.size()) == n_expert) {
      y = yg;  // every expert of the layer is hot: nothing left for the CPU
    } else {
      const Value yc = buffer(epath, "out_cpu", streaming ? dev : edev, x.cols);
      cpu_call(yc, {slots(cpu_slots)});
      y = buffer(epath, "out", dev, x.cols);
      call(experts, "add", dev, {yg, yc}, {y}, {}, {});
    }
  } else {
    y = buffer(epath, "out", streaming ? dev : edev, x.cols);
    cpu_call(y, {});
  }
  if (!shared) return y;

  const Value out = buffer(path, "out", dev, x.cols);
  if (ModuleInterface sg = child(m, "shared_expert_gate")) {
    // Qwen2-MoE: the shared expert scaled by sigmoid(x . w_gate).
    auto g = linear(sg, x);
    if (mlir::failed(g)) return mlir::failure();
    call(m, "sigmoid_gate_add", dev, {y, *s, *g}, {out}, {}, {});
  } else {
    call(m, "add", dev, {y, *s}, {out}, {}, {});
  }
  return out;
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
    // A plan without CPU experts under a GPU block has nothing to stream.
    if (ph->streamed && ph->streamed_calls == 0) ph->op->erase();
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
    Lowering l(models.front(), o);
    if (mlir::failed(l.run())) signalPassFailure();
  }
};

}  // namespace
}  // namespace kt
