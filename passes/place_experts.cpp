// kt-place-experts: hot routed experts onto the GPU, from a routing profile
// (Passes.td). What a compiler can do that a rule file cannot: a rule places
// whole modules by name, this places single experts by how often the model
// really uses them, across all layers, into exactly the GPU memory kt-place
// left over.
//
// Per GPU byte, an expert on the GPU saves the CPU reading it whenever a token
// chooses it: (decode) share of its layer's choices x n_used x its bytes per
// token, for its bytes of GPU memory. Experts of a layer have equal bytes and
// layers nearly so, so the order is by share x n_used (expected reads per
// token), greedily filling the room: the knapsack's greedy is optimal up to
// one expert here.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/random_blocks.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"
#include "passes/rules/placement_math.h"
#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "runtime/routing_profile.h"

namespace kt {
#define GEN_PASS_DEF_PLACEEXPERTS
#include "passes/Passes.h.inc"

namespace {

using rules::format_bytes;

int64_t option_int(ModuleInterface m, llvm::StringRef key) {
  auto i = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(m, key));
  return i ? i.getInt() : 0;
}

int64_t layer_of(mlir::Operation* op) {
  for (; op; op = op->getParentOp())
    if (auto l = llvm::dyn_cast<ir::DecoderLayerOp>(op)) return l.getLayerIndex();
  return -1;
}

// A random profile for tests: every expert of every MoE layer gets a count
// drawn uniformly, so each seed gives another placement.
RoutingProfile random_profile(uint64_t seed, const std::vector<std::pair<int, int64_t>>& layers, int64_t n_used) {
  SplitMix64 rng(seed ? seed : 1);
  RoutingProfile p;
  for (auto [layer, n_expert] : layers) {
    RoutingProfile::Layer l;
    l.layer = layer;
    l.n_expert = n_expert;
    l.n_used = n_used;
    l.prefill.assign(size_t(n_expert), 0);
    l.decode.resize(size_t(n_expert));
    for (uint64_t& c : l.decode) c = 1 + uint64_t(rng.uniform() * 1000.0);
    p.layers.push_back(std::move(l));
  }
  return p;
}

struct Candidate {
  ir::ExpertsOp op;
  int layer;
  int64_t expert;
  double reads_per_token;  // share x n_used: expected reads of this expert per token
  uint64_t bytes;
};

class ExpertPlacer {
 public:
  ExpertPlacer(mlir::MLIRContext* ctx, const PlaceExpertsOptions& o) : b_(ctx), o_(o) {}

  Status run(ModuleInterface root) {
    if (o_.splitTest > 0) return split_test(root);
    if (o_.profile.empty()) return ok_status();
    if (o_.cpuBandwidth <= 0) return err("kt-place-experts: cpu-bandwidth must be positive");
    auto hp = ir::findModelHParams(root);
    const int64_t n_used = hp ? int64_t(hp.getNumExpertsPerTok()) : 0;
    if (n_used <= 0) return err("kt-place-experts: the model has no routed experts for a routing profile");

    // The candidates: experts on the CPU inside an MoE block on a GPU.
    std::vector<ir::ExpertsOp> eligible;
    std::vector<std::pair<int, int64_t>> layers;
    uint64_t gpu_used = 0;
    walk_modules(root, [&](ModuleInterface m) {
      if (on_gpu(m) && option(m, "weight_bytes")) gpu_used += uint64_t(option_int(m, "weight_bytes"));
      auto ex = llvm::dyn_cast<ir::ExpertsOp>(m.getOperation());
      if (!ex || on_gpu(m)) return;
      ModuleInterface block = parent_module(m);
      if (!block || !on_gpu(block)) return;
      eligible.push_back(ex);
      layers.push_back({int(layer_of(ex)), ex.getGateProj().dim(2)});
    });

    RoutingProfile profile;
    KT_TRY(load(layers, n_used, profile));
    std::map<int, const RoutingProfile::Layer*> by_layer;
    for (const RoutingProfile::Layer& l : profile.layers) by_layer[l.layer] = &l;

    auto budget = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(root, "gpu_budget"));
    const uint64_t per_gpu = budget ? uint64_t(budget.getInt()) : 0;
    uint64_t room = per_gpu > gpu_used ? per_gpu - gpu_used : 0;
    const uint64_t room_total = room;

