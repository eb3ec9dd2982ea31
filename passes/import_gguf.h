// GGUF file -> kt IR: one kt.model holding the module tree of the model, every
// weight a reference to a tensor of the file, every hyper-parameter from its
// metadata (and, optionally, a Hugging Face config.json). The result is
// verified: a missing or misshapen tensor, or an unknown architecture, is one
// error line naming the file and the tensor, key or module path.
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "runtime/result.h"

namespace kt {

struct ImportOptions {
  std::string config_path;  // Hugging Face config.json, or empty
};

// Loads the kt dialect into `context` if needed.
Result<mlir::OwningOpRef<mlir::ModuleOp>> import_gguf(mlir::MLIRContext& context,
                                                      const std::string& gguf_path,
                                                      const ImportOptions& options = {});

}  // namespace kt
