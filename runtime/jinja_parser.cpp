// Parser driver and statements ({% for %}, {% if %}, {% set %}, {% macro %},
// ...), and the check of filter and test names jinja2 does at compile time.
#include <algorithm>

#include "runtime/jinja_parser.h"

namespace kt::jinja {

Result<Body> Parser::parse_all() {
  auto body = subparse({});
  if (!body) return body.error();
  if (cur().kind != Tok::Eof) return fail(cur().pos, "unexpected token");
  return body;
}

Error Parser::fail(uint32_t pos, const std::string& msg) const {
  return err(map_.where(pos), ": syntax error: ", msg);
}

std::string Parser::describe(const Token& t) const {
  switch (t.kind) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "'{{'";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "'{%'";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::Eof: return "end of template";
    case Tok::String: return "string literal";
    case Tok::Int:
    case Tok::Float: return "number";
    default: return "'" + t.text + "'";
  }
}

Status Parser::expect(Tok kind, std::string_view what) {
  if (cur().kind != kind) return fail(cur().pos, "expected " + std::string(what) + ", got " + describe(cur()));
  advance();
  return ok_status();
}

Status Parser::expect_op(std::string_view op) {
  if (!skip_op(op))
    return fail(cur().pos, "expected '" + std::string(op) + "', got " + describe(cur()));
  return ok_status();
}

Result<std::string> Parser::expect_name() {
  if (cur().kind != Tok::Name) return fail(cur().pos, "expected a name, got " + describe(cur()));
  std::string n = cur().text;
  advance();
  return n;
}

// Records the node's height and refuses trees too deep to walk safely.
Result<ExprPtr> Parser::seal(ExprPtr e) {
  int h = 0;
  auto see = [&](const ExprPtr& k) {
    if (k) h = std::max(h, k->height);
  };
  for (auto& k : e->kids) see(k);
  for (auto& kv : e->kwargs) see(kv.second);
  see(e->star_args);
  see(e->star_kwargs);
  e->height = h + 1;
  if (e->height > kMaxExprHeight) return fail(e->pos, "expression nested too deeply");
  return e;
}

Result<Body> Parser::subparse(Names end_tags) {
  Body body;
  while (true) {
    const Token& tok = cur();
    if (tok.kind == Tok::Eof) {
      if (end_tags.size() == 0) return body;
      std::string want;
      for (auto n : end_tags) want += (want.empty() ? "'" : " or '") + std::string(n) + "'";
      return fail(tok.pos, "unexpected end of template, expected " + want);
    }
    if (tok.kind == Tok::Data) {
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::Text;
      n->pos = tok.pos;
      n->text = tok.text;
      body.push_back(std::move(n));
      advance();
    } else if (tok.kind == Tok::VarBegin) {
      advance();
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::Output;
      n->pos = tok.pos;
      auto e = parse_tuple(false, true, {}, false);
      if (!e) return e.error();
      n->expr = std::move(*e);
      KT_TRY(expect(Tok::VarEnd, "end of print statement"));
      body.push_back(std::move(n));
    } else if (tok.kind == Tok::BlockBegin) {
      advance();
      if (cur().kind == Tok::Name &&
          std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end())
        return body;
      auto nodes = parse_statement();
      if (!nodes) return nodes.error();
      KT_TRY(expect(Tok::BlockEnd, "end of statement block"));
      for (auto& n : *nodes) body.push_back(std::move(n));
    } else {
      return fail(tok.pos, "unexpected " + describe(tok));
    }
  }
}

// Parses a body up to one of end_tags; the current token is then that tag
// name (or past it when drop_needle).
Result<Body> Parser::parse_statements(Names end_tags, bool drop_needle) {
  skip_op(":");
  KT_TRY(expect(Tok::BlockEnd, "end of statement block"));
  auto body = subparse(end_tags);
  if (!body) return body;
  if (drop_needle) advance();
  return body;
}

Result<Body> Parser::parse_statement() {
  const Token& tok = cur();
  if (tok.kind != Tok::Name) return fail(tok.pos, "tag name expected");
  if (++nesting_ > kMaxBlockNesting) return fail(tok.pos, "blocks nested too deeply");
  auto r = parse_statement_inner();
  --nesting_;
  return r;
}

Body Parser::one(std::unique_ptr<Node> n) {
  Body b;
  b.push_back(std::move(n));
  return b;
}

