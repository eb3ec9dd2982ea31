// kt-split-layers: pipeline the decoder layers over several GPUs.
// KTransformers' multi-GPU files give the model a `transfer_map` (layer index
// -> device): KDeepseekV2Model.forward moves the hidden state to
// transfer_map[i] before layer i, so layer i and the ones after it run there
// until the next entry, and layers before the first entry run on cuda:0, where
// the embedding's output lands. Without a map and with gpus > 1, kt makes one,
// splitting the layers into contiguous runs with about equal GPU weight bytes.
// Then every op whose device is a GPU without an index the rule wrote ("cuda",
// or chosen by kt-place) runs on its layer's GPU; ops before the layers on the
// first layer's GPU, after them (norm, lm_head) on the last one's.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"
#include "passes/rules/placement_math.h"

namespace kt {
#define GEN_PASS_DEF_SPLITLAYERS
#include "passes/Passes.h.inc"

namespace {

using LayerMap = std::map<int64_t, int>;  // first layer -> GPU index

class Splitter {
 public:
  Splitter(mlir::MLIRContext* ctx, int gpus) : b_(ctx), gpus_(gpus) {}

  Status split(ModuleInterface root) {
    std::vector<ir::DecoderLayerOp> layers;
    root->walk([&](ir::DecoderLayerOp l) { layers.push_back(l); });
    if (layers.empty()) return ok_status();
    LayerMap map;
    bool given = false;
    KT_TRY(read_transfer_map(root, map, given));
    if (!given && gpus_ > 1) balance(layers, map);
    auto gpu_of = [&](int64_t layer) {
      auto it = map.upper_bound(layer);
      return it == map.begin() ? 0 : std::prev(it)->second;
    };
    const int first = gpu_of(layers.front().getLayerIndex()), last = gpu_of(layers.back().getLayerIndex());
    bool after = false;
    for (ir::DecoderLayerOp l : layers) {
      const int gpu = gpu_of(l.getLayerIndex());
      walk_modules(l, [&](ModuleInterface m) { move(m, gpu); });
    }
    // Ops outside the layers: the ones before them feed layer 0, the ones after
    // (final norm, lm_head) read the last layer's output.
    walk_modules(root, [&](ModuleInterface m) {
      if (llvm::isa<ir::DecoderLayerOp>(m.getOperation())) after = true;
      if (m->getParentOfType<ir::DecoderLayerOp>() || llvm::isa<ir::DecoderLayerOp>(m.getOperation())) return;
      bool holds_layers = false;
      m->walk([&](ir::DecoderLayerOp) { holds_layers = true; });
      if (!holds_layers) move(m, after ? last : first);
    });
    return ok_status();
  }

 private:
  Status read_transfer_map(ModuleInterface root, LayerMap& map, bool& given) {
    Status st = ok_status();
    walk_modules(root, [&](ModuleInterface m) {
      auto dict = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(option(m, "transfer_map"));
      if (!dict || given || !st) return;
      given = true;
      for (mlir::NamedAttribute e : dict) {
        int64_t layer = 0;
        auto dev = llvm::isa<mlir::StringAttr>(e.getValue())
                       ? rules::parse_device(llvm::cast<mlir::StringAttr>(e.getValue()).getValue())
                       : std::nullopt;
        if (e.getName().getValue().getAsInteger(10, layer) || !dev || !dev->gpu || dev->index >= gpus_) {
          st = err(m.getPath().str(), ": transfer_map entry '", e.getName().getValue().str(),
                   "' must map a layer index to one of cuda:0..cuda:", gpus_ - 1);
          return;
        }
        map[layer] = dev->index;
      }
    });
    return st;
  }

  // GPU-resident bytes of each layer (weights whose generate device is a GPU).
  static uint64_t gpu_bytes(ir::DecoderLayerOp layer) {
    uint64_t bytes = 0;
    walk_modules(layer, [&](ModuleInterface m) {
      if (auto w = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(m, "weight_bytes")); w && on_gpu(m))
        bytes += uint64_t(w.getInt());
    });
    return bytes;
  }

  // Contiguous runs of layers, GPU g starting where the running total of GPU
  // bytes comes nearest g/gpus of the whole, each GPU at least one layer.
  void balance(std::vector<ir::DecoderLayerOp>& layers, LayerMap& map) {
    const size_t n = layers.size();
    std::vector<uint64_t> prefix(n + 1, 0);
    for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + gpu_bytes(layers[i]);
    if (prefix[n] == 0) return;  // nothing on a GPU: nothing to split
    const size_t gpus = std::min<size_t>(size_t(gpus_), n);
    std::string split;
    size_t start = 0;
    for (size_t g = 0; g < gpus; ++g) {
      size_t end = n;
      if (g + 1 < gpus) {
        const double target = double(prefix[n]) * double(g + 1) / double(gpus);
        end = start + 1;
        for (size_t k = start + 1; k <= n - (gpus - g - 1); ++k)
          if (std::abs(double(prefix[k]) - target) < std::abs(double(prefix[end]) - target)) end = k;
      }
      map[layers[start].getLayerIndex()] = int(g);
      split += (g ? ", " : "") + std::string("cuda:") + std::to_string(g) + " layers " +
               std::to_string(layers[start].getLayerIndex()) + "-" + std::to_string(layers[end - 1].getLayerIndex()) +
               " (" + rules::format_bytes(prefix[end] - prefix[start]) + ")";
      start = end;
    }
    // Recorded where KTransformers keeps it: on the model holding the layers.
    auto holder = llvm::cast<ModuleInterface>(layers.front()->getParentOp());
    mlir::NamedAttrList entries;
    for (const auto& [layer, gpu] : map) entries.set(std::to_string(layer), b_.getStringAttr("cuda:" + std::to_string(gpu)));
    set_options(holder, {b_.getNamedAttr("transfer_map", entries.getDictionary(b_.getContext())),
                         b_.getNamedAttr("layer_split", b_.getStringAttr(split))});
  }

  // A GPU the rule named by index stays; "cuda" and kt-place's choices move.
  void move(ModuleInterface m, int gpu) {
    if (option_bool(m, "explicit_gpu")) return;
    const std::string dev = "cuda:" + std::to_string(gpu);
    for (llvm::StringRef key : kDeviceKeys)
      if (option_str(m, key).starts_with("cuda:") && option_str(m, key) != dev) set_option(m, key, dev);
  }

  mlir::Builder b_;
  int gpus_;
};

struct SplitLayersPass : impl::SplitLayersBase<SplitLayersPass> {
  using SplitLayersBase::SplitLayersBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (gpus < 1) {
      module.emitError("kt-split-layers: gpus must be at least 1");
      return signalPassFailure();
    }
    for (mlir::Operation& op : module.getBody()->getOperations())
      if (auto root = llvm::dyn_cast<ModuleInterface>(&op)) {
        Splitter splitter(module.getContext(), gpus);
        Status st = splitter.split(root);
        if (!st) {
          module.emitError(st.error().message);
          return signalPassFailure();
        }
      }
  }
};

}  // namespace
}  // namespace kt
