// kt-place: devices for the ops no rule placed, by arithmetic intensity
// (DESIGN.md "place"). A GPU pays off where many FLOPs come per byte of weights
// it holds: at prefill a dense weight serves all L prompt tokens (2*L FLOPs per
// element) while a routed expert serves only top_k/n_experts of them. So the
// ops go onto the GPU highest prefill intensity first while its memory holds
// them, and the routed experts — what KTransformers' rule files send to the CPU
// by hand — are the first to stay on the CPU. Rule-placed ops keep their
// devices, but every op with weights gets its numbers (--explain shows them),
// and the rules' own GPU bytes must fit: overflowing is an error at the rule.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"
#include "passes/op_cost.h"
#include "passes/rules/placement_math.h"

namespace kt {
#define GEN_PASS_DEF_PLACE
#include "passes/Passes.h.inc"

namespace {

using rules::format_bytes;

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The kernel family an op runs when no rule named one: what KTransformers'
// operators default to (KTransformersExperts: KExpertsCPU on the CPU), as the
// alias table names kernel families.
std::string default_kernel(llvm::StringRef kind, llvm::StringRef device) {
  if (kind == "experts") return device.starts_with("cuda") ? "experts_gpu" : "experts_cpu";
  if (kind == "lm_head") return "linear";
  return kind.str();
}

struct Weighted {
  ModuleInterface op;
  rules::OpCost cost;
};

class Placer {
 public:
  Placer(mlir::MLIRContext* ctx, uint64_t gpu_mem, int gpus, int64_t prefill_len, int64_t ctx_tokens)
      : b_(ctx), gpu_mem_(gpu_mem), gpus_(gpus), prefill_len_(prefill_len), ctx_(ctx_tokens) {}

  Status place(ModuleInterface root) {
    budget(ir::findModelHParams(root));
    // For --explain: what the GPU had for weights.
    set_options(root, {b_.getNamedAttr("gpu_budget", b_.getI64IntegerAttr(int64_t(per_gpu_))),
                       b_.getNamedAttr("gpu_budget_note", b_.getStringAttr(budget_note_))});
    std::vector<Weighted> weighted;
    KT_TRY(measure(root, weighted));
    KT_TRY(check_rule_bytes(weighted));
    place_weighted(weighted);
    place_composites(root);
    walk_modules(root, [&](ModuleInterface m) { finish(m); });
    return ok_status();
  }

 private:
  // GPU memory per GPU left for weights: gpu-mem minus this GPU's share of the
  // KV cache for ctx tokens and one prefill's activations.
  void budget(ir::HParamsAttr hp) {
    const rules::ModelDims dims = model_dims(hp);
    kv_ = rules::kv_cache_bytes(dims, ctx_);
    act_ = rules::activation_bytes(dims, prefill_len_);
    const uint64_t reserve = kv_ / uint64_t(gpus_) + act_;
    per_gpu_ = gpu_mem_ > reserve ? gpu_mem_ - reserve : 0;
    budget_note_ = "gpu-mem " + format_bytes(gpu_mem_) + " minus " + format_bytes(kv_ / uint64_t(gpus_)) +
                   " KV cache for " + std::to_string(ctx_) + " tokens and " + format_bytes(act_) + " of activations";
  }

  Status measure(ModuleInterface root, std::vector<Weighted>& out) {
    Status st = ok_status();
    walk_modules(root, [&](ModuleInterface m) {
      if (!st) return;
      auto in = cost_inputs(m, prefill_len_);
      if (!in) return void(st = in.error());
      if (!in.value()) return;
      const rules::OpCost c = rules::op_cost(*in.value());
      set_options(m, {b_.getNamedAttr("weight_bytes", b_.getI64IntegerAttr(int64_t(c.weight_bytes))),
                      b_.getNamedAttr("flops_per_token", b_.getI64IntegerAttr(int64_t(c.flops_per_token))),
                      b_.getNamedAttr("intensity_decode", b_.getF64FloatAttr(c.intensity_decode)),
                      b_.getNamedAttr("intensity_prefill", b_.getF64FloatAttr(c.intensity_prefill))});
      out.push_back({m, c});
    });
    return st;
  }

