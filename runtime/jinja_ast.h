// Tokens and syntax tree of the chat-template interpreter (a Jinja subset
// with jinja2 3.1's grammar and precedence), plus the source map that turns a
// byte offset into "name:line:col" for error messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/jinja_value.h"
#include "runtime/result.h"

namespace kt::jinja {

struct SourceMap {
  std::string name;
  std::vector<uint32_t> line_starts;  // byte offset of each line
  SourceMap(std::string name, std::string_view text);
  std::string where(uint32_t pos) const;  // "name:line:col"
};

// ---- tokens ----

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok kind;
  uint32_t pos;
  std::string text;  // data, name, operator, or the unescaped string literal
  int64_t ival = 0;
  double fval = 0;
};

// jinja2's newline handling: \r\n and \r become \n, and one trailing newline
// is dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view source);

// Tokenizes normalized source with transformers' settings: trim_blocks and
// lstrip_blocks on, {%- -%} {{- -}} {#- -#} and {%+ +%} honoured. Comments are
// dropped; {% raw %} bodies become data.
Result<std::vector<Token>> tokenize(const std::string& source, const SourceMap& map);

// ---- expressions ----

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  Const,     // value
  Name,      // name
  List,      // kids
  Tuple,     // kids
  Dict,      // kids: key, value, key, value...
  GetAttr,   // kids[0].name
  GetItem,   // kids[0][kids[1]]
  Slice,     // kids[0][kids[1]:kids[2]:kids[3]], any of 1..3 may be null
  Call,      // kids[0](kids[1..], kwargs)
  Filter,    // kids[0] | name(kids[1..], kwargs); kids[0] null inside {% filter %}/{% set %} blocks
  Test,      // kids[0] is name(kids[1..], kwargs)
  Not,       // not kids[0]
  Neg,       // -kids[0]
  Pos,       // +kids[0]
  Binary,    // kids[0] op kids[1]: + - * / // % ** ~
  And,       // kids[0] and kids[1]
  Or,        // kids[0] or kids[1]
  Compare,   // kids[0] ops[0] kids[1] ops[1] kids[2] ... (chained like Python)
  CondExpr,  // kids[1] if kids[0] else kids[2] (kids[2] may be null)
};

// Bounds on syntax nesting: the parser, the evaluator and the tree's
// destructor all recurse over it, so hostile templates must not nest deeper.
constexpr int kMaxExprHeight = 128;
constexpr int kMaxBlockNesting = 64;

struct Expr {
  ExprKind kind;
  uint32_t pos = 0;
  std::string name;              // Name, GetAttr, Filter, Test; Binary: the operator
  Value value;                   // Const
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter, Test
  ExprPtr star_args, star_kwargs;                       // *args, **kwargs of a call
  std::vector<std::string> ops;  // Compare: == != < <= > >= in notin
  int height = 1;                // longest path to a leaf
};

// ---- statements ----

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

enum class NodeKind : uint8_t { Text, Output, If, For, Set, SetBlock, Macro, FilterBlock, With, Break, Continue };

// Assignment target: a name, a tuple of names, or namespace.attr.
struct Target {
  std::vector<std::string> names;  // one name unless unpacking
  bool tuple = false;
  std::string attr;  // set when the target is names[0].attr
};

struct IfBranch {
  ExprPtr cond;  // null for else
  Body body;
};

struct Node {
  NodeKind kind;
  uint32_t pos = 0;
  std::string text;              // Text; Macro: the name
  ExprPtr expr;                  // Output, Set value, For iterable, SetBlock/FilterBlock filter
  ExprPtr cond;                  // For: the loop filter (for x in xs if cond)
  Target target;                 // Set, SetBlock, For
  std::vector<IfBranch> branches;  // If
  Body body, else_body;          // For, Macro, SetBlock, FilterBlock, With
  std::vector<std::string> params;    // Macro parameters; With: names
  std::vector<ExprPtr> defaults;      // Macro: defaults of the last params; With: values
};

struct Template {
  std::string source;  // normalized
  SourceMap map;
  Body body;
};

// Parses normalized source. Filters and tests are checked against the
// built-in tables at parse time where jinja2 checks them (outside if
// branches and conditional expressions), so templates fail where they would
// fail in transformers.
Result<std::unique_ptr<Template>> parse_template(std::string source, std::string name);

// Built-in tables (jinja_filters.cpp / jinja_tests.cpp).
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace kt::jinja
