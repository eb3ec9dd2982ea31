#include "passes/write_plan.h"

#include <map>

#include "kernels/type_traits.h"
#include "runtime/plan_loader.h"

namespace kt {

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Empty lists and strings are left out (absent), as FlatBuffers' object API
// writes them, so a plan survives a JSON round trip byte for byte in meaning.
template <class T>
auto vec(FlatBufferBuilder& fb, const std::vector<T>& v) -> decltype(fb.CreateVector(v)) {
  return v.empty() ? decltype(fb.CreateVector(v))() : fb.CreateVector(v);
}
Offset<flatbuffers::String> str(FlatBufferBuilder& fb, const std::string& s) {
  return s.empty() ? Offset<flatbuffers::String>() : fb.CreateString(s);
}

Offset<plan::Param> param(FlatBufferBuilder& fb, llvm::StringRef key, mlir::Attribute v) {
  int64_t i = 0;
  double f = 0;
  Offset<flatbuffers::String> s;
  Offset<flatbuffers::Vector<int64_t>> ints;
  Offset<flatbuffers::Vector<double>> floats;
  if (auto a = llvm::dyn_cast<mlir::BoolAttr>(v)) {
    i = a.getValue() ? 1 : 0;
  } else if (auto a = llvm::dyn_cast<mlir::IntegerAttr>(v)) {
    i = a.getInt();
    f = double(i);
  } else if (auto a = llvm::dyn_cast<mlir::FloatAttr>(v)) {
    f = a.getValueAsDouble();
  } else if (auto a = llvm::dyn_cast<mlir::StringAttr>(v)) {
    s = fb.CreateString(a.getValue().str());
  } else if (auto a = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(v)) {
    std::vector<int64_t> xs(a.asArrayRef().begin(), a.asArrayRef().end());
    ints = fb.CreateVector(xs);
  } else if (auto a = llvm::dyn_cast<mlir::ArrayAttr>(v)) {
    std::vector<int64_t> xs;
    std::vector<double> ys;
    for (mlir::Attribute e : a) {
      if (auto n = llvm::dyn_cast<mlir::IntegerAttr>(e)) xs.push_back(n.getInt());
      if (auto n = llvm::dyn_cast<mlir::FloatAttr>(e)) ys.push_back(n.getValueAsDouble());
    }
    if (!xs.empty()) ints = fb.CreateVector(xs);
    if (!ys.empty()) floats = fb.CreateVector(ys);
  }
  return plan::CreateParam(fb, fb.CreateString(key.str()), i, f, s, ints, floats);
}

Offset<flatbuffers::Vector<Offset<plan::Param>>> params(FlatBufferBuilder& fb, mlir::DictionaryAttr d) {
  std::vector<Offset<plan::Param>> ps;
  if (d)
    for (const mlir::NamedAttribute& a : d) ps.push_back(param(fb, a.getName().getValue(), a.getValue()));
  return vec(fb, ps);
}

uint32_t type_id(llvm::StringRef name) {
  const TypeTraits* t = find_type_by_name(name);
  return t ? uint32_t(t->type) : UINT32_MAX;
}

}  // namespace

