// Built-in tests (`x is defined`, ...) as jinja2 3.1.2 defines them
// (tests.py), and the global functions a chat template can call: jinja2's
// range/dict/namespace/joiner plus transformers' raise_exception and
// strftime_now.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "runtime/jinja_eval.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

Result<Value> one_arg(const CallArgs& a, std::string_view name) {
  auto b = bind_args(a, {"other"}, 1, name);
  if (!b) return b.error();
  return *(*b)[0];
}

Result<bool> t_defined(Interp&, const Value& v, CallArgs&) { return !v.is_undefined(); }
Result<bool> t_undefined(Interp&, const Value& v, CallArgs&) { return v.is_undefined(); }
Result<bool> t_none(Interp&, const Value& v, CallArgs&) { return v.is_none(); }
Result<bool> t_boolean(Interp&, const Value& v, CallArgs&) { return v.is_bool(); }
Result<bool> t_true(Interp&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
Result<bool> t_false(Interp&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
Result<bool> t_integer(Interp&, const Value& v, CallArgs&) { return v.is_int(); }
Result<bool> t_float(Interp&, const Value& v, CallArgs&) { return v.is_float(); }
Result<bool> t_number(Interp&, const Value& v, CallArgs&) { return v.is_number(); }
Result<bool> t_string(Interp&, const Value& v, CallArgs&) { return v.is_string(); }
Result<bool> t_mapping(Interp&, const Value& v, CallArgs&) { return v.is_dict(); }
Result<bool> t_callable(Interp&, const Value& v, CallArgs&) { return v.is_callable(); }
Result<bool> t_escaped(Interp&, const Value& v, CallArgs&) { return v.is_string() && v.markup(); }

// len(v) and v.__getitem__ both exist: str, list, tuple, dict, and Undefined.
Result<bool> t_sequence(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_dict() || v.is_undefined() ||
         (v.is_list() && v.seq_kind() != SeqKind::Generator);
}

// iter(v) works: str, list, tuple, generator, dict, and Undefined.
Result<bool> t_iterable(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}

Result<bool> t_sameas(Interp&, const Value& v, CallArgs& a) {
  auto o = one_arg(a, "sameas");
  if (!o) return o.error();
  if (v.kind() != o->kind()) return false;
  switch (v.kind()) {
    case Kind::None: return true;
    case Kind::Bool: return v.as_bool() == o->as_bool();
    case Kind::Int: return v.as_int() == o->as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    default: return v.identity() == o->identity();
  }
}

Result<bool> case_test(const Value& v, bool upper) {
  auto s = to_str(v);
  if (!s) return s.error();
  bool cased = false;
  for (char c : *s) {
    if (c >= 'a' && c <= 'z') {
      if (upper) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (!upper) return false;
      cased = true;
    }
  }
  return cased;
}
Result<bool> t_lower(Interp&, const Value& v, CallArgs&) { return case_test(v, false); }
Result<bool> t_upper(Interp&, const Value& v, CallArgs&) { return case_test(v, true); }

Result<Value> int_mod(const Value& v, const Value& m) {
  if (!v.is_number() || !m.is_number())
    return err("TypeError: unsupported operand type(s) for %: '", type_name(v), "' and '", type_name(m), "'");
  if (m.as_double() == 0) return err("ZeroDivisionError: integer division or modulo by zero");
  if (v.is_integral() && m.is_integral()) {
    int64_t r = v.as_int() % m.as_int();
    if (r != 0 && ((r < 0) != (m.as_int() < 0))) r += m.as_int();
    return Value::integer(r);
  }
  return Value::number(std::fmod(v.as_double(), m.as_double()));
}

Result<bool> t_odd(Interp&, const Value& v, CallArgs&) {
  auto r = int_mod(v, Value::integer(2));
  if (!r) return r.error();
  return r->as_double() == 1;
}
Result<bool> t_even(Interp&, const Value& v, CallArgs&) {
  auto r = int_mod(v, Value::integer(2));
  if (!r) return r.error();
  return r->as_double() == 0;
}
Result<bool> t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  auto o = one_arg(a, "divisibleby");
  if (!o) return o.error();
  auto r = int_mod(v, *o);
  if (!r) return r.error();
  return r->as_double() == 0;
}

template <const char* Op>
Result<bool> t_compare(Interp&, const Value& v, CallArgs& a) {
  auto o = one_arg(a, Op);
  if (!o) return o.error();
  return compare_op(Op, v, *o);
}
constexpr char kEq[] = "==", kNe[] = "!=", kLt[] = "<", kLe[] = "<=", kGt[] = ">", kGe[] = ">=";

Result<bool> t_in(Interp&, const Value& v, CallArgs& a) {
  auto o = one_arg(a, "in");
  if (!o) return o.error();
  return contains(*o, v);
}

Result<bool> t_filter(Interp&, const Value& v, CallArgs&) {
  return v.is_string() && is_known_filter(v.str());
}
Result<bool> t_test(Interp&, const Value& v, CallArgs&) { return v.is_string() && is_known_test(v.str()); }

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"odd", t_odd},           {"even", t_even},           {"divisibleby", t_divisibleby},
    {"defined", t_defined},   {"undefined", t_undefined}, {"filter", t_filter},
    {"test", t_test},         {"none", t_none},           {"boolean", t_boolean},
    {"false", t_false},       {"true", t_true},           {"integer", t_integer},
    {"float", t_float},       {"lower", t_lower},         {"upper", t_upper},
    {"string", t_string},     {"mapping", t_mapping},     {"number", t_number},
    {"sequence", t_sequence}, {"iterable", t_iterable},   {"callable", t_callable},
    {"sameas", t_sameas},     {"escaped", t_escaped},     {"in", t_in},
    {"==", t_compare<kEq>},   {"eq", t_compare<kEq>},     {"equalto", t_compare<kEq>},
    {"!=", t_compare<kNe>},   {"ne", t_compare<kNe>},     {">", t_compare<kGt>},
    {"gt", t_compare<kGt>},   {"greaterthan", t_compare<kGt>}, {"ge", t_compare<kGe>},
    {">=", t_compare<kGe>},   {"<", t_compare<kLt>},      {"lt", t_compare<kLt>},
    {"lessthan", t_compare<kLt>}, {"<=", t_compare<kLe>}, {"le", t_compare<kLe>},
};

