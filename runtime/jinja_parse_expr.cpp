// Expressions of the chat-template parser (precedence: see jinja_parser.h).
#include <algorithm>

#include "runtime/jinja_parser.h"

namespace kt::jinja {

bool Parser::tuple_end(Names extra_end) const {
  if (cur().kind == Tok::VarEnd || cur().kind == Tok::BlockEnd || is_op(")")) return true;
  for (auto n : extra_end)
    if (is_name(n)) return true;
  return false;
}

Result<ExprPtr> Parser::parse_tuple(bool simplified, bool with_condexpr, Names extra_end,
                                    bool explicit_parens) {
  uint32_t pos = cur().pos;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) KT_TRY(expect_op(","));
    if (tuple_end(extra_end)) break;
    auto e = simplified ? parse_primary() : parse_expression(with_condexpr);
    if (!e) return e;
    args.push_back(std::move(*e));
    if (is_op(","))
      is_tuple = true;
    else
      break;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) return fail(cur().pos, "expected an expression, got " + describe(cur()));
  }
  auto t = make(ExprKind::Tuple, pos);
  t->kids = std::move(args);
  return seal(std::move(t));
}

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> Parser::parse_condexpr() {
  auto e1 = parse_or();
  if (!e1) return e1;
  ExprPtr expr = std::move(*e1);
  while (is_name("if")) {
    uint32_t pos = cur().pos;
    advance();
    auto e2 = parse_or();
    if (!e2) return e2;
    ExprPtr e3;
    if (skip_name("else")) {
      auto r = parse_condexpr();
      if (!r) return r;
      e3 = std::move(*r);
    }
    auto c = make(ExprKind::CondExpr, pos);
    c->kids.push_back(std::move(*e2));
    c->kids.push_back(std::move(expr));
    c->kids.push_back(std::move(e3));
    auto sealed = seal(std::move(c));
    if (!sealed) return sealed;
    expr = std::move(*sealed);
  }
  return expr;
}

Result<ExprPtr> Parser::binary(ExprKind kind, std::string op, ExprPtr l, ExprPtr r, uint32_t pos) {
  auto e = make(kind, pos);
  e->name = std::move(op);
  e->kids.push_back(std::move(l));
  e->kids.push_back(std::move(r));
  return seal(std::move(e));
}

Result<ExprPtr> Parser::parse_or() {
  auto left = parse_and();
  while (left && is_name("or")) {
    uint32_t pos = cur().pos;
    advance();
    auto right = parse_and();
    if (!right) return right;
    left = binary(ExprKind::Or, "or", std::move(*left), std::move(*right), pos);
  }
  return left;
}

Result<ExprPtr> Parser::parse_and() {
  auto left = parse_not();
  while (left && is_name("and")) {
    uint32_t pos = cur().pos;
    advance();
    auto right = parse_not();
    if (!right) return right;
    left = binary(ExprKind::And, "and", std::move(*left), std::move(*right), pos);
  }
  return left;
}

Result<ExprPtr> Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  uint32_t pos = cur().pos;
  advance();
  if (++nesting_expr_ > kMaxExprHeight) return fail(pos, "expression nested too deeply");
  auto inner = parse_not();
  --nesting_expr_;
  if (!inner) return inner;
  auto e = make(ExprKind::Not, pos);
  e->kids.push_back(std::move(*inner));
  return seal(std::move(e));
}

Result<ExprPtr> Parser::parse_compare() {
  uint32_t pos = cur().pos;
  auto first = parse_math1();
  if (!first) return first;
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().kind == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      advance();
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && look().kind == Tok::Name && look().text == "in") {
      advance();
      advance();
      op = "notin";
    } else {
      break;
    }
    auto rhs = parse_math1();
    if (!rhs) return rhs;
    if (!cmp) {
      cmp = make(ExprKind::Compare, pos);
      cmp->kids.push_back(std::move(*first));
    }
    cmp->ops.push_back(op);
    cmp->kids.push_back(std::move(*rhs));
  }
  if (!cmp) return first;
  return seal(std::move(cmp));
}

