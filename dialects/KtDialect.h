// The kt dialect (dialects/KtOps.td): ops mirroring the Hugging Face module
// tree, weight references into GGUF files, model hyper-parameters.
#pragma once

#include <cstdint>

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

namespace kt::ir {
// A double attribute parameter (LLVM's hashing has no double overload).
struct F64 {
  double value = 0;
  F64() = default;
  F64(double v) : value(v) {}
  operator double() const { return value; }
  friend llvm::hash_code hash_value(F64 x) {
    return llvm::hash_value(llvm::bit_cast<uint64_t>(x.value));
  }
};

// Parameter helpers used by the generated attribute parsers and printers.
mlir::FailureOr<F64> parseF64Param(mlir::AsmParser& parser);
void printF64Param(mlir::AsmPrinter& printer, double value);
mlir::FailureOr<bool> parseBoolParam(mlir::AsmParser& parser);
// Op syntax helpers (custom<ShortFloat>, custom<ScoringFunc> in KtOps.td).
mlir::ParseResult parseShortFloat(mlir::OpAsmParser& parser, mlir::FloatAttr& attr);
void printShortFloat(mlir::OpAsmPrinter& printer, mlir::Operation*, mlir::FloatAttr attr);
// The ModuleInterface's check that a child's path extends its parent's.
mlir::LogicalResult verifyModulePath(mlir::Operation* op);
}  // namespace kt::ir

#include "dialects/KtDialect.h.inc"
#include "dialects/KtEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/KtAttrs.h.inc"

namespace kt::ir {
mlir::ParseResult parseScoringFunc(mlir::OpAsmParser& parser, ScoringFuncAttr& attr);
void printScoringFunc(mlir::OpAsmPrinter& printer, mlir::Operation*, ScoringFuncAttr attr);
}  // namespace kt::ir

#include "dialects/KtInterfaces.h.inc"
#define GET_OP_CLASSES
#include "dialects/KtOps.h.inc"

namespace kt::ir {
// The hyper-parameters of the kt.model enclosing op (null when there is none,
// e.g. in a lit test holding one layer).
HParamsAttr findModelHParams(mlir::Operation* op);
// The part of a module's path after its parent module's ("layers.3", "q_proj").
llvm::StringRef leafName(ModuleInterface module);
}  // namespace kt::ir