// ---- globals ----

// The sandbox refuses ranges longer than this (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Result<Value> g_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty()) return err("TypeError: range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    return err("TypeError: range expected 1 to 3 arguments, got ", a.pos.size());
  for (const Value& v : a.pos)
    if (!v.is_integral())
      return err("TypeError: '", type_name(v), "' object cannot be interpreted as an integer");
  int64_t start = 0, stop = 0, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) return err("ValueError: range() arg 3 must not be zero");
  // Compute the length in doubles first so huge bounds cannot overflow.
  double span = std::ceil((double(stop) - double(start)) / double(step));
  if (span > double(kMaxRange))
    return err("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
               kMaxRange, ").");
  int64_t n = span <= 0 ? 0 : int64_t(span);
  KT_TRY(in.step(uint64_t(n)));
  std::vector<Value> items;
  items.reserve(size_t(n));
  for (int64_t k = 0; k < n; ++k) items.push_back(Value::integer(start + k * step));
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs?, **kwargs), as namespace() and dict() take them.
Status fill_dict(DictData& d, const CallArgs& a, std::string_view fname) {
  if (a.pos.size() > 1) return err("TypeError: ", fname, " expected at most 1 positional argument");
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items()) KT_TRY(d.set(k, v));
    } else {
      auto items = iterate(src);
      if (!items) return items.error();
      for (const Value& pair : *items) {
        if (!pair.is_list() || pair.seq_kind() == SeqKind::Generator || pair.list().items.size() != 2)
          return err("ValueError: ", fname, " sequence elements must be pairs");
        KT_TRY(d.set(pair.list().items[0], pair.list().items[1]));
      }
    }
  }
  for (const auto& [k, v] : a.kw) d.set(std::string_view(k), v);
  return ok_status();
}

Result<Value> g_dict(Interp&, CallArgs& a) {
  auto d = std::make_shared<DictData>();
  KT_TRY(fill_dict(*d, a, "dict"));
  return Value::dict(std::move(d));
}

Result<Value> g_namespace(Interp& in, CallArgs& a) {
  auto ns = std::make_shared<NamespaceData>();
  KT_TRY(fill_dict(ns->attrs, a, "namespace"));
  in.track(ns, [](void* p) { static_cast<NamespaceData*>(p)->clear(); });
  return Value::object(std::move(ns));
}

Result<Value> g_joiner(Interp&, CallArgs& a) {
  auto b = bind_args(a, {"sep"}, 0, "joiner");
  if (!b) return b.error();
  Value sep = (*b)[0] ? *(*b)[0] : Value::string(", ");
  auto used = std::make_shared<bool>(false);
  return Value::function("joiner", [sep, used](Interp&, CallArgs&) -> Result<Value> {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return sep;
  });
}

Result<Value> g_raise_exception(Interp&, CallArgs& a) {
  auto b = bind_args(a, {"message"}, 1, "raise_exception");
  if (!b) return b.error();
  auto msg = to_str(*(*b)[0]);
  if (!msg) return msg.error();
  return err(*msg);
}

Result<Value> g_strftime_now(Interp& in, CallArgs& a) {
  auto b = bind_args(a, {"format"}, 1, "strftime_now");
  if (!b) return b.error();
  if (!(*b)[0]->is_string()) return err("TypeError: strftime_now() argument must be str");
  const std::string& fmt = (*b)[0]->str();
  if (fmt.size() > 256) return err("ValueError: strftime_now format too long");
  std::tm t = in.config().now;
  char buf[4096];
  size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &t);
  if (n == 0 && !fmt.empty()) return err("ValueError: strftime_now format produced no output");
  return Value::string(std::string(buf, n));
}

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

bool is_known_test(std::string_view name) { return find_test(name) != nullptr; }

void install_globals(Scope& globals) {
  globals.set("range", Value::function("range", g_range));
  globals.set("dict", Value::function("dict", g_dict));
  globals.set("namespace", Value::function("namespace", g_namespace));
  globals.set("joiner", Value::function("joiner", g_joiner));
  globals.set("raise_exception", Value::function("raise_exception", g_raise_exception));
  globals.set("strftime_now", Value::function("strftime_now", g_strftime_now));
}

}  // namespace kt::jinja
