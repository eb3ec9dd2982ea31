// kt-import-gguf: the importer as a pass, so kt-opt can start from a GGUF file.
#include "passes/Passes.h"
#include "passes/import_gguf.h"

namespace kt {
#define GEN_PASS_DEF_IMPORTGGUF
#include "passes/Passes.h.inc"

namespace {

struct ImportGgufPass : impl::ImportGgufBase<ImportGgufPass> {
  using ImportGgufBase::ImportGgufBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (file.empty()) {
      module.emitError("kt-import-gguf needs file=<model.gguf>");
      return signalPassFailure();
    }
    auto imported = import_gguf(getContext(), file, ImportOptions{config});
    if (!imported) {
      module.emitError(imported.error().message);
      return signalPassFailure();
    }
    // Move the kt.model into the module being processed.
    mlir::Block* body = imported.value()->getBody();
    module.getBody()->getOperations().splice(module.getBody()->end(), body->getOperations());
  }
};

}  // namespace
}  // namespace kt