  // The rule (or, for a child of a recursive: False module, its owner's rule)
  // that put an op where it is.
  std::string rule_of(ModuleInterface m) {
    for (ModuleInterface p = m; p; p = parent_module(p))
      if (llvm::StringRef r = option_str(p, "rule"); !r.empty()) return r.str();
    return "rules";
  }

  // Weights stay resident where they run at decode (the generate device); a
  // different prefill device streams them per prompt, as KTransformers' experts
  // with prefill on cuda do, and holds no copy.
  Status check_rule_bytes(std::vector<Weighted>& weighted) {
    used_.assign(size_t(gpus_), 0);
    for (Weighted& w : weighted) {
      auto dev = rules::parse_device(option_str(w.op, "generate_device").str());
      if (!dev || !dev->gpu) continue;
      uint64_t& used = used_[size_t(std::min(dev->index, gpus_ - 1))];
      used += w.cost.weight_bytes;
      if (used > per_gpu_)
        return err(rule_of(w.op), ": rule puts ", w.op.getPath().str(), " (", format_bytes(w.cost.weight_bytes),
                   ") on ", dev->str(), ", where the rules need ", used, " bytes (", format_bytes(used), ") but ", per_gpu_,
                   " bytes (", format_bytes(per_gpu_), ") are available (", budget_note_, ")");
    }
    return ok_status();
  }

  // Highest prefill intensity first (ties in model order: stable sort), each
  // op onto the GPU if it fits in what is left; one that does not fit leaves
  // the room to the smaller ops after it.
  void place_weighted(std::vector<Weighted>& weighted) {
    std::vector<Weighted*> todo;
    for (Weighted& w : weighted)
      if (!placed(w.op)) todo.push_back(&w);
    std::stable_sort(todo.begin(), todo.end(), [](const Weighted* a, const Weighted* b) {
      if (a->cost.intensity_prefill != b->cost.intensity_prefill) return a->cost.intensity_prefill > b->cost.intensity_prefill;
      return a->cost.intensity_decode > b->cost.intensity_decode;
    });
    uint64_t left = 0;
    for (uint64_t u : used_) left += per_gpu_ > u ? per_gpu_ - u : 0;
    const uint64_t total = per_gpu_ * uint64_t(gpus_);
    for (Weighted* w : todo) {
      const std::string why = "intensity " + fmt("%.1f", w->cost.intensity_prefill) + " FLOP/B at prefill: " +
                              format_bytes(w->cost.weight_bytes);
      std::string reason;
      // A lookup (the embedding) does no arithmetic: a GPU copy would only take
      // memory, which is why KTransformers' files keep embed_tokens on the CPU.
      const bool arithmetic = w->cost.intensity_prefill > 0;
      const bool gpu = arithmetic && w->cost.weight_bytes <= left && total > 0;
      if (gpu) {
        reason = why + " fits in the " + format_bytes(left) + " left of " + format_bytes(total) + " on the GPU";
        left -= w->cost.weight_bytes;
      } else if (!arithmetic) {
        reason = "no arithmetic (one row per token): nothing to gain on the GPU";
      } else if (gpu_mem_ == 0) {
        reason = why + ", gpu-mem 0: all on the CPU";
      } else if (total == 0) {
        reason = why + ", no GPU memory left for weights (" + budget_note_ + ")";
      } else {
        reason = why + " does not fit in the " + format_bytes(left) + " left of " + format_bytes(total) + " on the GPU";
      }
      // Every GPU op starts on cuda:0; split-layers moves it to its layer's GPU.
      decide(w->op, gpu ? "cuda:0" : "cpu", reason);
    }
  }

