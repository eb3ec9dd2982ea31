// kt's passes (Passes.td) and their registration for kt-opt.
#pragma once

#include <memory>

#include "dialects/KtDialect.h"
#include "dialects/KtExecDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kt {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
}  // namespace kt
