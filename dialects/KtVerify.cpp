// Verifiers of the kt ops. Leaves check what they know alone (ranks, their
// attributes against the model's); composites check their children: the set of
// child modules by leaf name, their op kinds and every weight's shape, computed
// from the enclosing kt.model's hyper-parameters. A wrong file therefore fails
// at import with the module path, the tensor name and both shapes.
#include <charconv>
#include <string>

#include "dialects/KtDialect.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace kt::ir {
namespace {

using Shape = SmallVector<int64_t, 3>;

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Shortest text that reads back as the same double ("1e-06", "10000").
std::string num(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

struct WeightSpec {
  StringRef role;  // attribute name: "weight", "bias", "gate_proj", ...
  Shape shape;
  bool required = true;
};

// One expected child module: leaf name, op kind and the shapes of its weights.
// Weights a spec does not list must be absent.
struct ChildSpec {
  std::string leaf;
  StringRef opName;
  bool required = true;
  SmallVector<WeightSpec, 2> weights;
};

ChildSpec linear(std::string leaf, Shape w, bool required = true) {
  int64_t out = w.size() >= 2 ? w[1] : 1;
  return {std::move(leaf), "kt.linear", required, {{"weight", w}, {"bias", {out}, false}}};
}
ChildSpec norm(std::string leaf, int64_t dim, bool required = true) {
  return {std::move(leaf), "kt.rms_norm", required, {{"weight", {dim}}}};
}
ChildSpec composite(std::string leaf, StringRef opName, bool required = true) {
  return {std::move(leaf), opName, required, {}};
}

SmallVector<std::pair<StringRef, WeightAttr>> weightsOf(Operation* op) {
  SmallVector<std::pair<StringRef, WeightAttr>> out;
  for (NamedAttribute a : op->getAttrs())
    if (auto w = dyn_cast<WeightAttr>(a.getValue())) out.push_back({a.getName().strref(), w});
  return out;
}

InFlightDiagnostic errorAt(Operation* op, StringRef path) {
  auto diag = op->emitError();
  diag << (path.empty() ? StringRef("<root>") : path) << ": ";
  return diag;
}

// Checks the children of `parent` against `specs`; returns them by leaf name.
FailureOr<llvm::StringMap<Operation*>> verifyChildren(Operation* parent,
                                                      ArrayRef<ChildSpec> specs) {
  llvm::StringMap<const ChildSpec*> byLeaf;
  for (const ChildSpec& s : specs) byLeaf[s.leaf] = &s;
  llvm::StringMap<Operation*> found;
  StringRef parentPath = cast<ModuleInterface>(parent).getPath();
  for (Region& region : parent->getRegions())
    for (Operation& child : region.getOps()) {
      auto module = dyn_cast<ModuleInterface>(&child);
      if (!module)
        return child.emitError() << "a " << parent->getName()
                                 << " holds only kt modules, not " << child.getName();
      StringRef leaf = leafName(module);
      auto spec = byLeaf.find(leaf);
      if (spec == byLeaf.end())
        return errorAt(&child, module.getPath())
               << "unexpected child '" << leaf << "' of " << parent->getName() << " '"
               << parentPath << "'";
      const ChildSpec& s = *spec->second;
      if (child.getName().getStringRef() != s.opName)
        return errorAt(&child, module.getPath())
               << "is a " << child.getName() << ", expected a " << s.opName;
      if (!found.try_emplace(leaf, &child).second)
        return errorAt(&child, module.getPath()) << "appears twice";
      auto weights = weightsOf(&child);
      for (auto [role, w] : weights) {
        const WeightSpec* ws = nullptr;
        for (const WeightSpec& c : s.weights)
          if (c.role == role) ws = &c;
        if (!ws)
          return errorAt(&child, module.getPath())
                 << "unexpected " << role << " '" << w.getName() << "'";
        if (w.getShape() != ArrayRef<int64_t>(ws->shape))
          return errorAt(&child, module.getPath())
                 << role << " '" << w.getName() << "' has shape " << shapeString(w.getShape())
                 << ", expected " << shapeString(ws->shape);
      }
      for (const WeightSpec& ws : s.weights)
        if (ws.required && !llvm::any_of(weights, [&](auto& p) { return p.first == ws.role; }))
          return errorAt(&child, module.getPath()) << "has no " << ws.role;
    }
  for (const ChildSpec& s : specs)
    if (s.required && !found.count(s.leaf))
      return errorAt(parent, parentPath) << "missing child '" << s.leaf << "' (" << s.opName << ")";
  return found;
}

// Exactly one of two alternative leaves (e.g. "mlp" / "block_sparse_moe").
LogicalResult requireOneOf(Operation* parent, const llvm::StringMap<Operation*>& found,
                           StringRef a, StringRef b) {
  if (found.count(a) + found.count(b) == 1) return success();
  return errorAt(parent, cast<ModuleInterface>(parent).getPath())
         << "needs exactly one of '" << a << "' and '" << b << "'";
}

LogicalResult checkRopeDim(Operation* parent, const llvm::StringMap<Operation*>& found,
                           int64_t dim) {
  auto rope = cast<RotaryEmbeddingOp>(found.lookup("rotary_emb"));
  if (int64_t(rope.getDim()) == dim) return success();
  return errorAt(rope, rope.getPath())
         << "dim is " << rope.getDim() << ", expected " << dim;
}

}  // namespace

HParamsAttr findModelHParams(Operation* op) {
  if (auto model = dyn_cast<ModelOp>(op)) return model.getHparams();
  if (auto model = op->getParentOfType<ModelOp>()) return model.getHparams();
  return {};
}

StringRef leafName(ModuleInterface module) {
  auto parent = dyn_cast_or_null<ModuleInterface>(module->getParentOp());
  StringRef path = module.getPath();
  if (!parent || parent.getPath().empty()) return path;
  return path.drop_front(std::min(path.size(), parent.getPath().size() + 1));
}

LogicalResult verifyModulePath(Operation* op) {
  auto self = cast<ModuleInterface>(op);
  StringRef path = self.getPath();
  auto parent = dyn_cast_or_null<ModuleInterface>(op->getParentOp());
  if (!parent) return success();  // the root, or a fragment in a test
  StringRef pp = parent.getPath();
  bool inside = pp.empty() ? !path.empty() && !path.starts_with(".")
                           : path.size() > pp.size() + 1 && path.starts_with(pp) &&
                                 path[pp.size()] == '.';
  if (!inside)
    return op->emitError() << "path '" << path << "' is not inside its parent's path '" << pp
                           << "'";
  return success();
}

LogicalResult WeightAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                 StringRef type, ArrayRef<int64_t> shape) {
  if (name.empty()) return emitError() << "weight with an empty tensor name";
  if (type.empty()) return emitError() << "weight '" << name << "' has no type";
  if (shape.empty() || shape.size() > 4)
    return emitError() << "weight '" << name << "' has rank " << shape.size() << " (1 to 4)";
  for (int64_t d : shape)
    if (d <= 0) return emitError() << "weight '" << name << "' has dimension " << d;
  return success();
}

