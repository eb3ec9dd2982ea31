// Generated op definitions, shard 0 of 3 (see CMakeLists.txt), and the
// ModuleInterface. Verifiers are in KtVerify.cpp.
#include "dialects/KtDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/KtInterfaces.cpp.inc"
#define GET_OP_DEFS_0
#include "dialects/KtOps.cpp.inc"
