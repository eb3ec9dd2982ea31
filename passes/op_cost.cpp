#include "passes/op_cost.h"

#include "kernels/type_traits.h"
#include "passes/module_options.h"

namespace kt {

using rules::CostKind;

namespace {

// One table: which kt ops have weights and how their FLOPs scale.
std::optional<CostKind> kind_of(llvm::StringRef op) {
  if (op == "linear" || op == "lm_head" || op == "moe_gate") return CostKind::Dense;
  if (op == "experts") return CostKind::RoutedExperts;
  if (op == "rms_norm") return CostKind::Norm;
  if (op == "embedding") return CostKind::Lookup;
  return std::nullopt;
}

// top_k of the MoE block an experts op belongs to: the model's hyper-parameter,
// or (in a lit test holding a bare block) its router's.
int64_t top_k_of(ir::ModuleInterface experts) {
  if (ir::HParamsAttr hp = ir::findModelHParams(experts); hp && hp.getNumExpertsPerTok() > 0)
    return hp.getNumExpertsPerTok();
  if (ir::ModuleInterface moe = parent_module(experts))
    for (ir::ModuleInterface c : children(moe))
      if (auto gate = llvm::dyn_cast<ir::MoeGateOp>(c.getOperation())) return int64_t(gate.getTopK());
  return 1;
}

}  // namespace

Result<std::optional<rules::CostInputs>> cost_inputs(ir::ModuleInterface op, int64_t prefill_len) {
  const std::optional<CostKind> kind = kind_of(op_kind(op));
  if (!kind) return std::optional<rules::CostInputs>();
  rules::CostInputs in;
  in.kind = *kind;
  in.prefill_len = prefill_len;
  for (mlir::NamedAttribute a : op->getAttrs()) {
    auto w = llvm::dyn_cast<ir::WeightAttr>(a.getValue());
    if (!w) continue;
    const TypeTraits* t = find_type_by_name(w.getType());
    if (!t) return err(op.getPath().str(), ": weight '", w.getName().str(), "' has unknown ggml type '", w.getType().str(), "'");
    uint64_t rows = 1;
    for (unsigned i = 1; i < w.rank(); ++i) rows *= uint64_t(w.dim(i));
    const uint64_t row = uint64_t(w.dim(0));
    in.elements += row * rows;
    // Quantized rows hold whole blocks (the importer checked ne0 against the
    // block size); round up so a malformed shape never counts as free.
    in.bytes += (row + uint64_t(t->block_size) - 1) / uint64_t(t->block_size) * t->type_size * rows;
    if (*kind == CostKind::RoutedExperts && w.rank() == 3) in.n_experts = w.dim(2);
  }
  if (*kind == CostKind::RoutedExperts) in.top_k = top_k_of(op);
  return std::optional<rules::CostInputs>(in);
}

rules::ModelDims model_dims(ir::HParamsAttr hp) {
  rules::ModelDims d;
  if (!hp) return d;
  d.layers = hp.getNumHiddenLayers();
  d.hidden = hp.getHiddenSize();
  d.heads = hp.getNumAttentionHeads();
  d.kv_heads = hp.getNumKeyValueHeads();
  d.head_dim = hp.getHeadDim() > 0 ? hp.getHeadDim() : (d.heads > 0 ? d.hidden / d.heads : 0);
  d.vocab = hp.getVocabSize();
  d.kv_lora_rank = hp.getKvLoraRank();
  d.qk_rope_head_dim = hp.getQkRopeHeadDim();
  d.intermediate = hp.getIntermediateSize();
  d.moe_intermediate = hp.getMoeIntermediateSize();
  d.top_k = hp.getNumExpertsPerTok();
  return d;
}

}  // namespace kt