int64_t DecoderLayerOp::getLayerIndex() {
  auto [head, index] = getPath().rsplit('.');
  int64_t n = -1;
  if (!head.ends_with("layers") || index.getAsInteger(10, n)) return -1;
  return n;
}

//===--- leaves --------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  WeightAttr w = getWeight();
  if (w.rank() > 3) return errorAt(*this, getPath()) << "weight has rank " << w.rank();
  if (auto b = getBiasAttr()) {
    int64_t out = w.rank() >= 2 ? w.dim(1) : 1;
    if (b.getShape() != ArrayRef<int64_t>{out})
      return errorAt(*this, getPath()) << "bias '" << b.getName() << "' has shape "
                                       << shapeString(b.getShape()) << ", expected [" << out << "]";
  }
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (getWeight().rank() != 1) return errorAt(*this, getPath()) << "weight must be 1-D";
  double eps = getEps().convertToDouble();
  if (!(eps > 0)) return errorAt(*this, getPath()) << "eps must be positive";
  if (auto hp = findModelHParams(*this); hp && eps != hp.getRmsNormEps())
    return errorAt(*this, getPath()) << "eps is " << num(eps) << " but the model's rms_norm_eps is "
                                     << num(hp.getRmsNormEps());
  return success();
}

LogicalResult RotaryEmbeddingOp::verify() {
  if (getDim() == 0 || getDim() % 2)
    return errorAt(*this, getPath()) << "dim must be even and positive";
  double theta = getTheta().convertToDouble();
  if (!(theta > 0)) return errorAt(*this, getPath()) << "theta must be positive";
  if (auto hp = findModelHParams(*this)) {
    if (theta != hp.getRopeTheta())
      return errorAt(*this, getPath()) << "theta is " << num(theta) << " but the model's rope_theta is "
                                       << num(hp.getRopeTheta());
    if (getYarnAttr() != hp.getRopeScaling())
      return errorAt(*this, getPath()) << "yarn scaling differs from the model's rope_scaling";
  }
  return success();
}

