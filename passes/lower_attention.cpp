// kt-lower's attention (passes/lowering.h): GQA and DeepSeek's MLA as kernel
// calls, their rope parameters and KV caches.
#include <cmath>
#include <string>

#include "passes/lowering.h"
#include "runtime/gguf.h"
#include "runtime/rope_config.h"

namespace kt::lowering {

using mlir::NamedAttribute;

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

}  // namespace kt::lowering
