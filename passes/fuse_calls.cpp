// kt-fuse-calls: adjacent kernel calls that one kernel does at once become one
// call. A decode step on a GPU is a chain of small kernels, each costing its
// launch and first memory latency more than its work (kernels/cuda/README.md);
// a pair joined is one link less in that chain.
//
// Pairs joined, on one device, the second call right after the first:
//   X.add [a, b] -> [y];  X.rms_norm [y] -> [h] (whole rows)
//     => X.add_rms_norm [a, b] -> [y, h]
// (the residual sum and the norm opening the next block: twice a layer). y
// stays an output, for the residual's next sum.
//   cuda.matmul [x] -> [g] (gate);  cuda.matmul [x] -> [u] (up), either order;
//   cuda.silu_mul [g, u] -> [h]  (no other call reads g or u)
//     => cuda.matmul_glu [x] -> [h], weights [gate, up]
// (a dense FFN's or the shared experts' gate, up and SwiGLU: one rounding of x
// and the SwiGLU in the up product's epilogue, kernels/cuda/cuda_matmul_glu.cu;
// the CPU has no such kernel: its threads gain nothing from it). g and u are
// then dead and their buffers go.
//   cuda.add_rms_norm [a, b] -> [y, h] whose h the GPU's int8 products read
//   (cuda.matmul, cuda.matmul_glu over int8-path weights)
//     => cuda.add_rms_norm [a, b] -> [y, h, h.q8] {round_act = 32 | 256},
//        and those products read [h, h.q8]
// (the norm rounds h's rows to the 8-bit blocks the products would round them
// to, where it writes them: kernels/cuda/cuda_rounded_rows.h; q and kv_a, and
// the shared experts' gate and up, each lose a rounding kernel; routed
// experts on the GPU, cuda.moe_experts [h, ids, weights], take it as a fourth
// input. The blocks most of the readers take; the others round for themselves.)
//   cuda.add [b, c] -> [m];  cuda.add_rms_norm [a, m] -> [y, h] (m read by
//   nothing else)  => cuda.add_rms_norm [a, b, c] -> [y, h]
// (the routed and shared experts' sum folded into the residual's: y = a +
// (b + c), one launch less a MoE layer).
//   cuda.matmul_glu [x] -> [a];  cuda.matmul [a] -> [s];  ...
//   cuda.moe_experts [x, ids, w] -> [e]  (the shared experts, then the routed)
//     => cuda.moe_ffn [x, ids, w] -> [e, s], weights [routed.., shared..]
// (the shared experts on a second queue beside the routed ones at decode,
// kernels/cuda/cuda_moe_ffn.cu; a is then dead).
//   cuda.matmul [x..] -> [y0];  ...;  cuda.matmul [x..] -> [y1];  ... (2 to 4,
//   the same inputs, quantized weights of one type, all or none biased; calls
//   between on the same device, none writing x or touching a later y)
//     => cuda.matmul_multi [x..] -> [y0, y1, ..], weights [w0, w1, .. (, b0,
//        b1, ..)] where the first product was
// (an MLA layer's q and kv_a products, V3's q_a and kv_a, a GQA layer's q, k
// and v: one launch at decode, kernels/cuda/cuda_matmul_multi.cu).
//   cuda.rope [q] -> [qr];  cuda.mla_cache_store [kv] (its rope parameters
//   the rope's)  => cuda.rope_mla_store [q, kv] -> [qr], weights [kv norm]
// (q's rope and the latent cache's store in one launch, kernels/cuda/
// cuda_rope.cu).
//   cuda.rope_mla_store [q, kv] -> [qr];  cuda.mla_attention_absorbed [qr]
//   (qr read by nothing else)  => cuda.mla_attention_store [q, kv] -> [o]
// (a decoding token's rope, cache store and q_abs in one launch, side by
// side, kernels/cuda/cuda_mla.cu).
// The fused kernels compute the same operations in the same order, so plans
// with and without the pass give the same bits.
//
// Runs after kt-insert-transfers, so a copy of y placed between the two keeps
// them apart (the pair must be adjacent), and before kt-plan-memory, which
// then sees the fused call's lifetimes.
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include "dialects/KtExecDialect.h"
#include "kernels/cuda/cuda_rounded_rows.h"
#include "kernels/type_traits.h"
#include "kernels/vec_dot_block.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

