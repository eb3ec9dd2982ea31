// The chat-template parser's class, shared by jinja_parser.cpp (driver,
// statements, the filter-name check) and jinja_parse_expr.cpp (expressions).
// It mirrors jinja2 3.1's parser.py function by function so that precedence
// matches:
//   condexpr < or < and < not < compare (==, in, not in; chained)
//   < + - < ~ < * / // % < ** (left-assoc) < unary - + < postfix (. [] ())
//   < filters | and tests `is`, which bind to the unary operand.
// Internal to runtime/: other code calls parse_template (jinja_ast.h).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/jinja_ast.h"

namespace kt::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& toks, const SourceMap& map) : t_(toks), map_(map) {}

  Result<Body> parse_all();

 private:
  using Names = std::initializer_list<std::string_view>;

  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }

  Error fail(uint32_t pos, const std::string& msg) const;

  std::string describe(const Token& t) const;

  Status expect(Tok kind, std::string_view what);
  Status expect_op(std::string_view op);
  Result<std::string> expect_name();

  static ExprPtr make(ExprKind kind, uint32_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // Records the node's height and refuses trees too deep to walk safely.
  Result<ExprPtr> seal(ExprPtr e);

  // ---- statements ----

  Result<Body> subparse(Names end_tags);

  // Parses a body up to one of end_tags; the current token is then that tag
  // name (or past it when drop_needle).
  Result<Body> parse_statements(Names end_tags, bool drop_needle);

  Result<Body> parse_statement();

  static Body one(std::unique_ptr<Node> n);

  Result<Body> parse_statement_inner();

  static Result<Body> wrap(Result<std::unique_ptr<Node>> n);

  Result<std::unique_ptr<Node>> parse_for(std::unique_ptr<Node> node);

  Result<std::unique_ptr<Node>> parse_if(std::unique_ptr<Node> node);

  Result<std::unique_ptr<Node>> parse_set(std::unique_ptr<Node> node);

  Result<std::unique_ptr<Node>> parse_macro(std::unique_ptr<Node> node);

  Result<std::unique_ptr<Node>> parse_filter_block(std::unique_ptr<Node> node);

  Result<std::unique_ptr<Node>> parse_with(std::unique_ptr<Node> node);

  // name | name, name | (name, name) | ns.attr (with_namespace)
  Result<Target> parse_assign_target(bool with_namespace, Names extra_end);

  // ---- expressions ----

  bool tuple_end(Names extra_end) const;

  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr, Names extra_end,
                              bool explicit_parens);

  Result<ExprPtr> parse_expression(bool with_condexpr);

  Result<ExprPtr> parse_condexpr();

  Result<ExprPtr> binary(ExprKind kind, std::string op, ExprPtr l, ExprPtr r, uint32_t pos);

  Result<ExprPtr> parse_or();

  Result<ExprPtr> parse_and();

  Result<ExprPtr> parse_not();

  Result<ExprPtr> parse_compare();

  template <class Next>
  Result<ExprPtr> left_assoc(Next next, std::initializer_list<const char*> ops);

  Result<ExprPtr> parse_math1() { return left_assoc(&Parser::parse_concat, {"+", "-"}); }
  Result<ExprPtr> parse_concat() { return left_assoc(&Parser::parse_math2, {"~"}); }
  Result<ExprPtr> parse_math2() { return left_assoc(&Parser::parse_pow, {"*", "/", "//", "%"}); }
  Result<ExprPtr> parse_pow() { return left_assoc(&Parser::parse_unary_filtered, {"**"}); }
  Result<ExprPtr> parse_unary_filtered() { return parse_unary(true); }

  Result<ExprPtr> parse_unary(bool with_filter);

  Result<ExprPtr> parse_primary();

  Result<ExprPtr> parse_list();

  Result<ExprPtr> parse_dict();

  Result<ExprPtr> parse_postfix(ExprPtr node);

  Result<ExprPtr> parse_filter_expr(ExprPtr node);

  Result<ExprPtr> parse_subscript(ExprPtr node);

  // One subscript: an expression, or a slice start:stop:step (parts nullable).
  struct SubArg {
    bool slice = false;
    std::vector<ExprPtr> parts;
  };

  Result<SubArg> parse_subscribed();

  // (args, name=value, *args, **kwargs) into e's kids (after its first) and kwargs.
  Status parse_call_args(Expr& e);

  Result<ExprPtr> parse_call(ExprPtr node);

  Result<std::string> dotted_name();

  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline);

  Result<ExprPtr> parse_test(ExprPtr node);

  const std::vector<Token>& t_;
  const SourceMap& map_;
  size_t i_ = 0;
  int nesting_ = 0;       // block statements
  int nesting_expr_ = 0;  // unary/not recursion
  int loop_depth_ = 0;    // for break/continue
};

}  // namespace kt::jinja
