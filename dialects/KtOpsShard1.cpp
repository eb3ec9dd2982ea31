// Generated op definitions, shard 1 of 3 (see CMakeLists.txt).
#include "dialects/KtDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#define GET_OP_DEFS_1
#include "dialects/KtOps.cpp.inc"
