// The kt dialect's registration and the hand-written parts of op syntax.
#include "dialects/KtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

#include "dialects/KtDialect.cpp.inc"
#include "dialects/KtEnums.cpp.inc"

namespace kt::ir {

void KtDialect::initialize() {
  registerAttributes();
  registerKtDialectOperations(this);
}

ParseResult parseShortFloat(OpAsmParser& parser, FloatAttr& attr) {
  double v = 0;
  if (parser.parseFloat(v)) return failure();
  attr = parser.getBuilder().getF64FloatAttr(v);
  return success();
}

void printShortFloat(OpAsmPrinter& printer, Operation*, FloatAttr attr) {
  printF64Param(printer, attr.getValueAsDouble());
}

ParseResult parseScoringFunc(OpAsmParser& parser, ScoringFuncAttr& attr) {
  StringRef word;
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseKeyword(&word)) return failure();
  auto value = symbolizeScoringFunc(word);
  if (!value) return parser.emitError(at, "expected softmax or sigmoid, got '") << word << "'";
  attr = ScoringFuncAttr::get(parser.getContext(), *value);
  return success();
}

void printScoringFunc(OpAsmPrinter& printer, Operation*, ScoringFuncAttr attr) {
  printer << stringifyScoringFunc(attr.getValue());
}

}  // namespace kt::ir