namespace kt {
#define GEN_PASS_DEF_FUSECALLS
#include "passes/Passes.h.inc"

namespace {

std::string str(mlir::Attribute a) { return llvm::cast<mlir::StringAttr>(a).str(); }

// "cuda.add" -> ("cuda", "add").
std::pair<llvm::StringRef, llvm::StringRef> split_kernel(llvm::StringRef k) { return k.split('.'); }

class FuseCallsPass : public impl::FuseCallsBase<FuseCallsPass> {
 public:
  void runOnOperation() override {
    llvm::StringMap<std::string> weight_types;
    getOperation()->walk([&](exec::WeightOp w) { weight_types[w.getSymName()] = w.getType().str(); });
    getOperation()->walk([&](exec::PhaseOp phase) {
      fuse_glu(phase);
      fuse_add_norm(phase);
      fold_addend(phase);
      shared_beside(phase);
      share_rounding(phase, weight_types);
      fuse_products(phase, weight_types);
      fuse_rope_store(phase);
      fuse_attention_store(phase);
    });
  }

 private:
  void fuse_add_norm(exec::PhaseOp phase) {
    llvm::StringMap<int64_t> cols;
    for (auto buf : phase.getBody().front().getOps<exec::BufferOp>()) cols[buf.getSymName()] = buf.getCols();
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      exec::CallOp add = calls[i], norm = calls[i + 1];
      if (!add_then_norm(add, norm, cols)) continue;
      mlir::OpBuilder b(norm);
      const llvm::StringRef kind = split_kernel(add.getKernel()).first;
      llvm::SmallVector<mlir::Attribute> outs{add.getOutputs()[0], norm.getOutputs()[0]};
      const mlir::NamedAttribute eps(b.getStringAttr("eps"), norm.getParams().get("eps"));
      exec::CallOp::create(b, norm.getLoc(), (kind + ".add_rms_norm").str(), norm.getDevice(), add.getInputs(),
                           b.getArrayAttr(outs), norm.getWeights(), mlir::StringAttr(), b.getDictionaryAttr({eps}),
                           norm.getLayer(), norm.getPath());
      add.erase();
      norm.erase();
      ++i;  // the norm is gone: the next pair starts after it
    }
  }

  // cuda.add [b, c] -> [m] right before cuda.add_rms_norm [a, m] (or [m, a]),
  // m read by nothing else: cuda.add_rms_norm [a, b, c], y = a + (b + c).
  void fold_addend(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    const llvm::StringMap<int> reads = read_counts(phase, calls);
    llvm::StringSet<> dead;
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      exec::CallOp add = calls[i], norm = calls[i + 1];
      if (add.getKernel() != "cuda.add" || norm.getKernel() != "cuda.add_rms_norm" ||
          add.getDevice() != norm.getDevice() || add.getInputs().size() != 2 || add.getOutputs().size() != 1 ||
          norm.getInputs().size() != 2)
        continue;
      const std::string m = str(add.getOutputs()[0]);
      const int at = str(norm.getInputs()[0]) == m ? 0 : str(norm.getInputs()[1]) == m ? 1 : -1;
      if (at < 0 || reads.lookup(m) != 1 || str(norm.getInputs()[1 - at]) == m) continue;
      mlir::OpBuilder b(norm);
      norm.setInputsAttr(b.getArrayAttr({norm.getInputs()[1 - at], add.getInputs()[0], add.getInputs()[1]}));
      dead.insert(m);
      add.erase();
      ++i;
    }
    erase_buffers(phase, dead);
  }

