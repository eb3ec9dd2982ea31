// Expression evaluation of the chat-template interpreter, with jinja2 3.1's
// runtime semantics (sandboxed, autoescape off): attribute and item lookup
// falling back to each other, Undefined for what is missing, calls of
// methods, filters, tests and macros.
#include "runtime/jinja_eval.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {

// ---- expressions ----

Result<Value> Interp::eval(const Expr& e, const ScopePtr& scope) {
  KT_TRY(step());
  if (++nesting_ > cfg_.max_nesting) {
    --nesting_;
    return err(tpl_.map.where(e.pos), ": RecursionError: template nested deeper than ",
               cfg_.max_nesting, " levels");
  }
  auto r = eval_inner(e, scope);
  --nesting_;
  if (!r) return located(e.pos, r.error());
  return r;
}

Result<Value> Interp::eval_inner(const Expr& e, const ScopePtr& scope) {
  auto kid = [&](size_t k) { return eval(*e.kids[k], scope); };
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: {
      const Value* v = scope->lookup(e.name);
      if (v) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.kids.size());
      for (size_t k = 0; k < e.kids.size(); ++k) {
        auto v = kid(k);
        if (!v) return v;
        items.push_back(std::move(*v));
      }
      return Value::list(std::move(items), e.kind == ExprKind::Tuple ? SeqKind::Tuple : SeqKind::List);
    }
    case ExprKind::Dict: {
      auto d = std::make_shared<DictData>();
      for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
        auto key = kid(k);
        if (!key) return key;
        auto val = kid(k + 1);
        if (!val) return val;
        KT_TRY(d->set(*key, std::move(*val)));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::GetAttr: {
      auto obj = kid(0);
      if (!obj) return obj;
      return get_attr(*obj, e.name);
    }
    case ExprKind::GetItem: {
      auto obj = kid(0);
      if (!obj) return obj;
      auto key = kid(1);
      if (!key) return key;
      return get_item(*obj, *key);
    }
    case ExprKind::Slice: return eval_slice(e, scope);
    case ExprKind::Call: return eval_call(e, scope);
    case ExprKind::Filter: {
      Value subject = slot_;
      if (e.kids[0]) {
        auto s = kid(0);
        if (!s) return s;
        subject = std::move(*s);
      }
      CallArgs args;
      KT_TRY(eval_args(e, 1, scope, args));
      return apply_filter(e.name, subject, args);
    }
    case ExprKind::Test: {
      auto s = kid(0);
      if (!s) return s;
      CallArgs args;
      KT_TRY(eval_args(e, 1, scope, args));
      auto t = apply_test(e.name, *s, args);
      if (!t) return t.error();
      return Value::boolean(*t);
    }
    case ExprKind::Not: {
      auto v = kid(0);
      if (!v) return v;
      return Value::boolean(!truthy(*v));
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      auto v = kid(0);
      if (!v) return v;
      if (v->is_undefined()) return undefined_error(*v);
      bool neg = e.kind == ExprKind::Neg;
      if (v->is_integral()) return Value::integer(neg ? -v->as_int() : v->as_int());
      if (v->is_float()) return Value::number(neg ? -v->as_double() : v->as_double());
      return err("TypeError: bad operand type for unary ", neg ? "-" : "+", ": '", type_name(*v), "'");
    }
    case ExprKind::Binary: {
      auto a = kid(0);
      if (!a) return a;
      auto b = kid(1);
      if (!b) return b;
      return binary_op(*this, e.name, *a, *b);
    }
    case ExprKind::And:
    case ExprKind::Or: {
      auto a = kid(0);
      if (!a) return a;
      if (truthy(*a) == (e.kind == ExprKind::Or)) return a;
      return kid(1);
    }
    case ExprKind::Compare: {
      auto left = kid(0);
      if (!left) return left;
      for (size_t k = 0; k < e.ops.size(); ++k) {
        auto right = kid(k + 1);
        if (!right) return right;
        auto r = compare_op(e.ops[k], *left, *right);
        if (!r) return r.error();
        if (!*r) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::CondExpr: {
      auto c = kid(0);
      if (!c) return c;
      if (truthy(*c)) return kid(1);
      if (e.kids[2]) return kid(2);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  return Value();
}

Status Interp::eval_args(const Expr& e, size_t first, const ScopePtr& scope, CallArgs& args) {
  for (size_t k = first; k < e.kids.size(); ++k) {
    auto v = eval(*e.kids[k], scope);
    if (!v) return v.error();
    args.pos.push_back(std::move(*v));
  }
  for (const auto& [name, x] : e.kwargs) {
    auto v = eval(*x, scope);
    if (!v) return v.error();
    args.kw.emplace_back(name, std::move(*v));
  }
  if (e.star_args) {
    auto v = eval(*e.star_args, scope);
    if (!v) return v.error();
    auto items = iterate(*v);
    if (!items) return items.error();
    for (auto& it : *items) args.pos.push_back(std::move(it));
  }
  if (e.star_kwargs) {
    auto v = eval(*e.star_kwargs, scope);
    if (!v) return v.error();
    if (!v->is_dict()) return err("TypeError: argument after ** must be a mapping");
    for (const auto& [k, val] : v->dict().items()) {
      if (!k.is_string()) return err("TypeError: keywords must be strings");
      args.kw.emplace_back(k.str(), val);
    }
  }
  return ok_status();
}

Result<Value> Interp::eval_call(const Expr& e, const ScopePtr& scope) {
  const Expr& callee = *e.kids[0];
  Value fn;
  if (callee.kind == ExprKind::GetAttr) {
    // obj.method(...) calls the method directly, without a bound-method value.
    auto obj = eval(*callee.kids[0], scope);
    if (!obj) return obj;
    bool unsafe = false;
    if (MethodFn m = obj->is_undefined() ? nullptr : find_method(*obj, callee.name, cfg_.lenient, &unsafe)) {
      CallArgs args;
      KT_TRY(eval_args(e, 1, scope, args));
      KT_TRY(step());
      return m(*this, *obj, args);
    }
    auto f = get_attr(*obj, callee.name);
    if (!f) return located(callee.pos, f.error());
    fn = std::move(*f);
  } else {
    auto f = eval(callee, scope);
    if (!f) return f;
    fn = std::move(*f);
  }
  CallArgs args;
  KT_TRY(eval_args(e, 1, scope, args));
  return call(fn, args);
}

Result<Value> Interp::eval_slice(const Expr& e, const ScopePtr& scope) {
  auto obj = eval(*e.kids[0], scope);
  if (!obj) return obj;
  std::optional<int64_t> bounds[3];
  bool bad = false;
  for (int k = 0; k < 3; ++k) {
    if (!e.kids[size_t(k) + 1]) continue;
    auto v = eval(*e.kids[size_t(k) + 1], scope);
    if (!v) return v;
    if (v->is_integral())
      bounds[k] = v->as_int();
    else if (!v->is_none())
      bad = true;  // TypeError inside getitem: jinja2 turns it into Undefined
  }
  int64_t stride = bounds[2].value_or(1);
  if (obj->is_undefined()) return undefined_error(*obj);
  if (stride == 0) return err("ValueError: slice step cannot be zero");
  if (!bad && obj->is_string()) {
    std::string s = text::slice(obj->str(), bounds[0], bounds[1], stride);
    return Value::string(std::move(s), obj->markup());
  }
  if (!bad && obj->is_list() && obj->seq_kind() != SeqKind::Generator) {
    const auto& items = obj->list().items;
    std::vector<Value> out;
    for (int64_t i : text::slice_indices(int64_t(items.size()), bounds[0], bounds[1], stride))
      out.push_back(items[size_t(i)]);
    return Value::list(std::move(out), obj->seq_kind());
  }
  return Value::undefined(std::string("'").append(object_desc(*obj)).append("' cannot be sliced"));
}

// ---- services ----

Result<Value> Interp::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_callable()) return err("TypeError: '", type_name(fn), "' object is not callable");
  KT_TRY(step());
  return fn.fn().fn(*this, args);
}

Result<Value> Interp::apply_filter(std::string_view name, const Value& subject, CallArgs& args) {
  FilterFn f = find_filter(name, cfg_.lenient);
  if (!f) return err("TemplateRuntimeError: No filter named '", name, "' found.");
  return f(*this, subject, args);
}

Result<bool> Interp::apply_test(std::string_view name, const Value& subject, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) return err("TemplateRuntimeError: No test named '", name, "' found.");
  return t(*this, subject, args);
}