template <class Next>
Result<ExprPtr> Parser::left_assoc(Next next, std::initializer_list<const char*> ops) {
  auto left = (this->*next)();
  while (left) {
    const char* hit = nullptr;
    for (const char* op : ops)
      if (is_op(op)) hit = op;
    if (!hit) break;
    uint32_t pos = cur().pos;
    advance();
    auto right = (this->*next)();
    if (!right) return right;
    left = binary(ExprKind::Binary, hit, std::move(*left), std::move(*right), pos);
  }
  return left;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  uint32_t pos = cur().pos;
  if (++nesting_expr_ > kMaxExprHeight) return fail(pos, "expression nested too deeply");
  Result<ExprPtr> node = ExprPtr();
  if (is_op("-") || is_op("+")) {
    ExprKind kind = is_op("-") ? ExprKind::Neg : ExprKind::Pos;
    advance();
    auto inner = parse_unary(false);
    if (!inner) return inner;
    auto e = make(kind, pos);
    e->kids.push_back(std::move(*inner));
    node = seal(std::move(e));
  } else {
    node = parse_primary();
  }
  if (node) node = parse_postfix(std::move(*node));
  if (node && with_filter) node = parse_filter_expr(std::move(*node));
  --nesting_expr_;
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token tok = cur();
  auto constant = [&](Value v) {
    auto e = make(ExprKind::Const, tok.pos);
    e->value = std::move(v);
    return e;
  };
  switch (tok.kind) {
    case Tok::Name: {
      advance();
      if (tok.text == "true" || tok.text == "True") return constant(Value::boolean(true));
      if (tok.text == "false" || tok.text == "False") return constant(Value::boolean(false));
      if (tok.text == "none" || tok.text == "None") return constant(Value::none());
      auto e = make(ExprKind::Name, tok.pos);
      e->name = tok.text;
      return e;
    }
    case Tok::String: {
      std::string s;
      while (cur().kind == Tok::String) {
        s += cur().text;
        advance();
      }
      return constant(Value::string(std::move(s)));
    }
    case Tok::Int: advance(); return constant(Value::integer(tok.ival));
    case Tok::Float: advance(); return constant(Value::number(tok.fval));
    case Tok::Op:
      if (tok.text == "(") {
        advance();
        auto e = parse_tuple(false, true, {}, true);
        if (!e) return e;
        KT_TRY(expect_op(")"));
        return e;
      }
      if (tok.text == "[") return parse_list();
      if (tok.text == "{") return parse_dict();
      break;
    default: break;
  }
  return fail(tok.pos, "unexpected " + describe(tok));
}

Result<ExprPtr> Parser::parse_list() {
  auto e = make(ExprKind::List, cur().pos);
  advance();
  while (!is_op("]")) {
    if (!e->kids.empty()) KT_TRY(expect_op(","));
    if (is_op("]")) break;
    auto item = parse_expression(true);
    if (!item) return item;
    e->kids.push_back(std::move(*item));
  }
  advance();
  return seal(std::move(e));
}

Result<ExprPtr> Parser::parse_dict() {
  auto e = make(ExprKind::Dict, cur().pos);
  advance();
  while (!is_op("}")) {
    if (!e->kids.empty()) KT_TRY(expect_op(","));
    if (is_op("}")) break;
    auto key = parse_expression(true);
    if (!key) return key;
    KT_TRY(expect_op(":"));
    auto value = parse_expression(true);
    if (!value) return value;
    e->kids.push_back(std::move(*key));
    e->kids.push_back(std::move(*value));
  }
  advance();
  return seal(std::move(e));
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    Result<ExprPtr> next = ExprPtr();
    if (is_op(".") || is_op("["))
      next = parse_subscript(std::move(node));
    else if (is_op("("))
      next = parse_call(std::move(node));
    else
      return node;
    if (!next) return next;
    node = std::move(*next);
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    Result<ExprPtr> next = ExprPtr();
    if (is_op("|"))
      next = parse_filter(std::move(node), false);
    else if (is_name("is"))
      next = parse_test(std::move(node));
    else if (is_op("("))
      next = parse_call(std::move(node));
    else
      return node;
    if (!next) return next;
    node = std::move(*next);
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  uint32_t pos = cur().pos;
  if (skip_op(".")) {
    const Token tok = cur();
    advance();
    if (tok.kind == Tok::Name) {
      auto e = make(ExprKind::GetAttr, pos);
      e->name = tok.text;
      e->kids.push_back(std::move(node));
      return seal(std::move(e));
    }
    if (tok.kind != Tok::Int) return fail(tok.pos, "expected name or number");
    auto idx = make(ExprKind::Const, tok.pos);
    idx->value = Value::integer(tok.ival);
    auto e = make(ExprKind::GetItem, pos);
    e->kids.push_back(std::move(node));
    e->kids.push_back(std::move(idx));
    return seal(std::move(e));
  }
  advance();  // [
  std::vector<SubArg> args;
  while (!is_op("]")) {
    if (!args.empty()) KT_TRY(expect_op(","));
    auto a = parse_subscribed();
    if (!a) return a.error();
    args.push_back(std::move(*a));
  }
  advance();  // ]
  if (args.empty()) return fail(pos, "expected subscript expression");
  if (args.size() == 1 && args[0].slice) {
    auto e = make(ExprKind::Slice, pos);
    e->kids.push_back(std::move(node));
    for (auto& p : args[0].parts) e->kids.push_back(std::move(p));
    return seal(std::move(e));
  }
  auto e = make(ExprKind::GetItem, pos);
  e->kids.push_back(std::move(node));
  if (args.size() == 1) {
    e->kids.push_back(std::move(args[0].parts[0]));
    return seal(std::move(e));
  }
  auto t = make(ExprKind::Tuple, pos);
  for (auto& a : args) {
    if (a.slice) return fail(pos, "a slice cannot be part of a tuple subscript");
    t->kids.push_back(std::move(a.parts[0]));
  }
  auto sealed = seal(std::move(t));
  if (!sealed) return sealed;
  e->kids.push_back(std::move(*sealed));
  return seal(std::move(e));
}

