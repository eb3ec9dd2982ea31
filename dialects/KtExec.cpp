// The kt_exec dialect's registration and generated op definitions.
#include "dialects/KtExecDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/KtExecDialect.cpp.inc"
#define GET_OP_CLASSES
#include "dialects/KtExecOps.cpp.inc"

namespace kt::exec {

void KtExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/KtExecOps.cpp.inc"
      >();
}

}  // namespace kt::exec
