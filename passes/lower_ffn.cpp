// kt-lower's feed-forward blocks (passes/lowering.h): dense MLPs and MoE
// blocks (router, routed experts on their device, shared experts), and the
// prompt length from which a long prefill streams a layer's experts to the GPU.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/matmul_i8.h"
#include "passes/lowering.h"
#include "runtime/gguf.h"
#include "runtime/plan_loader.h"

namespace kt::lowering {

using mlir::NamedAttribute;

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
  // KTransformers' `backend: "AMXInt8"` / "AMXInt4": the CPU's experts
  // repacked to int8 / int4 at load (kernels/cpu/matmul_i8.h); a streamed call
  // (the GPU reading them from host memory) takes the file's bytes.
  const llvm::StringRef backend = option_str(experts, "backend");
  const llvm::StringRef repacked = kind_of(edev) != "cpu" ? ""
                                   : backend == "AMXInt8" ? "int8"
                                   : backend == "AMXInt4" ? "int4"
                                                          : "";
  auto cpu_weights = [&](bool streamed = false) {
    const llvm::StringRef layout = !repacked.empty() && !streamed ? repacked : "gguf";
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
    if (!streaming) {
      ++(kind_of(edev) == "cuda" ? phase_->gpu_expert_calls : phase_->cpu_expert_calls);
      amx_bf16(experts, params);
    }
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

}  // namespace kt::lowering
