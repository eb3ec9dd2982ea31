// kt-fuse-calls: adjacent kernel calls that one kernel does at once become one
// call. A decode step on a GPU is a chain of small kernels, each costing its
// launch and first memory latency more than its work (kernels/cuda/README.md);
// a pair joined is one link less in that chain.
//
// Pairs joined, on one device, the second call right after the first:
//   X.add [a, b] -> [y];  X.rms_norm [y] -> [h] (whole rows)
//     => X.add_rms_norm [a, b] -> [y, h]
// (the residual sum and the norm opening the next block: twice a layer). y
// stays an output, for the residual's next sum. The fused kernels compute the
// same operations in the same order, so plans with and without the pass give
// the same bits.
//
// Runs after kt-insert-transfers, so a copy of y placed between the two keeps
// them apart (the pair must be adjacent), and before kt-plan-memory, which
// then sees the fused call's lifetimes.
#include <string>

#include "dialects/KtExecDialect.h"
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
    getOperation()->walk([&](exec::PhaseOp phase) { run(phase); });
  }

 private:
  void run(exec::PhaseOp phase) {
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