  // cuda.matmul_glu [x] -> [a] and cuda.matmul [a] -> [s] (the shared
  // experts; a read only by that product) before cuda.moe_experts [x, ids, w]
  // -> [e], nothing between the product and the experts reading s:
  // cuda.moe_ffn [x, ids, w] -> [e, s] where the experts were.
  void shared_beside(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    const llvm::StringMap<int> reads = read_counts(phase, calls);
    llvm::StringSet<> dead;
    for (size_t k = 0; k < calls.size(); ++k) {
      exec::CallOp e = calls[k];
      if (e.getKernel() != "cuda.moe_experts" || e.getInputs().size() != 3 || e.getOutputs().size() != 1 ||
          e.getWeights().size() != 3 || e.getParams().get("streamed"))
        continue;
      const std::string x = str(e.getInputs()[0]);
      // The latest SwiGLU of x before the experts, and the one product of it.
      int g = -1, d = -1;
      for (int j = int(k) - 1; j >= 0 && g < 0; --j) {
        exec::CallOp c = calls[size_t(j)];
        if (c && c.getKernel() == "cuda.matmul_glu" && c.getDevice() == e.getDevice() && c.getInputs().size() == 1 &&
            str(c.getInputs()[0]) == x && c.getOutputs().size() == 1)
          g = j;
      }
      if (g < 0) continue;
      const std::string a = str(calls[size_t(g)].getOutputs()[0]);
      for (size_t j = size_t(g) + 1; j < k && d < 0; ++j) {
        exec::CallOp c = calls[j];
        if (c && plain_matmul(c) && c.getDevice() == e.getDevice() && str(c.getInputs()[0]) == a) d = int(j);
      }
      if (d < 0 || reads.lookup(a) != 1) continue;
      exec::CallOp gc = calls[size_t(g)], dc = calls[size_t(d)];
      const std::string s = str(dc.getOutputs()[0]);
      bool read_between = s == phase.getLogits();
      for (size_t j = size_t(d) + 1; j < k && !read_between; ++j)
        if (calls[j])
          for (mlir::Attribute in : calls[j].getInputs()) read_between |= str(in) == s;
      if (read_between) continue;
      mlir::OpBuilder b(e);
      llvm::SmallVector<mlir::Attribute> weights(e.getWeights().begin(), e.getWeights().end());
      weights.append({gc.getWeights()[0], gc.getWeights()[1], dc.getWeights()[0]});
      exec::CallOp::create(b, e.getLoc(), "cuda.moe_ffn", e.getDevice(), e.getInputs(),
                           b.getArrayAttr({e.getOutputs()[0], dc.getOutputs()[0]}), b.getArrayAttr(weights),
                           mlir::StringAttr(), e.getParams(), e.getLayer(), e.getPath());
      dead.insert(str(gc.getOutputs()[0]));
      gc.erase();
      dc.erase();
      e.erase();
      calls[size_t(g)] = calls[size_t(d)] = calls[k] = nullptr;
    }
    erase_buffers(phase, dead);
  }

  // The buffers named in dead, which the joined calls no longer use.
  static void erase_buffers(exec::PhaseOp phase, const llvm::StringSet<>& dead) {
    for (auto buf : llvm::make_early_inc_range(phase.getBody().front().getOps<exec::BufferOp>()))
      if (dead.contains(buf.getSymName())) buf.erase();
  }

  // How many calls read each buffer (the runtime reads the logits: one more).
  static llvm::StringMap<int> read_counts(exec::PhaseOp phase, llvm::ArrayRef<exec::CallOp> calls) {
    llvm::StringMap<int> reads;
    for (exec::CallOp c : calls)
      if (auto ins = c.getInputs())
        for (mlir::Attribute a : ins) ++reads[str(a)];
    ++reads[phase.getLogits()];
    return reads;
  }

  // The 8-bit blocks a product over this weight type rounds activations to
  // (ggml's vec_dot_type); 0: a float type.
  static int act_block(llvm::StringRef type) {
    const TypeTraits* t = find_type_by_name(std::string_view(type.data(), type.size()));
    return t ? vec_dot_block(t->type) : 0;
  }

