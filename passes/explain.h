// kt-compile --explain: after the rule and placement passes, one row per op
// with weights — path, kt op, decode and prefill kernel@device, weight bytes,
// FLOPs per token, arithmetic intensity at decode and prefill, and why it is
// where it is (the rule's file:line, or kt-place's reason) — then the weight
// bytes per device. Read from the ops' `options`, so it shows what lowering sees.
#pragma once

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"

namespace kt {

void print_explain(mlir::ModuleOp module, llvm::raw_ostream& os);

}  // namespace kt