    // Every eligible expert with its expected reads per token.
    std::vector<Candidate> cands;
    std::map<mlir::Operation*, double> layer_share;  // placed share per experts op
    for (ir::ExpertsOp ex : eligible) {
      const int layer = int(layer_of(ex));
      const int64_t n_expert = ex.getGateProj().dim(2);
      auto it = by_layer.find(layer);
      if (it == by_layer.end()) continue;  // a layer the profile did not see stays on the CPU
      const RoutingProfile::Layer& pl = *it->second;
      if (pl.n_expert != n_expert)
        return err("kt-place-experts: ", o_.profile, ": layer ", layer, " has ", pl.n_expert,
                   " experts in the profile, the model has ", n_expert);
      uint64_t decode_total = 0;
      for (uint64_t c : pl.decode) decode_total += c;
      const uint64_t bytes = uint64_t(option_int(ex, "weight_bytes")) / uint64_t(n_expert);
      for (int64_t e = 0; e < n_expert; ++e)
        cands.push_back({ex, layer, e, profile.share(pl, e, decode_total > 0) * double(n_used), bytes});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return a.reads_per_token > b.reads_per_token;
    });
    std::map<mlir::Operation*, std::vector<int64_t>> chosen;
    for (const Candidate& c : cands) {
      if (c.bytes > room || c.reads_per_token <= 0) continue;
      room -= c.bytes;
      chosen[c.op].push_back(c.expert);
      layer_share[c.op] += c.reads_per_token / double(n_used);
    }