LogicalResult MoeGateOp::verify() {
  int64_t experts = getWeight().dim(1);
  if (getWeight().rank() != 2) return errorAt(*this, getPath()) << "weight must be 2-D";
  if (getTopK() == 0 || int64_t(getTopK()) > experts)
    return errorAt(*this, getPath()) << "top_k " << getTopK() << " is not in [1, " << experts << "]";
  if (auto b = getEScoreCorrectionBiasAttr(); b && b.getShape() != ArrayRef<int64_t>{experts})
    return errorAt(*this, getPath()) << "e_score_correction_bias '" << b.getName()
                                     << "' has shape " << shapeString(b.getShape())
                                     << ", expected [" << experts << "]";
  auto hp = findModelHParams(*this);
  if (!hp) return success();
  auto mismatch = [&](StringRef what) {
    return errorAt(*this, getPath()) << what << " differs from the model's";
  };
  if (int64_t(getTopK()) != hp.getNumExpertsPerTok()) return mismatch("top_k (num_experts_per_tok)");
  if (getScoringFunc() != hp.getScoringFunc()) return mismatch("scoring_func");
  if (getNormTopkProb() != hp.getNormTopkProb()) return mismatch("norm_topk_prob");
  if (getRoutedScalingFactor().convertToDouble() != hp.getRoutedScalingFactor())
    return mismatch("routed_scaling_factor");
  if (int64_t(getNGroup().value_or(0)) != hp.getNGroup()) return mismatch("n_group");
  if (int64_t(getTopkGroup().value_or(0)) != hp.getTopkGroup()) return mismatch("topk_group");
  return success();
}

LogicalResult ExpertsOp::verify() {
  WeightAttr gate = getGateProj(), up = getUpProj(), down = getDownProj();
  if (gate.rank() != 3 || up.rank() != 3 || down.rank() != 3)
    return errorAt(*this, getPath()) << "expert weights must be 3-D [in, out, n_expert]";
  Shape downWant{gate.dim(1), gate.dim(0), gate.dim(2)};
  if (up.getShape() != gate.getShape() || down.getShape() != ArrayRef<int64_t>(downWant))
    return errorAt(*this, getPath()) << "gate/up/down shapes " << shapeString(gate.getShape())
                                     << ", " << shapeString(up.getShape()) << ", "
                                     << shapeString(down.getShape()) << " do not fit together";
  return success();
}

//===--- composites ----------------------------------------------------===//

