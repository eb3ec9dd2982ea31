// The lowering of placed kt IR to kt_exec (kt-lower, lower_to_exec.cpp), shared
// by the files that write its parts: lower_to_exec.cpp (the pass, the phases,
// buffers, weights and calls, linear layers and norms), lower_attention.cpp
// (GQA and MLA attention, rope, KV caches) and lower_ffn.cpp (MLP and MoE
// blocks, the experts' streaming threshold). Private to passes/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dialects/KtExecDialect.h"
#include "kernels/cpu/ops_ref.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"

namespace kt::lowering {

using mlir::NamedAttribute;

// backend "AMXBF16": the fewest of a step's rows an expert takes in BF16. Below
// it, decoding the weights to BF16 costs more than the tiles save (measured on
// the device's Xeon, kernels/cpu/README.md).
constexpr int64_t kBf16Rows = 32;
// backend "AMXInt8" (or "AMXInt4") on a linear layer: the fewest of a step's
// rows that requantize its weights to int8 per call (per weight, against the
// tiles' per weight and row).
constexpr int64_t kInt8Rows = 32;

// A value of the computation: a buffer of the current phase.
struct Value {
  std::string name;
  std::string device;
  int64_t cols = 0;
  std::string rows = "tokens";  // the buffer's row kind: one row per token, or per output
};

// The child module of `m` whose path ends in `.leaf`, or null.
ModuleInterface child(ModuleInterface m, llvm::StringRef leaf);

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
    // Routed-expert calls lowered in the phase on a GPU (resident) and on the
    // CPU (not streamed): prefill.long also serves a plan whose routed experts
    // all live on GPUs, whose longer steps read each weight once for more tokens.
    int64_t gpu_expert_calls = 0, cpu_expert_calls = 0;
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
  // layout "int8" / "int4": repacked by the runtime at load (KTransformers'
  // AMXInt8 / AMXInt4 experts).
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

}  // namespace kt::lowering
