// Built-in filters on strings, numbers and JSON, as jinja2 3.1.2 defines
// them (filters.py), with the tojson transformers installs (json.dumps,
// ensure_ascii=False); the filter table lookup. Sequence filters are in
// jinja_filters_seq.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/jinja_filter_args.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

using namespace filter_args;
// ---- string filters ----

Result<Value> f_upper(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::upper(*s));
}
Result<Value> f_lower(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::lower(*s));
}
Result<Value> f_capitalize(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::capitalize(*s));
}
Result<Value> f_title(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::title(*s));
}

Result<Value> f_trim(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"chars"}, 0, "trim");
  if (!b) return b.error();
  std::optional<std::string> chars;
  if ((*b)[0] && !(*b)[0]->is_none()) {
    auto c = soft_str(*(*b)[0]);
    if (!c) return c.error();
    chars = *c;
  }
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::strip(*s, chars, true, true), v.is_string() && v.markup());
}

Result<Value> f_string(Interp&, const Value& v, CallArgs&) {
  if (v.is_string()) return v;
  auto s = to_str(v);
  if (!s) return s.error();
  return Value::string(std::move(*s));
}

Result<Value> f_safe(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(std::move(*s), true);
}

Result<Value> f_escape(Interp&, const Value& v, CallArgs&) {
  if (v.is_string() && v.markup()) return v;
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::html_escape(*s), true);
}

Result<Value> f_forceescape(Interp&, const Value& v, CallArgs&) {
  auto s = soft_str(v);
  if (!s) return s.error();
  return Value::string(text::html_escape(*s), true);
}

Result<Value> f_replace(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"old", "new", "count"}, 2, "replace");
  if (!b) return b.error();
  auto s = soft_str(v);
  auto o = soft_str(*(*b)[0]);
  auto n = soft_str(*(*b)[1]);
  if (!s || !o || !n) return err("TypeError: replace() arguments must be strings");
  int64_t count = (*b)[2] && (*b)[2]->is_integral() ? (*b)[2]->as_int() : -1;
  KT_TRY(in.charge_bytes(text::replaced_size(*s, *o, *n, count)));
  std::string r = text::replace(*s, *o, *n, count);
  return Value::string(std::move(r));
}

Result<Value> f_indent(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"width", "first", "blank"}, 0, "indent");
  if (!b) return b.error();
  Value width = arg_or(*b, 0, Value::integer(4));
  std::string pad;
  if (width.is_string()) {
    pad = width.str();
  } else if (width.is_integral()) {
    pad.assign(size_t(std::clamp<int64_t>(width.as_int(), 0, 4096)), ' ');
  } else {
    return err("TypeError: indent width must be an int or a str");
  }
  auto s = soft_str(v);
  if (!s) return s.error();
  // jinja2 appends a newline first so splitlines() keeps a trailing empty line.
  auto lines = text::splitlines(*s + "\n", false);
  KT_TRY(in.charge_bytes(s->size() + lines.size() * (pad.size() + 1)));
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) out += "\n";
    bool indent = k > 0 && (flag(*b, 2) || !lines[k].empty());
    if (indent) out += pad;
    out += lines[k];
  }
  if (flag(*b, 1)) out = pad + out;
  return Value::string(std::move(out));
}

Result<Value> f_truncate(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"length", "killwords", "end", "leeway"}, 0, "truncate");
  if (!b) return b.error();
  auto s = soft_str(v);
  if (!s) return s.error();
  int64_t length = arg_or(*b, 0, Value::integer(255)).as_int();
  std::string end = (*b)[2] && (*b)[2]->is_string() ? (*b)[2]->str() : "...";
  int64_t leeway = (*b)[3] && (*b)[3]->is_integral() ? (*b)[3]->as_int() : 5;
  int64_t n = int64_t(text::length(*s)), n_end = int64_t(text::length(end));
  if (n <= length + leeway) return Value::string(*s);
  std::string head = text::slice(*s, 0, std::max<int64_t>(length - n_end, 0), 1);
  if (!flag(*b, 1)) head = text::rsplit(head, std::string(" "), 1)[0];
  return Value::string(head + end);
}

Result<Value> f_format(Interp& in, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty())
    return err("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  auto s = soft_str(v);
  if (!s) return s.error();
  Value args;
  if (!a.kw.empty()) {
    auto d = std::make_shared<DictData>();
    for (auto& [k, x] : a.kw) d->set(std::string_view(k), x);
    args = Value::dict(d);
  } else {
    args = Value::list(a.pos, SeqKind::Tuple);
  }
  return binary_op(in, "%", Value::string(*s), args);
}

// ---- json ----