  void share_rounding(exec::PhaseOp phase, const llvm::StringMap<std::string>& weight_types) {
    mlir::Block& body = phase.getBody().front();
    llvm::StringMap<exec::BufferOp> buffers;
    for (auto buf : body.getOps<exec::BufferOp>()) buffers[buf.getSymName()] = buf;
    llvm::SmallVector<exec::CallOp> calls(body.getOps<exec::CallOp>());
    for (size_t i = 0; i < calls.size(); ++i) {
      exec::CallOp norm = calls[i];
      if (norm.getKernel() != "cuda.add_rms_norm" || norm.getOutputs().size() != 2) continue;
      const std::string h = str(norm.getOutputs()[1]);
      auto hb = buffers.find(h);
      if (hb == buffers.end()) continue;
      // The products reading h, and the blocks each rounds it to.
      llvm::SmallVector<std::pair<exec::CallOp, int>> readers;
      int count32 = 0, count256 = 0;
      for (size_t j = i + 1; j < calls.size(); ++j) {
        exec::CallOp c = calls[j];
        const bool product = (c.getKernel() == "cuda.matmul" && c.getWeights().size() == 1) ||
                             (c.getKernel() == "cuda.matmul_glu" && c.getWeights().size() == 2);
        // Routed experts on the GPU (not streamed from the host): x, ids, weights.
        const bool experts = ((c.getKernel() == "cuda.moe_experts" && c.getWeights().size() == 3) ||
                              (c.getKernel() == "cuda.moe_ffn" && c.getWeights().size() == 6)) &&
                             c.getInputs().size() == 3 && !c.getParams().get("streamed");
        if (!(product || experts) || c.getDevice() != norm.getDevice() ||
            c.getInputs().size() != (experts ? 3u : 1u) || str(c.getInputs()[0]) != h)
          continue;
        auto t = weight_types.find(str(c.getWeights()[0]));
        const int act = t == weight_types.end() ? 0 : act_block(t->second);
        if (act == 0) continue;
        readers.push_back({c, act});
        (act == 32 ? count32 : count256)++;
      }
      if (readers.empty()) continue;
      const int act = count256 >= count32 ? 256 : 32;
      const int64_t n = hb->second.getCols();
      if (n % act != 0) continue;
      const std::string hq = h + ".q8";
      mlir::OpBuilder bb(hb->second->getBlock(), std::next(hb->second->getIterator()));
      exec::BufferOp::create(bb, hb->second.getLoc(), hq, hb->second.getDevice(), "I32",
                             cuda::rounded_rows_cols(n, act), hb->second.getRows(), mlir::IntegerAttr());
      mlir::OpBuilder b(norm);
      llvm::SmallVector<mlir::Attribute> outs(norm.getOutputs().begin(), norm.getOutputs().end());
      outs.push_back(b.getStringAttr(hq));
      norm.setOutputsAttr(b.getArrayAttr(outs));
      llvm::SmallVector<mlir::NamedAttribute> params(norm.getParams().begin(), norm.getParams().end());
      params.push_back(b.getNamedAttr("round_act", b.getI64IntegerAttr(act)));
      norm.setParamsAttr(b.getDictionaryAttr(params));
      for (auto& [c, a] : readers) {
        if (a != act) continue;
        llvm::SmallVector<mlir::Attribute> ins(c.getInputs().begin(), c.getInputs().end());
        ins.insert(ins.begin() + (ins.size() == 1 ? 1 : ins.size()), b.getStringAttr(hq));
        c.setInputsAttr(b.getArrayAttr(ins));
      }
    }
  }

  // cuda.matmul calls of the same inputs over quantized weights of one type,
  // all biased or none: one cuda.matmul_multi each, where the first was. A
  // later product joins when nothing between writes its inputs or touches its
  // output, all on one device (V3's kv_a product comes after q_a's norm and
  // q_b's product, which it does not read). After share_rounding, so the
  // products already read the norm's rounded rows where they will.
  void fuse_products(exec::PhaseOp phase, const llvm::StringMap<std::string>& weight_types) {
    constexpr size_t kMaxProducts = 4;  // cuda::MatmulOp::kMaxProducts
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    auto type_of = [&](exec::CallOp c) { return weight_types.lookup(str(c.getWeights()[0])); };
    auto touches = [](exec::CallOp c, const std::string& buf, bool reads) {
      for (mlir::Attribute a : c.getOutputs())
        if (str(a) == buf) return true;
      if (reads && c.getInputs())
        for (mlir::Attribute a : c.getInputs())
          if (str(a) == buf) return true;
      return false;
    };
    for (size_t i = 0; i < calls.size(); ++i) {
      exec::CallOp first = calls[i];
      if (!first || !product(first) || act_block(type_of(first)) == 0) continue;
      llvm::SmallVector<size_t> group{i};
      for (size_t j = i + 1; j < calls.size() && group.size() < kMaxProducts; ++j) {
        exec::CallOp c = calls[j];
        if (!c) continue;
        if (c.getDevice() != first.getDevice()) break;
        if (product(c) && c.getInputs() == first.getInputs() &&
            c.getWeights().size() == first.getWeights().size() && type_of(c) == type_of(first)) {
          const std::string y = str(c.getOutputs()[0]);
          bool free = true;
          for (size_t k = i + 1; k < j && free; ++k)
            if (calls[k] && !llvm::is_contained(group, k)) free = !touches(calls[k], y, true);
          if (free) {
            group.push_back(j);
            continue;
          }
        }
        bool writes_input = false;
        for (mlir::Attribute in : first.getInputs()) writes_input |= touches(c, str(in), false);
        if (writes_input) break;
      }
      if (group.size() < 2) continue;
      llvm::SmallVector<mlir::Attribute> outs, weights, biases;
      for (size_t k : group) {
        outs.push_back(calls[k].getOutputs()[0]);
        weights.push_back(calls[k].getWeights()[0]);
        if (calls[k].getWeights().size() == 2) biases.push_back(calls[k].getWeights()[1]);
      }
      weights.append(biases.begin(), biases.end());
      mlir::OpBuilder b(first);
      exec::CallOp::create(b, first.getLoc(), "cuda.matmul_multi", first.getDevice(), first.getInputs(),
                           b.getArrayAttr(outs), b.getArrayAttr(weights), mlir::StringAttr(), b.getDictionaryAttr({}),
                           first.getLayer(), first.getPath());
      for (size_t k : group) {
        calls[k].erase();
        calls[k] = nullptr;
      }
    }
  }