Result<Body> Parser::parse_statement_inner() {
  const Token tok = cur();
  const std::string& name = tok.text;
  auto node = std::make_unique<Node>();
  node->pos = tok.pos;
  if (name == "for") return wrap(parse_for(std::move(node)));
  if (name == "if") return wrap(parse_if(std::move(node)));
  if (name == "set") return wrap(parse_set(std::move(node)));
  if (name == "macro") return wrap(parse_macro(std::move(node)));
  if (name == "filter") return wrap(parse_filter_block(std::move(node)));
  if (name == "with") return wrap(parse_with(std::move(node)));
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) return fail(tok.pos, "'" + name + "' outside loop");
    advance();
    node->kind = name == "break" ? NodeKind::Break : NodeKind::Continue;
    return one(std::move(node));
  }
  if (name == "print") {
    advance();
    Body out;
    while (cur().kind != Tok::BlockEnd) {
      if (!out.empty()) KT_TRY(expect_op(","));
      auto e = parse_expression(true);
      if (!e) return e.error();
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::Output;
      n->pos = tok.pos;
      n->expr = std::move(*e);
      out.push_back(std::move(n));
    }
    return out;
  }
  static const char* unsupported[] = {"call", "block", "extends", "include", "import",
                                      "from", "autoescape"};
  for (const char* u : unsupported)
    if (name == u) return fail(tok.pos, "the '" + name + "' tag is not supported");
  return fail(tok.pos, "encountered unknown tag '" + name + "'");
}

Result<Body> Parser::wrap(Result<std::unique_ptr<Node>> n) {
  if (!n) return n.error();
  return one(std::move(*n));
}

Result<std::unique_ptr<Node>> Parser::parse_for(std::unique_ptr<Node> node) {
  node->kind = NodeKind::For;
  advance();
  auto target = parse_assign_target(false, {"in"});
  if (!target) return target.error();
  node->target = std::move(*target);
  if (!skip_name("in")) return fail(cur().pos, "expected 'in', got " + describe(cur()));
  auto iter = parse_tuple(false, false, {"recursive"}, false);
  if (!iter) return iter.error();
  node->expr = std::move(*iter);
  if (skip_name("if")) {
    auto c = parse_expression(true);
    if (!c) return c.error();
    node->cond = std::move(*c);
  }
  if (is_name("recursive")) return fail(cur().pos, "recursive loops are not supported");
  ++loop_depth_;
  auto body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (!body) return body.error();
  node->body = std::move(*body);
  bool has_else = is_name("else");
  advance();
  if (has_else) {
    auto eb = parse_statements({"endfor"}, true);
    if (!eb) return eb.error();
    node->else_body = std::move(*eb);
  }
  return node;
}

Result<std::unique_ptr<Node>> Parser::parse_if(std::unique_ptr<Node> node) {
  node->kind = NodeKind::If;
  advance();
  while (true) {
    auto c = parse_tuple(false, false, {}, false);
    if (!c) return c.error();
    auto body = parse_statements({"elif", "else", "endif"}, false);
    if (!body) return body.error();
    node->branches.push_back(IfBranch{std::move(*c), std::move(*body)});
    std::string tag = cur().text;
    advance();
    if (tag == "elif") continue;
    if (tag == "else") {
      auto eb = parse_statements({"endif"}, true);
      if (!eb) return eb.error();
      node->branches.push_back(IfBranch{nullptr, std::move(*eb)});
    }
    return node;
  }
}

Result<std::unique_ptr<Node>> Parser::parse_set(std::unique_ptr<Node> node) {
  advance();
  auto target = parse_assign_target(true, {});
  if (!target) return target.error();
  node->target = std::move(*target);
  if (skip_op("=")) {
    node->kind = NodeKind::Set;
    auto e = parse_tuple(false, true, {}, false);
    if (!e) return e.error();
    node->expr = std::move(*e);
    return node;
  }
  node->kind = NodeKind::SetBlock;
  if (is_op("|")) {
    auto f = parse_filter(nullptr, false);
    if (!f) return f.error();
    node->expr = std::move(*f);
  }
  auto body = parse_statements({"endset"}, true);
  if (!body) return body.error();
  node->body = std::move(*body);
  return node;
}

Result<std::unique_ptr<Node>> Parser::parse_macro(std::unique_ptr<Node> node) {
  node->kind = NodeKind::Macro;
  advance();
  auto name = expect_name();
  if (!name) return name.error();
  node->text = *name;
  KT_TRY(expect_op("("));
  while (!is_op(")")) {
    if (!node->params.empty()) KT_TRY(expect_op(","));
    auto p = expect_name();
    if (!p) return p.error();
    node->params.push_back(*p);
    if (skip_op("=")) {
      auto d = parse_expression(true);
      if (!d) return d.error();
      node->defaults.push_back(std::move(*d));
    } else if (!node->defaults.empty()) {
      return fail(cur().pos, "non-default argument follows default argument");
    }
  }
  advance();
  int saved = loop_depth_;
  loop_depth_ = 0;
  auto body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved;
  if (!body) return body.error();
  node->body = std::move(*body);
  return node;
}

Result<std::unique_ptr<Node>> Parser::parse_filter_block(std::unique_ptr<Node> node) {
  node->kind = NodeKind::FilterBlock;
  advance();
  auto f = parse_filter(nullptr, true);
  if (!f) return f.error();
  node->expr = std::move(*f);
  auto body = parse_statements({"endfilter"}, true);
  if (!body) return body.error();
  node->body = std::move(*body);
  return node;
}