Result<std::vector<uint8_t>> write_plan(exec::PlanOp pl, const std::string& producer) {
  FlatBufferBuilder fb(1 << 16);
  mlir::Block& body = pl.getBody().front();
  std::map<std::string, int> dev_index, w_index, kv_index;
  std::vector<Offset<plan::Device>> devices;
  for (auto d : body.getOps<exec::DeviceOp>()) {
    dev_index[d.getSymName().str()] = int(devices.size());
    devices.push_back(plan::CreateDevice(fb, d.getKind() == "cuda" ? plan::DeviceKind::CUDA : plan::DeviceKind::CPU,
                                         int(d.getIndex()), uint64_t(d.getArenaBytes().value_or(0)),
                                         uint64_t(d.getWeightBytes().value_or(0)),
                                         uint64_t(d.getKvBytesPerToken().value_or(0))));
  }
  auto device = [&](llvm::StringRef name) -> Result<int> {
    auto it = dev_index.find(name.str());
    if (it == dev_index.end()) return err("plan: device '", name.str(), "' is not declared");
    return it->second;
  };

  std::vector<Offset<plan::Weight>> weights;
  for (auto w : body.getOps<exec::WeightOp>()) {
    auto d = device(w.getDevice());
    if (!d.ok()) return d.error();
    const uint32_t t = type_id(w.getType());
    if (t == UINT32_MAX) return err("plan: weight '", w.getTensor().str(), "': unknown type ", w.getType().str());
    std::vector<int64_t> shape(w.getShape().begin(), w.getShape().end());
    w_index[w.getSymName().str()] = int(weights.size());
    Offset<flatbuffers::Vector<int64_t>> matrices;
    if (auto m = w.getMatrices()) matrices = fb.CreateVector(std::vector<int64_t>(m->begin(), m->end()));
    weights.push_back(plan::CreateWeight(fb, fb.CreateString(w.getTensor().str()), t, fb.CreateVector(shape), *d,
                                         fb.CreateString(w.getLayout().str()), uint64_t(w.getBytes()), matrices));
  }

  std::vector<Offset<plan::KvCache>> kvs;
  for (auto c : body.getOps<exec::KvCacheOp>()) {
    auto d = device(c.getDevice());
    if (!d.ok()) return d.error();
    kv_index[c.getSymName().str()] = int(kvs.size());
    kvs.push_back(plan::CreateKvCache(fb, int(c.getLayer()), *d,
                                      c.getKind() == "mla_latent" ? plan::KvKind::MLA_LATENT : plan::KvKind::KV,
                                      int(c.getNKvHeads()), c.getKCols(), c.getVCols(), type_id(c.getType())));
  }

  // Buffers of every phase in one list; calls refer to them by index.
  std::vector<Offset<plan::Buffer>> buffers;
  std::vector<Offset<plan::Phase>> phases;
  for (auto ph : body.getOps<exec::PhaseOp>()) {
    std::map<std::string, int> b_index;
    for (auto b : ph.getBody().front().getOps<exec::BufferOp>()) {
      auto d = device(b.getDevice());
      if (!d.ok()) return d.error();
      b_index[b.getSymName().str()] = int(buffers.size());
      buffers.push_back(plan::CreateBuffer(fb, fb.CreateString(b.getSymName().str()), *d, type_id(b.getType()),
                                           b.getCols(), ph.getMaxTokens(),
                                           b.getRows() == "outputs" ? plan::RowKind::OUTPUTS : plan::RowKind::TOKENS,
                                           uint64_t(b.getOffset().value_or(0))));
    }
    auto indices = [&](mlir::ArrayAttr names, const std::map<std::string, int>& index,
                       const char* what) -> Result<std::vector<int>> {
      std::vector<int> out;
      for (mlir::Attribute a : names) {
        auto it = index.find(llvm::cast<mlir::StringAttr>(a).str());
        if (it == index.end()) return err("plan: ", what, " '", llvm::cast<mlir::StringAttr>(a).str(), "' is not declared");
        out.push_back(it->second);
      }
      return out;
    };
    std::vector<Offset<plan::Call>> calls;
    for (auto c : ph.getBody().front().getOps<exec::CallOp>()) {
      auto d = device(c.getDevice());
      auto in = indices(c.getInputs(), b_index, "buffer");
      auto out = indices(c.getOutputs(), b_index, "buffer");
      auto ws = indices(c.getWeights(), w_index, "weight");
      if (!d.ok()) return d.error();
      if (!in.ok()) return in.error();
      if (!out.ok()) return out.error();
      if (!ws.ok()) return ws.error();
      int kv = -1;
      if (auto k = c.getKv()) {
        auto it = kv_index.find(k->str());
        if (it == kv_index.end()) return err("plan: KV cache '", k->str(), "' is not declared");
        kv = it->second;
      }
      calls.push_back(plan::CreateCall(fb, fb.CreateString(c.getKernel().str()), *d, vec(fb, *in), vec(fb, *out),
                                       vec(fb, *ws), params(fb, c.getParams()),
                                       int(c.getLayer()), kv, fb.CreateString(c.getPath().str())));
    }
    auto logits = b_index.find(ph.getLogits().str());
    if (logits == b_index.end()) return err("plan: phase ", ph.getSymName().str(), " has no logits buffer");
    phases.push_back(plan::CreatePhase(fb, fb.CreateString(ph.getSymName().str()), ph.getMaxTokens(),
                                       vec(fb, calls), logits->second, ph.getMinTokens().value_or(0)));
  }

  const uint64_t fingerprint = std::stoull(pl.getGgufFingerprint().str(), nullptr, 16);
  auto gguf = plan::CreateGgufRef(fb, fb.CreateString(pl.getGguf().str()), uint64_t(pl.getGgufSize()), fingerprint);
  auto model = plan::CreateModel(fb, fb.CreateString(pl.getArch().str()), pl.getNVocab(), pl.getNLayer(),
                                 pl.getNCtx(), params(fb, pl.getHparams()));
  auto root = plan::CreatePlan(fb, kPlanSchemaVersion, fb.CreateString(producer), gguf, model,
                               vec(fb, devices), vec(fb, weights), vec(fb, buffers), vec(fb, kvs),
                               vec(fb, phases),
                               str(fb, pl.getChatTemplate().str()), params(fb, pl.getOptions()));
  plan::FinishSizePrefixedPlanBuffer(fb, root);
  return std::vector<uint8_t>(fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize());
}

}  // namespace kt