  // cuda.rope [q] -> [qr] right before cuda.mla_cache_store [kv] (kv not qr,
  // the store's rope parameters the rope's): cuda.rope_mla_store [q, kv] ->
  // [qr] with the store's weight, cache and eps.
  void fuse_rope_store(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      exec::CallOp rope = calls[i], store = calls[i + 1];
      if (rope.getKernel() != "cuda.rope" || store.getKernel() != "cuda.mla_cache_store" ||
          rope.getDevice() != store.getDevice() || !rope.getInputs() || rope.getInputs().size() != 1 ||
          rope.getOutputs().size() != 1 || !store.getInputs() || store.getInputs().size() != 1 ||
          (store.getOutputs() && !store.getOutputs().empty()) || store.getWeights().size() != 1 || !store.getKv() ||
          str(store.getInputs()[0]) == str(rope.getOutputs()[0]))
        continue;
      mlir::DictionaryAttr rp = rope.getParams(), sp = store.getParams();
      bool same = sp.get("eps") != nullptr;
      for (mlir::NamedAttribute a : sp)
        if (a.getName() != "eps") same &= rp.get(a.getName()) == a.getValue();
      if (!same) continue;
      llvm::SmallVector<mlir::NamedAttribute> params(rp.begin(), rp.end());
      params.push_back(mlir::NamedAttribute(mlir::StringAttr::get(rp.getContext(), "eps"), sp.get("eps")));
      mlir::OpBuilder b(store);
      exec::CallOp::create(b, store.getLoc(), "cuda.rope_mla_store", store.getDevice(),
                           b.getArrayAttr({rope.getInputs()[0], store.getInputs()[0]}), rope.getOutputs(),
                           store.getWeights(), store.getKvAttr(), b.getDictionaryAttr(params), store.getLayer(),
                           store.getPath());
      rope.erase();
      store.erase();
      ++i;
    }
  }

  // cuda.rope_mla_store [q, kv] -> [qr] right before cuda.mla_attention_absorbed
  // [qr] -> [o] over the same cache, qr read by nothing else, the two calls'
  // common params equal: cuda.mla_attention_store [q, kv] -> [o], weights the
  // attention's then the store's norm, the params of both.
  void fuse_attention_store(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    const llvm::StringMap<int> reads = read_counts(phase, calls);
    llvm::StringSet<> dead;
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      exec::CallOp st = calls[i], at = calls[i + 1];
      if (st.getKernel() != "cuda.rope_mla_store" || at.getKernel() != "cuda.mla_attention_absorbed" ||
          st.getDevice() != at.getDevice() || st.getKvAttr() != at.getKvAttr() || !at.getInputs() ||
          at.getInputs().size() != 1 || st.getOutputs().size() != 1 || st.getWeights().size() != 1)
        continue;
      const std::string qr = str(st.getOutputs()[0]);
      if (str(at.getInputs()[0]) != qr || reads.lookup(qr) != 1) continue;
      llvm::SmallVector<mlir::NamedAttribute> params(at.getParams().begin(), at.getParams().end());
      bool same = true;
      for (mlir::NamedAttribute p : st.getParams()) {
        if (mlir::Attribute v = at.getParams().get(p.getName()))
          same &= v == p.getValue();
        else
          params.push_back(p);
      }
      if (!same) continue;
      mlir::OpBuilder b(at);
      llvm::SmallVector<mlir::Attribute> weights(at.getWeights().begin(), at.getWeights().end());
      weights.push_back(st.getWeights()[0]);
      exec::CallOp::create(b, at.getLoc(), "cuda.mla_attention_store", at.getDevice(), st.getInputs(),
                           at.getOutputs(), b.getArrayAttr(weights), at.getKvAttr(), b.getDictionaryAttr(params),
                           at.getLayer(), at.getPath());
      dead.insert(qr);
      st.erase();
      at.erase();
      ++i;
    }
    erase_buffers(phase, dead);
  }

  // cuda.matmul [x] or [x, x rounded] -> [y], weights [w] or [w, bias], no
  // params, no cache.
  static bool product(exec::CallOp c) {
    return c.getKernel() == "cuda.matmul" && c.getInputs() && !c.getInputs().empty() &&
           c.getInputs().size() <= 2 && c.getOutputs().size() == 1 && !c.getWeights().empty() &&
           c.getWeights().size() <= 2 && !c.getKv() && c.getParams().empty();
  }

  // One product, no bias, no params.
  static bool plain_matmul(exec::CallOp c) {
    return c.getKernel() == "cuda.matmul" && c.getInputs() && c.getInputs().size() == 1 &&
           c.getOutputs().size() == 1 && c.getWeights().size() == 1 && !c.getKv() && c.getParams().empty();
  }

  // cuda.matmul gate, cuda.matmul up (same input, no bias), cuda.silu_mul.
  void fuse_glu(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    const llvm::StringMap<int> reads = read_counts(phase, calls);
    llvm::StringSet<> dead;
    for (size_t i = 0; i + 2 < calls.size(); ++i) {
      exec::CallOp m0 = calls[i], m1 = calls[i + 1], sm = calls[i + 2];
      if (!glu_triple(m0, m1, sm, reads)) continue;
      const bool m0_gate = str(sm.getInputs()[0]) == str(m0.getOutputs()[0]);
      exec::CallOp gate = m0_gate ? m0 : m1, up = m0_gate ? m1 : m0;
      mlir::OpBuilder b(sm);
      llvm::SmallVector<mlir::Attribute> weights{gate.getWeights()[0], up.getWeights()[0]};
      exec::CallOp::create(b, sm.getLoc(), "cuda.matmul_glu", sm.getDevice(), gate.getInputs(), sm.getOutputs(),
                           b.getArrayAttr(weights), mlir::StringAttr(), b.getDictionaryAttr({}), gate.getLayer(),
                           gate.getPath());
      dead.insert(str(m0.getOutputs()[0]));
      dead.insert(str(m1.getOutputs()[0]));
      m0.erase();
      m1.erase();
      sm.erase();
      i += 2;
    }
    erase_buffers(phase, dead);
  }

  static bool glu_triple(exec::CallOp m0, exec::CallOp m1, exec::CallOp sm, const llvm::StringMap<int>& reads) {
    if (!plain_matmul(m0) || !plain_matmul(m1) || sm.getKernel() != "cuda.silu_mul") return false;
    if (m0.getDevice() != sm.getDevice() || m1.getDevice() != sm.getDevice()) return false;
    if (str(m0.getInputs()[0]) != str(m1.getInputs()[0])) return false;
    if (!sm.getInputs() || sm.getInputs().size() != 2 || sm.getOutputs().size() != 1) return false;
    const std::string g = str(sm.getInputs()[0]), u = str(sm.getInputs()[1]);
    const std::string o0 = str(m0.getOutputs()[0]), o1 = str(m1.getOutputs()[0]);
    if (!((g == o0 && u == o1) || (g == o1 && u == o0)) || g == u) return false;
    // The products feed only the SwiGLU (silu_mul reads each once).
    return reads.lookup(g) == 1 && reads.lookup(u) == 1;
  }

  // add [a, b] -> [y] then rms_norm [y] -> [h] over whole rows, one device.
  static bool add_then_norm(exec::CallOp add, exec::CallOp norm, const llvm::StringMap<int64_t>& cols) {
    auto [ak, aop] = split_kernel(add.getKernel());
    auto [nk, nop] = split_kernel(norm.getKernel());
    if (aop != "add" || nop != "rms_norm" || ak != nk || add.getDevice() != norm.getDevice()) return false;
    if (add.getInputs().size() != 2 || add.getOutputs().size() != 1 || norm.getInputs().size() != 1 ||
        norm.getOutputs().size() != 1 || norm.getWeights().size() != 1 || norm.getKv() ||
        !norm.getParams().get("eps"))
      return false;
    const std::string y = str(add.getOutputs()[0]);
    if (str(norm.getInputs()[0]) != y) return false;
    // A norm per group of columns (Qwen3's per-head q/k norms) stays alone.
    if (auto g = norm.getParams().getAs<mlir::IntegerAttr>("group")) {
      auto it = cols.find(y);
      if (it == cols.end() || g.getInt() != it->second) return false;
    }
    return true;
  }
};

}  // namespace

}  // namespace kt