LogicalResult ModelOp::verify() {
  HParamsAttr hp = getHparams();
  auto bad = [&](StringRef what) { return errorAt(*this, getPath()) << "hparams: " << what; };
  if (hp.getVocabSize() <= 0 || hp.getHiddenSize() <= 0 || hp.getNumHiddenLayers() <= 0 ||
      hp.getNumAttentionHeads() <= 0 || hp.getNumKeyValueHeads() <= 0)
    return bad("vocab_size, hidden_size, num_hidden_layers and head counts must be positive");
  if (hp.getNumAttentionHeads() % hp.getNumKeyValueHeads())
    return bad("num_attention_heads must be a multiple of num_key_value_heads");
  if (!(hp.getRmsNormEps() > 0) || !(hp.getRopeTheta() > 0))
    return bad("rms_norm_eps and rope_theta must be positive");
  if (hp.isMla()) {
    if (hp.getQkNopeHeadDim() <= 0 || hp.getQkRopeHeadDim() <= 0 || hp.getVHeadDim() <= 0)
      return bad("MLA (kv_lora_rank > 0) needs qk_nope_head_dim, qk_rope_head_dim, v_head_dim");
  } else if (hp.getHeadDim() <= 0) {
    return bad("head_dim must be positive");
  }
  int64_t experts = hp.getNRoutedExperts();
  if (experts > 0) {
    if (hp.getNumExpertsPerTok() <= 0 || hp.getNumExpertsPerTok() > experts)
      return bad("num_experts_per_tok must be in [1, n_routed_experts]");
    if (hp.getMoeIntermediateSize() <= 0) return bad("moe_intermediate_size must be positive");
    if (hp.getFirstKDenseReplace() > hp.getNumHiddenLayers())
      return bad("first_k_dense_replace exceeds num_hidden_layers");
    if (hp.getNGroup() > 0 && (experts % hp.getNGroup() || hp.getTopkGroup() <= 0 ||
                               hp.getTopkGroup() > hp.getNGroup()))
      return bad("n_group must divide n_routed_experts and 0 < topk_group <= n_group");
  }
  bool hasDense = experts == 0 || hp.getFirstKDenseReplace() > 0;
  if (hasDense && hp.getIntermediateSize() <= 0)
    return bad("intermediate_size must be positive (the model has dense MLP layers)");
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  HParamsAttr hp = getHparams();
  Shape vocabShape{hp.getHiddenSize(), hp.getVocabSize()};
  ChildSpec specs[] = {composite("model", "kt.base_model"),
                       {"lm_head", "kt.lm_head", true, {{"weight", vocabShape}}}};
  return verifyChildren(*this, specs);
}

LogicalResult BaseModelOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  if (!hp) return success();
  SmallVector<ChildSpec> specs;
  specs.push_back({"embed_tokens", "kt.embedding", true,
                   {{"weight", {hp.getHiddenSize(), hp.getVocabSize()}}}});
  for (int64_t i = 0; i < hp.getNumHiddenLayers(); ++i)
    specs.push_back(composite("layers." + std::to_string(i), "kt.decoder_layer"));
  specs.push_back(norm("norm", hp.getHiddenSize()));
  return verifyChildren(*this, specs);
}

LogicalResult DecoderLayerOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  if (!hp) return success();
  int64_t index = getLayerIndex();
  if (index < 0 || index >= hp.getNumHiddenLayers())
    return errorAt(*this, getPath()) << "is not a layer 0.." << hp.getNumHiddenLayers() - 1;
  bool moe = hp.isMoeLayer(index);
  SmallVector<ChildSpec> specs = {
      norm("input_layernorm", hp.getHiddenSize()),
      composite("self_attn", hp.isMla() ? "kt.mla_attention" : "kt.gqa_attention"),
      norm("post_attention_layernorm", hp.getHiddenSize()),
      composite("mlp", moe ? "kt.moe" : "kt.mlp", !moe)};
  if (moe) specs.push_back(composite("block_sparse_moe", "kt.moe", false));  // Mixtral's name
  auto found = verifyChildren(*this, specs);
  if (failed(found)) return failure();
  return moe ? requireOneOf(*this, *found, "mlp", "block_sparse_moe") : success();
}