Result<std::unique_ptr<Node>> Parser::parse_with(std::unique_ptr<Node> node) {
  node->kind = NodeKind::With;
  advance();
  while (cur().kind != Tok::BlockEnd) {
    if (!node->params.empty()) KT_TRY(expect_op(","));
    auto n = expect_name();
    if (!n) return n.error();
    KT_TRY(expect_op("="));
    auto v = parse_expression(true);
    if (!v) return v.error();
    node->params.push_back(*n);
    node->defaults.push_back(std::move(*v));
  }
  auto body = parse_statements({"endwith"}, true);
  if (!body) return body.error();
  node->body = std::move(*body);
  return node;
}

// name | name, name | (name, name) | ns.attr (with_namespace)
Result<Target> Parser::parse_assign_target(bool with_namespace, Names extra_end) {
  Target t;
  if (with_namespace && cur().kind == Tok::Name && look().kind == Tok::Op && look().text == ".") {
    t.names.push_back(cur().text);
    advance();
    advance();
    auto attr = expect_name();
    if (!attr) return attr.error();
    t.attr = *attr;
    return t;
  }
  bool paren = skip_op("(");
  while (true) {
    if (!t.names.empty()) {
      if (!skip_op(",")) break;
      t.tuple = true;
      if (tuple_end(extra_end) || is_op(")")) break;
    }
    auto n = expect_name();
    if (!n) return fail(cur().pos, "can only assign to names");
    static const char* reserved[] = {"true", "false", "none", "True", "False", "None"};
    for (const char* r : reserved)
      if (*n == r) return fail(cur().pos, "cannot assign to '" + *n + "'");
    t.names.push_back(*n);
  }
  if (paren) {
    KT_TRY(expect_op(")"));
    t.tuple = true;
  }
  return t;
}

namespace {
// jinja2 resolves filters and tests at compile time, except inside if
// statements and conditional expressions ("soft" frames), where a missing one
// only fails when evaluated. Loop, macro, set-block, filter-block and with
// bodies are hard frames again.
class NameChecker {
 public:
  explicit NameChecker(const SourceMap& map) : map_(map) {}

  Status body(const Body& b, bool soft) {
    for (const auto& n : b) KT_TRY(node(*n, soft));
    return ok_status();
  }

 private:
  Status node(const Node& n, bool soft) {
    switch (n.kind) {
      case NodeKind::Output:
      case NodeKind::Set: return expr(n.expr.get(), soft);
      case NodeKind::If:
        for (const auto& br : n.branches) {
          KT_TRY(expr(br.cond.get(), true));
          KT_TRY(body(br.body, true));
        }
        return ok_status();
      case NodeKind::For:
        KT_TRY(expr(n.expr.get(), soft));
        KT_TRY(expr(n.cond.get(), false));
        KT_TRY(body(n.body, false));
        return body(n.else_body, false);
      case NodeKind::Macro:
        for (const auto& d : n.defaults) KT_TRY(expr(d.get(), false));
        return body(n.body, false);
      case NodeKind::With:
        for (const auto& d : n.defaults) KT_TRY(expr(d.get(), soft));
        return body(n.body, false);
      case NodeKind::SetBlock:
      case NodeKind::FilterBlock:
        KT_TRY(expr(n.expr.get(), false));
        return body(n.body, false);
      default: return ok_status();
    }
  }

  Status expr(const Expr* e, bool soft) {
    if (!e) return ok_status();
    if (e->kind == ExprKind::CondExpr) soft = true;
    if (!soft && e->kind == ExprKind::Filter && !is_known_filter(e->name))
      return err(map_.where(e->pos), ": TemplateAssertionError: No filter named '", e->name, "'.");
    if (!soft && e->kind == ExprKind::Test && !is_known_test(e->name))
      return err(map_.where(e->pos), ": TemplateAssertionError: No test named '", e->name, "'.");
    for (const auto& k : e->kids) KT_TRY(expr(k.get(), soft));
    for (const auto& kv : e->kwargs) KT_TRY(expr(kv.second.get(), soft));
    KT_TRY(expr(e->star_args.get(), soft));
    return expr(e->star_kwargs.get(), soft);
  }

  const SourceMap& map_;
};

}  // namespace

Result<std::unique_ptr<Template>> parse_template(std::string source, std::string name) {
  auto tpl = std::unique_ptr<Template>(new Template{std::move(source), SourceMap(std::move(name), ""), {}});
  tpl->map = SourceMap(tpl->map.name, tpl->source);
  auto toks = tokenize(tpl->source, tpl->map);
  if (!toks) return toks.error();
  auto body = Parser(*toks, tpl->map).parse_all();
  if (!body) return body.error();
  tpl->body = std::move(*body);
  KT_TRY(NameChecker(tpl->map).body(tpl->body, false));
  return tpl;
}

}  // namespace kt::jinja