Result<Value> Interp::get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return undefined_error(obj);
  bool unsafe = false;
  if (MethodFn m = find_method(obj, name, cfg_.lenient, &unsafe)) {
    Value self = obj;
    return Value::function(std::string(name),
                           [m, self](Interp& in, CallArgs& args) { return m(in, self, args); });
  }
  if (unsafe)
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                                "' object is unsafe.",
                            true);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(name)) return *v;
  } else if (obj.is_object()) {
    return obj.object().get(name);
  }
  return Value::undefined(std::string("'").append(object_desc(obj)).append("' has no attribute '").append(name).append("'"));
}

Result<Value> Interp::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if (key.is_integral() && obj.is_list() && obj.seq_kind() != SeqKind::Generator) {
    const auto& items = obj.list().items;
    int64_t i = key.as_int(), n = int64_t(items.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return items[size_t(i)];
  } else if (key.is_integral() && obj.is_string()) {
    if (auto c = text::char_at(obj.str(), key.as_int())) return Value::string(std::move(*c));
  }
  // obj[key] failed: jinja2 falls back to getattr for string keys.
  if (key.is_string()) return get_attr(obj, key.str());
  auto k = to_repr(key);
  return Value::undefined(object_desc(obj) + " has no element " + (k ? *k : std::string("?")));
}

}  // namespace kt::jinja
