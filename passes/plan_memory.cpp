// kt-plan-memory: arena offsets from buffer lifetimes. Within a phase a buffer
// is live from the first call that touches it to the last (the phase's logits
// until the end, where the runtime reads them); two buffers whose lifetimes do
// not overlap may share bytes. Offsets are assigned in order of first use,
// each at the lowest 64-byte-aligned gap between the live buffers that fits
// (first fit). Phases never run at once, so each device's arena is the
// largest phase's. Devices also get the bytes of their weights and of their
// KV caches per context token.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "dialects/KtExecDialect.h"
#include "kernels/type_traits.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

namespace kt {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"

namespace {

constexpr int64_t kAlign = 64;

int64_t elem_bytes(llvm::StringRef type) {
  const TypeTraits* t = find_type_by_name(type);
  return t ? int64_t(t->type_size) : 4;
}

struct Live {
  exec::BufferOp buf;
  int64_t first = -1, last = -1, bytes = 0, offset = 0;
};

class PlanMemoryPass : public impl::PlanMemoryBase<PlanMemoryPass> {
 public:
  void runOnOperation() override {
    getOperation()->walk([&](exec::PlanOp plan) { run(plan); });
  }

 private:
  void run(exec::PlanOp plan) {
    mlir::Builder b(plan->getContext());
    std::map<std::string, int64_t> arena, weights, kv;
    for (auto phase : plan.getBody().front().getOps<exec::PhaseOp>()) {
      std::map<std::string, Live> live;
      std::vector<std::string> order;  // by first use
      for (auto buf : phase.getBody().front().getOps<exec::BufferOp>()) {
        Live& l = live[buf.getSymName().str()];
        l.buf = buf;
        l.bytes = (buf.getCols() * phase.getMaxTokens() * elem_bytes(buf.getType()) + kAlign - 1) / kAlign * kAlign;
      }
      int64_t index = 0;
      auto touch = [&](mlir::ArrayAttr names) {
        for (mlir::Attribute a : names) {
          auto it = live.find(llvm::cast<mlir::StringAttr>(a).str());
          if (it == live.end()) continue;
          if (it->second.first < 0) {
            it->second.first = index;
            order.push_back(it->first);
          }
          it->second.last = index;
        }
      };
      for (auto call : phase.getBody().front().getOps<exec::CallOp>()) {
        touch(call.getInputs());
        touch(call.getOutputs());
        ++index;
      }
      if (auto it = live.find(phase.getLogits().str()); it != live.end()) it->second.last = index;

      std::map<std::string, std::vector<Live*>> placed;  // per device, sorted by offset
      for (const std::string& name : order) {
        Live& l = live[name];
        std::vector<Live*>& on = placed[l.buf.getDevice().str()];
        std::erase_if(on, [&](Live* p) { return p->last < l.first; });
        int64_t at = 0;
        for (Live* p : on) {  // sorted by offset: the first gap that fits
          if (p->offset - at >= l.bytes) break;
          at = std::max(at, p->offset + p->bytes);
        }
        l.offset = at;
        on.insert(std::upper_bound(on.begin(), on.end(), &l,
                                   [](const Live* a, const Live* c) { return a->offset < c->offset; }),
                  &l);
        int64_t& a = arena[l.buf.getDevice().str()];
        a = std::max(a, at + l.bytes);
      }
      for (auto& [name, l] : live) l.buf.setOffsetAttr(b.getI64IntegerAttr(l.first < 0 ? 0 : l.offset));
    }
    for (auto w : plan.getBody().front().getOps<exec::WeightOp>()) weights[w.getDevice().str()] += w.getBytes();
    for (auto c : plan.getBody().front().getOps<exec::KvCacheOp>())
      kv[c.getDevice().str()] += (c.getKCols() + c.getVCols()) * elem_bytes(c.getType());
    for (auto d : plan.getBody().front().getOps<exec::DeviceOp>()) {
      const std::string n = d.getSymName().str();
      d.setArenaBytesAttr(b.getI64IntegerAttr(arena[n]));
      d.setWeightBytesAttr(b.getI64IntegerAttr(weights[n]));
      d.setKvBytesPerTokenAttr(b.getI64IntegerAttr(kv[n]));
    }
  }
};

}  // namespace
}  // namespace kt