  // Weightless composites run where their children's GPU work is (the
  // attention core next to its projections, an MoE's combine next to its
  // shared experts), on the CPU when all of it is there.
  void place_composites(ModuleInterface m) {
    llvm::SmallVector<ModuleInterface> kids = children(m);
    for (ModuleInterface c : kids) place_composites(c);
    if (kids.empty() || placed(m) || following(m)) return;
    std::string device = "cpu";
    for (ModuleInterface c : kids)
      if (on_gpu(c)) {
        device = option_str(c, "generate_device").str();
        break;
      }
    decide(m, device, "no weights of its own: runs with its children's " + std::string(device == "cpu" ? "CPU" : "GPU") + " work");
  }

  // Leaves without weights (rope) run with their parent; children of a
  // recursive: False module take their owner's devices; every op gets an
  // out_device and every op with weights its kernels.
  void finish(ModuleInterface m) {
    ModuleInterface parent = parent_module(m);
    if (following(m) && !placed(m))
      if (ModuleInterface owner = owner_of(m))
        for (llvm::StringRef key : kDeviceKeys)
          if (mlir::Attribute d = option(owner, key)) set_option(m, key, d);
    if (!placed(m)) {
      const std::string device = parent && placed(parent) ? option_str(parent, "generate_device").str() : "cpu";
      decide(m, device, "no weights: runs with " + (parent ? parent.getPath().str() : std::string("the model")));
    }
    if (!option(m, "out_device")) {
      // Routed experts hand their sum to the MoE block, on the GPU when the
      // block is there (KTransformers' out_device: "cuda").
      mlir::Attribute out = option(m, "generate_device");
      if (op_kind(m) == "experts" && parent && option_str(m, "placed_by") == "place") out = option(parent, "generate_device");
      set_option(m, "out_device", out);
    }
    if (option(m, "weight_bytes")) {
      if (!option(m, "generate_op")) set_option(m, "generate_op", default_kernel(op_kind(m), option_str(m, "generate_device")));
      if (!option(m, "prefill_op")) set_option(m, "prefill_op", default_kernel(op_kind(m), option_str(m, "prefill_device")));
    }
  }

  ModuleInterface owner_of(ModuleInterface m) {
    for (ModuleInterface p = parent_module(m); p; p = parent_module(p))
      if (!following(p)) return p;
    return {};
  }

  static bool placed(ModuleInterface m) { return bool(option(m, "generate_device")); }
  static bool following(ModuleInterface m) { return option_str(m, "decided_by") == "parent"; }

  void decide(ModuleInterface m, const std::string& device, const std::string& reason) {
    mlir::Attribute d = b_.getStringAttr(device);
    set_options(m, {b_.getNamedAttr("generate_device", d), b_.getNamedAttr("prefill_device", d),
                    b_.getNamedAttr("placed_by", b_.getStringAttr("place")),
                    b_.getNamedAttr("reason", b_.getStringAttr(reason))});
  }

  mlir::Builder b_;
  uint64_t gpu_mem_;
  int gpus_;
  int64_t prefill_len_, ctx_;
  uint64_t kv_ = 0, act_ = 0, per_gpu_ = 0;
  std::string budget_note_;
  std::vector<uint64_t> used_;
};

struct PlacePass : impl::PlaceBase<PlacePass> {
  using PlaceBase::PlaceBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    Status st = run(module);
    if (!st) {
      module.emitError(st.error().message);
      signalPassFailure();
    }
  }

  Status run(mlir::ModuleOp module) {
    auto mem = rules::parse_size(gpuMem);
    if (!mem) return err("kt-place: gpu-mem: ", mem.error().message);
    if (gpus < 1) return err("kt-place: gpus must be at least 1");
    if (prefillLen < 1 || ctx < 0) return err("kt-place: prefill-len must be positive and ctx not negative");
    for (mlir::Operation& op : module.getBody()->getOperations())
      if (auto root = llvm::dyn_cast<ModuleInterface>(&op)) {
        Placer placer(module.getContext(), mem.value(), gpus, prefillLen, ctx);
        KT_TRY(placer.place(root));
      }
    return ok_status();
  }
};

}  // namespace
}  // namespace kt