    // Record the decisions, and the prediction with and without them.
    double cpu_bytes = 0, cpu_bytes_without = 0;
    walk_modules(root, [&](ModuleInterface m) {
      if (on_gpu(m) || !option(m, "weight_bytes")) return;
      const double w = double(option_int(m, "weight_bytes"));
      if (auto ex = llvm::dyn_cast<ir::ExpertsOp>(m.getOperation())) {
        const double per_token = w / double(ex.getGateProj().dim(2)) * double(n_used);
        cpu_bytes += per_token * (1.0 - layer_share[ex]);
        cpu_bytes_without += per_token;
      } else if (op_kind(m) != "embedding") {
        cpu_bytes += w;  // a dense op on the CPU reads all its weights per token
        cpu_bytes_without += w;
      }
    });
    uint64_t placed_bytes = 0;
    for (auto& [op, ids] : chosen) {
      std::sort(ids.begin(), ids.end());
      auto ex = llvm::cast<ir::ExpertsOp>(op);
      placed_bytes += uint64_t(option_int(ex, "weight_bytes")) / uint64_t(ex.getGateProj().dim(2)) * ids.size();
      char share[32];
      std::snprintf(share, sizeof share, "%.1f%%", 100.0 * layer_share[op]);
      set_options(ex, {b_.getNamedAttr("gpu_experts", b_.getDenseI64ArrayAttr(ids)),
                       b_.getNamedAttr("gpu_expert_share", b_.getF64FloatAttr(layer_share[op])),
                       b_.getNamedAttr("reason", b_.getStringAttr(
                                                     option_str(ex, "reason").str() + "; " + std::to_string(ids.size()) +
                                                     " hot experts on the GPU take " + share + " of its routed choices "
                                                     "(kt-place-experts)"))});
    }
    const double bw = o_.cpuBandwidth * 1e9;
    std::vector<mlir::NamedAttribute> opts{
        b_.getNamedAttr("routing_profile", b_.getStringAttr(o_.profile)),
        b_.getNamedAttr("cpu_bandwidth_gbs", b_.getF64FloatAttr(o_.cpuBandwidth)),
        b_.getNamedAttr("gpu_experts_bytes", b_.getI64IntegerAttr(int64_t(placed_bytes))),
        b_.getNamedAttr("gpu_experts_room", b_.getI64IntegerAttr(int64_t(room_total)))};
    if (cpu_bytes > 0) opts.push_back(b_.getNamedAttr("predicted_decode_tok_s", b_.getF64FloatAttr(bw / cpu_bytes)));
    if (cpu_bytes_without > 0)
      opts.push_back(b_.getNamedAttr("predicted_decode_tok_s_without_profile", b_.getF64FloatAttr(bw / cpu_bytes_without)));
    set_options(root, opts);
    return ok_status();
  }

 private:
  // split-test=SEED: every CPU experts op gets a random half of its experts as
  // "hot", held by a second CPU call (hot_device = cpu): the whole split (a
  // weight of selected matrices, expert_slots on both calls, the add) runs
  // and is checked against llama.cpp on a machine without a GPU.
  Status split_test(ModuleInterface root) {
    SplitMix64 rng(uint64_t(o_.splitTest));
    walk_modules(root, [&](ModuleInterface m) {
      auto ex = llvm::dyn_cast<ir::ExpertsOp>(m.getOperation());
      if (!ex || on_gpu(m)) return;
      std::vector<int64_t> ids;
      for (int64_t e = 0; e < ex.getGateProj().dim(2); ++e)
        if (rng.uniform() < 0.5) ids.push_back(e);
      if (ids.empty()) ids.push_back(0);
      set_options(ex, {b_.getNamedAttr("gpu_experts", b_.getDenseI64ArrayAttr(ids)),
                       b_.getNamedAttr("hot_device", b_.getStringAttr("cpu"))});
    });
    return ok_status();
  }

  Status load(const std::vector<std::pair<int, int64_t>>& layers, int64_t n_used, RoutingProfile& out) {
    llvm::StringRef spec = o_.profile;
    if (spec.starts_with("random:")) {
      uint64_t seed = 0;
      if (spec.drop_front(7).getAsInteger(10, seed))
        return err("kt-place-experts: profile '", o_.profile, "': expected random:SEED with a decimal seed");
      out = random_profile(seed, layers, n_used);
      return ok_status();
    }
    auto p = read_routing_profile(o_.profile);
    if (!p) return p.error();
    if (!o_.gguf.empty()) {
      auto g = GgufFile::open(o_.gguf);
      if (!g) return g.error();
      const uint64_t fp = gguf_fingerprint(*g);
      if (p->gguf_fingerprint != fp) {
        char a[24], b[24];
        std::snprintf(a, sizeof a, "%016llx", (unsigned long long)p->gguf_fingerprint);
        std::snprintf(b, sizeof b, "%016llx", (unsigned long long)fp);
        return err("kt-place-experts: ", o_.profile, " was recorded on another model (fingerprint ", a, "; ",
                   o_.gguf, " has ", b, ")");
      }
    }
    out = std::move(*p);
    return ok_status();
  }

  mlir::Builder b_;
  const PlaceExpertsOptions& o_;
};

struct PlaceExpertsPass : impl::PlaceExpertsBase<PlaceExpertsPass> {
  using PlaceExpertsBase::PlaceExpertsBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    PlaceExpertsOptions o{profile, gguf, cpuBandwidth, splitTest};
    for (mlir::Operation& op : module.getBody()->getOperations())
      if (auto root = llvm::dyn_cast<ModuleInterface>(&op)) {
        ExpertPlacer placer(module.getContext(), o);
        Status st = placer.run(root);
        if (!st) {
          module.emitError(st.error().message);
          return signalPassFailure();
        }
      }
  }
};

}  // namespace
}  // namespace kt