LogicalResult MlaAttentionOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  if (!hp) return success();
  int64_t hidden = hp.getHiddenSize(), heads = hp.getNumAttentionHeads();
  int64_t nope = hp.getQkNopeHeadDim(), rope = hp.getQkRopeHeadDim(), v = hp.getVHeadDim();
  int64_t qLora = hp.getQLoraRank(), kvLora = hp.getKvLoraRank();
  SmallVector<ChildSpec> specs;
  if (qLora > 0) {
    specs.push_back(linear("q_a_proj", {hidden, qLora}));
    specs.push_back(norm("q_a_layernorm", qLora));
    specs.push_back(linear("q_b_proj", {qLora, heads * (nope + rope)}));
  } else {
    specs.push_back(linear("q_proj", {hidden, heads * (nope + rope)}));
  }
  specs.push_back(linear("kv_a_proj_with_mqa", {hidden, kvLora + rope}));
  specs.push_back(norm("kv_a_layernorm", kvLora));
  specs.push_back(linear("kv_b_proj", {kvLora, heads * (nope + v)}, false));
  specs.push_back(linear("k_b_proj", {nope, kvLora, heads}, false));
  specs.push_back(linear("v_b_proj", {kvLora, v, heads}, false));
  specs.push_back(linear("o_proj", {heads * v, hidden}));
  specs.push_back(composite("rotary_emb", "kt.rotary_embedding"));
  auto found = verifyChildren(*this, specs);
  if (failed(found)) return failure();
  bool kb = found->count("k_b_proj"), vb = found->count("v_b_proj");
  if (kb != vb || (!kb && !found->count("kv_b_proj")))
    return errorAt(*this, getPath()) << "needs kv_b_proj or both k_b_proj and v_b_proj";
  return checkRopeDim(*this, *found, rope);
}

LogicalResult GqaAttentionOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  if (!hp) return success();
  int64_t hidden = hp.getHiddenSize(), hd = hp.getHeadDim();
  int64_t q = hp.getNumAttentionHeads() * hd, kv = hp.getNumKeyValueHeads() * hd;
  ChildSpec specs[] = {linear("q_proj", {hidden, q}),     linear("k_proj", {hidden, kv}),
                       linear("v_proj", {hidden, kv}),    linear("o_proj", {q, hidden}),
                       norm("q_norm", hd, false),         norm("k_norm", hd, false),
                       composite("rotary_emb", "kt.rotary_embedding")};
  auto found = verifyChildren(*this, specs);
  if (failed(found)) return failure();
  if (found->count("q_norm") != found->count("k_norm"))
    return errorAt(*this, getPath()) << "has only one of q_norm and k_norm";
  return checkRopeDim(*this, *found, hd);
}

LogicalResult MlpOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  Operation* parent = (*this)->getParentOp();
  if (!hp || !parent) return success();
  // A dense layer's MLP, or the shared experts inside an MoE block.
  int64_t inter = isa<MoeOp>(parent) ? hp.sharedIntermediateSize() : hp.getIntermediateSize();
  int64_t hidden = hp.getHiddenSize();
  ChildSpec specs[] = {linear("gate_proj", {hidden, inter}), linear("up_proj", {hidden, inter}),
                       linear("down_proj", {inter, hidden})};
  return verifyChildren(*this, specs);
}

LogicalResult MoeOp::verifyRegions() {
  HParamsAttr hp = findModelHParams(*this);
  if (!hp) return success();
  int64_t hidden = hp.getHiddenSize(), experts = hp.getNRoutedExperts();
  int64_t inter = hp.getMoeIntermediateSize();
  SmallVector<ChildSpec> specs = {
      {"gate", "kt.moe_gate", true,
       {{"weight", {hidden, experts}}, {"e_score_correction_bias", {experts}, false}}},
      {"experts", "kt.experts", true,
       {{"gate_proj", {hidden, inter, experts}},
        {"up_proj", {hidden, inter, experts}},
        {"down_proj", {inter, hidden, experts}}}}};
  bool shared = hp.sharedIntermediateSize() > 0;
  if (shared) {
    specs.push_back(composite("shared_experts", "kt.mlp", false));  // DeepSeek
    specs.push_back(composite("shared_expert", "kt.mlp", false));   // Qwen2-MoE
    specs.push_back({"shared_expert_gate", "kt.linear", false, {{"weight", {hidden}}}});
  }
  auto found = verifyChildren(*this, specs);
  if (failed(found)) return failure();
  return shared ? requireOneOf(*this, *found, "shared_experts", "shared_expert") : success();
}

}  // namespace kt::ir
