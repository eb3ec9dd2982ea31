// The kt attributes (generated from KtAttrs.td) and the hand-written parts of
// their syntax.
#include <charconv>

#include "dialects/KtDialect.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

#define GET_ATTRDEF_CLASSES
#include "dialects/KtAttrs.cpp.inc"

namespace kt::ir {

void KtDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/KtAttrs.cpp.inc"
      >();
}

FailureOr<F64> parseF64Param(AsmParser& parser) {
  double v = 0;
  if (parser.parseFloat(v)) return failure();
  return F64(v);
}

void printF64Param(AsmPrinter& printer, double value) {
  // Shortest text that reads back as the same double; MLIR's lexer needs a
  // '.' in a float literal ("1e-06" would lex as an integer).
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  std::string s(buf, ec == std::errc() ? end : buf);
  size_t e = s.find_first_of("eE");
  if (s.find('.') == std::string::npos && s.find_first_of("ni") == std::string::npos)
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  printer << s;
}

FailureOr<bool> parseBoolParam(AsmParser& parser) {
  if (succeeded(parser.parseOptionalKeyword("true"))) return true;
  if (succeeded(parser.parseOptionalKeyword("false"))) return false;
  return parser.emitError(parser.getCurrentLocation(), "expected 'true' or 'false'");
}

// #kt.weight<"blk.0.attn_q.weight", Q4_K, [2048, 3072]>
Attribute WeightAttr::parse(AsmParser& parser, Type) {
  std::string name;
  StringRef type;
  SmallVector<int64_t> shape;
  if (parser.parseLess() || parser.parseString(&name) || parser.parseComma() ||
      parser.parseKeyword(&type) || parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return parser.parseInteger(shape.emplace_back());
      }) ||
      parser.parseGreater())
    return {};
  return WeightAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                parser.getContext(), name, type, shape);
}

void WeightAttr::print(AsmPrinter& printer) const {
  printer << "<";
  printer.printString(getName());
  printer << ", " << getType() << ", [";
  llvm::interleaveComma(getShape(), printer);
  printer << "]>";
}

}  // namespace kt::ir
