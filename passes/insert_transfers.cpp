// kt-insert-transfers: explicit copies between devices. The lowering puts each
// buffer on the device of the call that writes it; a call on another device
// reads a mirror on its own device instead, filled by a copy call inserted
// right after the call that writes the buffer: as early as the data exists,
// so the copy runs while the producing device goes on with other work (the
// CPU's routed experts get their inputs while the GPU still computes the
// shared expert). Buffers are written once (SSA), so one copy per buffer and
// device serves every later reader.
//
// Downloads are the exception to "as early as possible": the downloads out of
// one run of a GPU's calls (no call of another device between them) become one
// call at the run's last download. The host reads them after the run, so none
// is wanted sooner, and copies on the GPU's queue do not overlap its kernels
// anyway; joined, they are one copy kernel that also sets the gated step's
// flag (kernels/cuda/cuda_copy.cu): a hybrid decode layer's normed rows,
// expert ids and weights were three copies and two flags, five links of the
// GPU's chain where the host waits.
#include <map>
#include <string>

#include "dialects/KtExecDialect.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

namespace kt {
#define GEN_PASS_DEF_INSERTTRANSFERS
#include "passes/Passes.h.inc"

namespace {

bool is_cuda(llvm::StringRef device) { return device.starts_with("cuda"); }
bool is_copy(llvm::StringRef kernel) {
  return kernel == "cuda.upload" || kernel == "cuda.download" || kernel == "cuda.peer_copy";
}

// The copy kernel and the device that runs it: copies are driven by the GPU
// side (its copy engines, on its stream), so the host never blocks on them.
std::pair<std::string, std::string> copy_kernel(llvm::StringRef from, llvm::StringRef to) {
  if (!is_cuda(from)) return {"cuda.upload", to.str()};
  if (!is_cuda(to)) return {"cuda.download", from.str()};
  return {"cuda.peer_copy", to.str()};
}

class InsertTransfersPass : public impl::InsertTransfersBase<InsertTransfersPass> {
 public:
  void runOnOperation() override {
    getOperation()->walk([&](exec::PhaseOp phase) {
      run(phase);
      join_downloads(phase);
    });
  }

 private:
  // Buffers one copy call carries at most (kernels/cuda/cuda_copy.cu).
  static constexpr size_t kMaxCopyBuffers = 8;

  void join_downloads(exec::PhaseOp phase) {
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    for (size_t i = 0; i < calls.size();) {
      size_t j = i;
      llvm::SmallVector<exec::CallOp> downloads;
      while (j < calls.size() && calls[j].getDevice() == calls[i].getDevice()) {
        if (calls[j].getKernel() == "cuda.download") downloads.push_back(calls[j]);
        ++j;
      }
      for (size_t k = 0; k + 1 < downloads.size(); k += kMaxCopyBuffers)
        join(llvm::ArrayRef(downloads).slice(k, std::min(kMaxCopyBuffers, downloads.size() - k)));
      i = j;
    }
  }

  // One download of every buffer of `group`, where the last of them was.
  static void join(llvm::ArrayRef<exec::CallOp> group) {
    if (group.size() < 2) return;
    exec::CallOp last = group.back();
    llvm::SmallVector<mlir::Attribute> in, out;
    for (exec::CallOp c : group) {
      in.append(c.getInputs().begin(), c.getInputs().end());
      out.append(c.getOutputs().begin(), c.getOutputs().end());
    }
    mlir::OpBuilder b(last);
    exec::CallOp::create(b, last.getLoc(), "cuda.download", last.getDevice(), b.getArrayAttr(in),
                         b.getArrayAttr(out), b.getStrArrayAttr({}), mlir::StringAttr(), b.getDictionaryAttr({}),
                         last.getLayer(), last.getPath());
    for (exec::CallOp c : group) c.erase();
  }

  void run(exec::PhaseOp phase) {
    mlir::OpBuilder b(phase->getContext());
    std::map<std::string, exec::BufferOp> buffers;
    for (auto buf : phase.getBody().front().getOps<exec::BufferOp>()) buffers[buf.getSymName().str()] = buf;
    std::map<std::string, std::string> mirrors;  // "name@device" -> mirror name
    llvm::SmallVector<exec::CallOp> calls(phase.getBody().front().getOps<exec::CallOp>());
    std::map<std::string, mlir::Operation*> producer;  // buffer -> the call that writes it
    for (exec::CallOp c : calls)
      for (mlir::Attribute a : c.getOutputs()) producer.emplace(llvm::cast<mlir::StringAttr>(a).str(), c);
    // Copies after one producer keep the order they were made in.
    std::map<mlir::Operation*, mlir::Operation*> last_copy_after;
    for (exec::CallOp call : calls) {
      if (is_copy(call.getKernel())) continue;  // copies read across devices by design
      const std::string dev = call.getDevice().str();
      llvm::SmallVector<mlir::Attribute> inputs;
      bool changed = false;
      for (mlir::Attribute a : call.getInputs()) {
        const std::string name = llvm::cast<mlir::StringAttr>(a).str();
        auto it = buffers.find(name);
        if (it == buffers.end() || it->second.getDevice() == dev) {
          inputs.push_back(a);
          continue;
        }
        const std::string key = name + "@" + dev;
        auto m = mirrors.find(key);
        if (m == mirrors.end()) {
          exec::BufferOp src = it->second;
          b.setInsertionPointAfter(src);
          exec::BufferOp::create(b, src.getLoc(), key, dev, src.getType(), src.getCols(), src.getRows(),
                                 mlir::IntegerAttr());
          const auto [kernel, on] = copy_kernel(src.getDevice(), dev);
          auto prod = producer.find(name);
          if (prod == producer.end()) {
            b.setInsertionPoint(call);
          } else {
            mlir::Operation*& after = last_copy_after[prod->second];
            b.setInsertionPointAfter(after ? after : prod->second);
          }
          auto copy = exec::CallOp::create(b, call.getLoc(), kernel, on, b.getStrArrayAttr({name}),
                                           b.getStrArrayAttr({key}), b.getStrArrayAttr({}), mlir::StringAttr(),
                                           b.getDictionaryAttr({}), call.getLayer(), call.getPath());
          if (prod != producer.end()) last_copy_after[prod->second] = copy;
          m = mirrors.emplace(key, key).first;
        }
        inputs.push_back(b.getStringAttr(m->second));
        changed = true;
      }
      if (changed) call.setInputsAttr(b.getArrayAttr(inputs));
    }
    // The logits are read by the host: bring them there when the head is on a GPU.
    auto logits = buffers.find(phase.getLogits().str());
    if (logits != buffers.end() && is_cuda(logits->second.getDevice())) {
      exec::BufferOp src = logits->second;
      const std::string key = src.getSymName().str() + "@cpu";
      b.setInsertionPointAfter(src);
      exec::BufferOp::create(b, src.getLoc(), key, "cpu", src.getType(), src.getCols(), src.getRows(),
                             mlir::IntegerAttr());
      b.setInsertionPointToEnd(&phase.getBody().front());
      exec::CallOp::create(b, src.getLoc(), "cuda.download", src.getDevice(), b.getStrArrayAttr({src.getSymName()}),
                           b.getStrArrayAttr({key}), b.getStrArrayAttr({}), mlir::StringAttr(),
                           b.getDictionaryAttr({}), -1, "lm_head");
      phase.setLogits(key);
    }
  }
};

}  // namespace
}  // namespace kt