Result<Parser::SubArg> Parser::parse_subscribed() {
  SubArg a;
  auto optional_expr = [&]() -> Result<ExprPtr> {
    if (is_op("]") || is_op(",") || is_op(":")) return ExprPtr();
    return parse_expression(true);
  };
  if (skip_op(":")) {
    a.parts.push_back(nullptr);
  } else {
    auto e = parse_expression(true);
    if (!e) return e.error();
    a.parts.push_back(std::move(*e));
    if (!skip_op(":")) return a;
  }
  a.slice = true;
  auto stop = optional_expr();
  if (!stop) return stop.error();
  a.parts.push_back(std::move(*stop));
  ExprPtr step;
  if (skip_op(":")) {
    auto st = optional_expr();
    if (!st) return st.error();
    step = std::move(*st);
  }
  a.parts.push_back(std::move(step));
  return a;
}

// (args, name=value, *args, **kwargs) into e's kids (after its first) and kwargs.
Status Parser::parse_call_args(Expr& e) {
  uint32_t pos = cur().pos;
  KT_TRY(expect_op("("));
  bool need_comma = false;
  while (!is_op(")")) {
    if (need_comma) {
      KT_TRY(expect_op(","));
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      if (e.star_args || e.star_kwargs) return fail(pos, "invalid syntax for function call expression");
      auto v = parse_expression(true);
      if (!v) return v.error();
      e.star_args = std::move(*v);
    } else if (skip_op("**")) {
      if (e.star_kwargs) return fail(pos, "invalid syntax for function call expression");
      auto v = parse_expression(true);
      if (!v) return v.error();
      e.star_kwargs = std::move(*v);
    } else if (cur().kind == Tok::Name && look().kind == Tok::Op && look().text == "=") {
      if (e.star_kwargs) return fail(pos, "invalid syntax for function call expression");
      std::string key = cur().text;
      advance();
      advance();
      auto v = parse_expression(true);
      if (!v) return v.error();
      e.kwargs.emplace_back(std::move(key), std::move(*v));
    } else {
      if (e.star_args || e.star_kwargs || !e.kwargs.empty())
        return fail(pos, "invalid syntax for function call expression");
      auto v = parse_expression(true);
      if (!v) return v.error();
      e.kids.push_back(std::move(*v));
    }
    need_comma = true;
  }
  advance();
  return ok_status();
}

Result<ExprPtr> Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::Call, cur().pos);
  e->kids.push_back(std::move(node));
  KT_TRY(parse_call_args(*e));
  return seal(std::move(e));
}

Result<std::string> Parser::dotted_name() {
  auto name = expect_name();
  if (!name) return name;
  while (skip_op(".")) {
    auto more = expect_name();
    if (!more) return more;
    *name += "." + *more;
  }
  return name;
}

Result<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    uint32_t pos = cur().pos;
    auto name = dotted_name();
    if (!name) return name.error();
    auto e = make(ExprKind::Filter, pos);
    e->name = *name;
    e->kids.push_back(std::move(node));
    if (is_op("(")) KT_TRY(parse_call_args(*e));
    auto sealed = seal(std::move(e));
    if (!sealed) return sealed;
    node = std::move(*sealed);
  }
  return node;
}

Result<ExprPtr> Parser::parse_test(ExprPtr node) {
  uint32_t pos = cur().pos;
  advance();  // is
  bool negated = skip_name("not");
  auto name = dotted_name();
  if (!name) return name.error();
  auto e = make(ExprKind::Test, pos);
  e->name = *name;
  e->kids.push_back(std::move(node));
  const Token& t = cur();
  bool arg_start = t.kind == Tok::Name || t.kind == Tok::String || t.kind == Tok::Int ||
                   t.kind == Tok::Float || is_op("(") || is_op("[") || is_op("{");
  if (is_op("(")) {
    KT_TRY(parse_call_args(*e));
  } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) return fail(t.pos, "you cannot chain multiple tests with is");
    auto arg = parse_primary();
    if (!arg) return arg;
    auto full = parse_postfix(std::move(*arg));
    if (!full) return full;
    e->kids.push_back(std::move(*full));
  }
  auto sealed = seal(std::move(e));
  if (!sealed || !negated) return sealed;
  auto n = make(ExprKind::Not, pos);
  n->kids.push_back(std::move(*sealed));
  return seal(std::move(n));
}

}  // namespace kt::jinja
