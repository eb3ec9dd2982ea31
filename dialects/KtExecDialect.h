// The kt_exec dialect (dialects/KtExec.td): the plan as IR.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/KtExecDialect.h.inc"
#define GET_OP_CLASSES
#include "dialects/KtExecOps.h.inc"