Result<Value> f_tojson(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0, "tojson");
  if (!b) return b.error();
  JsonStyle st;
  st.ensure_ascii = flag(*b, 0);
  if ((*b)[1] && !(*b)[1]->is_none()) {
    const Value& ind = *(*b)[1];
    if (ind.is_string())
      st.indent = ind.str();
    else if (ind.is_integral())
      st.indent = std::string(size_t(std::clamp<int64_t>(ind.as_int(), 0, 256)), ' ');
    else
      return err("TypeError: tojson indent must be an int or a str");
    st.item_sep = std::string(1, ',');  // json.dumps: "," before newlines when indenting
  }
  if ((*b)[2] && !(*b)[2]->is_none()) {
    const Value& sep = *(*b)[2];
    if (!sep.is_list() || sep.list().items.size() != 2 || !sep.list().items[0].is_string() ||
        !sep.list().items[1].is_string())
      return err("TypeError: tojson separators must be a pair of strings");
    st.item_sep = sep.list().items[0].str();
    st.key_sep = sep.list().items[1].str();
  }
  st.sort_keys = flag(*b, 3);
  st.allow_generators = in.config().lenient;
  auto s = to_json(v, st);
  if (!s) return s.error();
  KT_TRY(in.charge_bytes(s->size()));
  return Value::string(std::move(*s));
}

Result<Value> f_from_json(Interp&, const Value& v, CallArgs&) {
  if (!v.is_string()) return err("TypeError: from_json expects a string, got ", type_name(v));
  return parse_json(v.str());
}

Result<Value> f_center(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"width"}, 0, "center");
  if (!b) return b.error();
  auto s = soft_str(v);
  if (!s) return s.error();
  int64_t width = std::min<int64_t>(arg_or(*b, 0, Value::integer(80)).as_int(), 1 << 20);
  int64_t len = int64_t(text::length(*s));
  if (width <= len) return Value::string(*s);
  // CPython's str.center: the odd space goes left when width is odd.
  int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  KT_TRY(in.charge_bytes(s->size() + size_t(marg)));
  return Value::string(std::string(size_t(left), ' ') + *s + std::string(size_t(marg - left), ' '));
}

// ---- numbers ----

std::optional<double> parse_float(std::string s) {
  s = text::strip(s, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Result<Value> f_int(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"default", "base"}, 0, "int");
  if (!b) return b.error();
  Value dflt = arg_or(*b, 0, Value::integer(0));
  int base = int(arg_or(*b, 1, Value::integer(10)).as_int());
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return dflt;
    return Value::integer(int64_t(d));
  }
  if (v.is_string()) {
    std::string s = text::strip(v.str(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (!s.empty() && base >= 2 && base <= 36) {
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(s.c_str(), &end, base);
      if (end == s.c_str() + s.size() && errno == 0) return Value::integer(n);
    }
    if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
      return Value::integer(int64_t(*d));
  }
  return dflt;
}

Result<Value> f_float(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"default"}, 0, "float");
  if (!b) return b.error();
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string())
    if (auto d = parse_float(v.str())) return Value::number(*d);
  return arg_or(*b, 0, Value::number(0.0));
}

Result<Value> f_abs(Interp&, const Value& v, CallArgs&) {
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return err("OverflowError: integer result out of range");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  return err("TypeError: bad operand type for abs(): '", type_name(v), "'");
}

Result<Value> f_round(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"precision", "method"}, 0, "round");
  if (!b) return b.error();
  if (!v.is_number()) return err("TypeError: round() expects a number, got ", type_name(v));
  int64_t prec = std::clamp<int64_t>(arg_or(*b, 0, Value::integer(0)).as_int(), -20, 20);
  std::string method = (*b)[1] && (*b)[1]->is_string() ? (*b)[1]->str() : "common";
  double x = v.as_double(), scale = std::pow(10.0, double(prec));
  if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::number(std::floor(x * scale) / scale);
  if (method != "common") return err("FilterArgumentError: method must be common, ceil or floor");
  if (v.is_integral() && prec >= 0) return Value::integer(v.as_int());  // round(int, n) is exact
  if (prec < 0) return Value::number(std::nearbyint(x * scale) / scale);
  // Python rounds the exact binary value half-to-even; printf does the same.
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", int(prec), x);
  return Value::number(std::strtod(buf, nullptr));
}

constexpr FilterEntry kTextFilters[] = {
    {"abs", f_abs}, {"center", f_center}, {"capitalize", f_capitalize},
    {"e", f_escape}, {"escape", f_escape}, {"float", f_float},
    {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
    {"int", f_int}, {"lower", f_lower}, {"replace", f_replace},
    {"round", f_round}, {"safe", f_safe}, {"string", f_string},
    {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim},
    {"truncate", f_truncate}, {"upper", f_upper},
};

// jinja2 filters this renderer does not implement: known (so templates parse
// as in jinja2), but an error when used.
constexpr std::string_view kUnimplemented[] = {
    "filesizeformat", "groupby", "pprint", "random", "slice", "striptags",
    "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"};

Result<Value> f_unimplemented(Interp&, const Value&, CallArgs&) {
  return err("TemplateRuntimeError: this filter is not supported by kt's renderer");
}

}  // namespace

FilterFn find_filter(std::string_view name, bool lenient) {
  for (const auto& f : kTextFilters)
    if (f.name == name) return f.fn;
  for (const auto& f : sequence_filters())
    if (f.name == name) return f.fn;
  if (lenient && name == "from_json") return f_from_json;
  for (auto u : kUnimplemented)
    if (u == name) return f_unimplemented;
  return nullptr;
}

bool is_known_filter(std::string_view name) { return find_filter(name, true) != nullptr; }

}  // namespace kt::jinja
