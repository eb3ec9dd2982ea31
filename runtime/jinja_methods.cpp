// Python methods templates call on values: str (strip, split, startswith,
// ...), dict (get, items, keys, values) and list (index, count). transformers
// renders in jinja2's ImmutableSandboxedEnvironment, which refuses methods
// that mutate a list or dict (append, pop, update, ...); those are reported
// as unsafe here too, and only run in lenient mode (llama.cpp's behaviour).
#include <algorithm>

#include "runtime/jinja_eval.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

using Args = std::vector<std::optional<Value>>;

Result<std::optional<std::string>> opt_str(const Args& a, size_t k, std::string_view fname) {
  if (!a[k] || a[k]->is_none()) return std::optional<std::string>();
  if (!a[k]->is_string()) return err("TypeError: ", fname, "() argument must be str or None, not ", type_name(*a[k]));
  return std::optional<std::string>(a[k]->str());
}

int64_t opt_int(const Args& a, size_t k, int64_t dflt) {
  return a[k] && a[k]->is_integral() ? a[k]->as_int() : dflt;
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// ---- str ----

Result<Value> strip_impl(const Value& self, CallArgs& a, bool left, bool right, std::string_view name) {
  auto b = bind_args(a, {"chars"}, 0, name);
  if (!b) return b.error();
  auto chars = opt_str(*b, 0, name);
  if (!chars) return chars.error();
  return Value::string(text::strip(self.str(), *chars, left, right));
}
Result<Value> m_strip(Interp&, const Value& s, CallArgs& a) { return strip_impl(s, a, true, true, "strip"); }
Result<Value> m_lstrip(Interp&, const Value& s, CallArgs& a) { return strip_impl(s, a, true, false, "lstrip"); }
Result<Value> m_rstrip(Interp&, const Value& s, CallArgs& a) { return strip_impl(s, a, false, true, "rstrip"); }

Result<Value> split_impl(Interp& in, const Value& self, CallArgs& a, bool from_right) {
  const char* name = from_right ? "rsplit" : "split";
  auto b = bind_args(a, {"sep", "maxsplit"}, 0, name);
  if (!b) return b.error();
  auto sep = opt_str(*b, 0, name);
  if (!sep) return sep.error();
  if (*sep && (*sep)->empty()) return err("ValueError: empty separator");
  int64_t maxsplit = opt_int(*b, 1, -1);
  KT_TRY(in.step(self.str().size() >> 10));
  return str_list(from_right ? text::rsplit(self.str(), *sep, maxsplit) : text::split(self.str(), *sep, maxsplit));
}
Result<Value> m_split(Interp& in, const Value& s, CallArgs& a) { return split_impl(in, s, a, false); }
Result<Value> m_rsplit(Interp& in, const Value& s, CallArgs& a) { return split_impl(in, s, a, true); }

Result<Value> m_splitlines(Interp&, const Value& s, CallArgs& a) {
  auto b = bind_args(a, {"keepends"}, 0, "splitlines");
  if (!b) return b.error();
  return str_list(text::splitlines(s.str(), (*b)[0] && truthy(*(*b)[0])));
}

// startswith/endswith: a str or a tuple of str, optional start/end.
Result<Value> affix_impl(const Value& self, CallArgs& a, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  auto b = bind_args(a, {"affix", "start", "end"}, 1, name);
  if (!b) return b.error();
  std::string s = self.str();
  if ((*b)[1] || (*b)[2]) {
    std::optional<int64_t> st, en;
    if ((*b)[1] && (*b)[1]->is_integral()) st = (*b)[1]->as_int();
    if ((*b)[2] && (*b)[2]->is_integral()) en = (*b)[2]->as_int();
    s = text::slice(s, st, en, 1);
  }
  std::vector<Value> options;
  const Value& x = *(*b)[0];
  if (x.is_list() && x.seq_kind() == SeqKind::Tuple)
    options = x.list().items;
  else
    options.push_back(x);
  for (const Value& o : options) {
    if (!o.is_string())
      return err("TypeError: ", name, " first arg must be str or a tuple of str, not ", type_name(o));
    const std::string& t = o.str();
    bool hit = t.size() <= s.size() &&
               (prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0);
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}
Result<Value> m_startswith(Interp&, const Value& s, CallArgs& a) { return affix_impl(s, a, true); }
Result<Value> m_endswith(Interp&, const Value& s, CallArgs& a) { return affix_impl(s, a, false); }

Result<Value> m_upper(Interp&, const Value& s, CallArgs&) { return Value::string(text::upper(s.str())); }
Result<Value> m_lower(Interp&, const Value& s, CallArgs&) { return Value::string(text::lower(s.str())); }
Result<Value> m_title(Interp&, const Value& s, CallArgs&) { return Value::string(text::title(s.str())); }
Result<Value> m_capitalize(Interp&, const Value& s, CallArgs&) {
  return Value::string(text::capitalize(s.str()));
}

Result<Value> m_replace(Interp& in, const Value& s, CallArgs& a) {
  auto b = bind_args(a, {"old", "new", "count"}, 2, "replace");
  if (!b) return b.error();
  if (!(*b)[0]->is_string() || !(*b)[1]->is_string()) return err("TypeError: replace() arguments must be str");
  const std::string &old = (*b)[0]->str(), &with = (*b)[1]->str();
  int64_t count = opt_int(*b, 2, -1);
  KT_TRY(in.charge_bytes(text::replaced_size(s.str(), old, with, count)));
  std::string r = text::replace(s.str(), old, with, count);
  return Value::string(std::move(r));
}

Result<Value> find_impl(const Value& s, CallArgs& a, bool last, bool raise, std::string_view name) {
  auto b = bind_args(a, {"sub"}, 1, name);
  if (!b) return b.error();
  if (!(*b)[0]->is_string()) return err("TypeError: must be str, not ", type_name(*(*b)[0]));
  int64_t at = text::find(s.str(), (*b)[0]->str(), last);
  if (at < 0 && raise) return err("ValueError: substring not found");
  return Value::integer(at);
}
Result<Value> m_find(Interp&, const Value& s, CallArgs& a) { return find_impl(s, a, false, false, "find"); }
Result<Value> m_rfind(Interp&, const Value& s, CallArgs& a) { return find_impl(s, a, true, false, "rfind"); }
Result<Value> m_str_index(Interp&, const Value& s, CallArgs& a) { return find_impl(s, a, false, true, "index"); }

Result<Value> m_str_count(Interp&, const Value& s, CallArgs& a) {
  auto b = bind_args(a, {"sub"}, 1, "count");
  if (!b) return b.error();
  if (!(*b)[0]->is_string()) return err("TypeError: must be str, not ", type_name(*(*b)[0]));
  return Value::integer(text::count(s.str(), (*b)[0]->str()));
}

Result<Value> m_join(Interp& in, const Value& s, CallArgs& a) {
  auto b = bind_args(a, {"iterable"}, 1, "join");
  if (!b) return b.error();
  auto items = iterate(*(*b)[0]);
  if (!items) return items.error();
  std::string out;
  for (size_t k = 0; k < items->size(); ++k) {
    if (!(*items)[k].is_string())
      return err("TypeError: sequence item ", k, ": expected str instance, ", type_name((*items)[k]), " found");
    if (k) out += s.str();
    out += (*items)[k].str();
    KT_TRY(in.check_size(out.size()));
    KT_TRY(in.step((*items)[k].str().size() / kBytesPerStep));
  }
  return Value::string(std::move(out));
}

Result<Value> affix_remove(const Value& s, CallArgs& a, bool prefix) {
  auto b = bind_args(a, {"affix"}, 1, prefix ? "removeprefix" : "removesuffix");
  if (!b) return b.error();
  if (!(*b)[0]->is_string()) return err("TypeError: argument must be str");
  const std::string &x = s.str(), &t = (*b)[0]->str();
  if (t.size() > x.size()) return s;
  if (prefix && x.compare(0, t.size(), t) == 0) return Value::string(x.substr(t.size()));
  if (!prefix && x.compare(x.size() - t.size(), t.size(), t) == 0) return Value::string(x.substr(0, x.size() - t.size()));
  return s;
}
Result<Value> m_removeprefix(Interp&, const Value& s, CallArgs& a) { return affix_remove(s, a, true); }
Result<Value> m_removesuffix(Interp&, const Value& s, CallArgs& a) { return affix_remove(s, a, false); }

// str.isdigit/isalpha/... over ASCII classes; isspace over Unicode whitespace.
template <int Kind>
Result<Value> m_is(Interp&, const Value& s, CallArgs&) {
  auto cps = text::code_points(s.str());
  if (cps.empty()) return Value::boolean(false);
  bool cased = false;
  for (uint32_t c : cps) {
    bool digit = c >= '0' && c <= '9', lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    switch (Kind) {
      case 0: if (!digit) return Value::boolean(false); break;                 // isdigit
      case 1: if (!lower && !upper) return Value::boolean(false); break;       // isalpha
      case 2: if (!lower && !upper && !digit) return Value::boolean(false); break;  // isalnum
      case 3: if (!text::is_space(c)) return Value::boolean(false); break;     // isspace
      case 4: if (upper) return Value::boolean(false); cased |= lower; break;  // islower
      case 5: if (lower) return Value::boolean(false); cased |= upper; break;  // isupper
    }
  }
  return Value::boolean(Kind < 4 || cased);
}

// str.format with {} / {0} / {name} fields (no format specs).
Result<Value> m_format(Interp& in, const Value& s, CallArgs& a) {
  const std::string& f = s.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      else return err("ValueError: Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) return err("ValueError: Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      return err("ValueError: format specs are not supported by kt's renderer");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.pos.size()) return err("IndexError: Replacement index out of range");
      v = &a.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field.substr(0, 9));
      if (k >= a.pos.size()) return err("IndexError: Replacement index ", k, " out of range");
      v = &a.pos[k];
    } else {
      for (const auto& [name, x] : a.kw)
        if (name == field) v = &x;
      if (!v) return err("KeyError: '", field, "'");
    }
    auto str = to_str(*v);
    if (!str) return str.error();
    out += *str;
    KT_TRY(in.check_size(out.size()));
    KT_TRY(in.step(str->size() / kBytesPerStep));
    i = close;
  }
  return Value::string(std::move(out));
}

// ---- dict ----

Result<Value> m_get(Interp&, const Value& d, CallArgs& a) {
  auto b = bind_args(a, {"key", "default"}, 1, "get");
  if (!b) return b.error();
  if (const Value* v = d.dict().find(*(*b)[0])) return *v;
  return (*b)[1] ? *(*b)[1] : Value::none();
}

Result<Value> m_items(Interp&, const Value& d, CallArgs& a) {
  if (!a.pos.empty() || !a.kw.empty()) return err("TypeError: items() takes no arguments");
  std::vector<Value> pairs;
  for (const auto& [k, v] : d.dict().items()) pairs.push_back(Value::list({k, v}, SeqKind::Tuple));
  return Value::list(std::move(pairs));
}

Result<Value> m_keys(Interp&, const Value& d, CallArgs&) { return Value::list(*iterate(d)); }

Result<Value> m_values(Interp&, const Value& d, CallArgs&) {
  std::vector<Value> vals;
  for (const auto& kv : d.dict().items()) vals.push_back(kv.second);
  return Value::list(std::move(vals));
}

Result<Value> m_dict_copy(Interp&, const Value& d, CallArgs&) {
  return Value::dict(std::make_shared<DictData>(d.dict()));
}

// ---- list ----

Result<Value> m_list_index(Interp&, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"value"}, 1, "index");
  if (!b) return b.error();
  const auto& items = l.list().items;
  for (size_t k = 0; k < items.size(); ++k) {
    auto e = equals(items[k], *(*b)[0]);
    if (!e) return e.error();
    if (*e) return Value::integer(int64_t(k));
  }
  return err("ValueError: value is not in list");
}

Result<Value> m_list_count(Interp&, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"value"}, 1, "count");
  if (!b) return b.error();
  int64_t n = 0;
  for (const Value& x : l.list().items) {
    auto e = equals(x, *(*b)[0]);
    if (!e) return e.error();
    n += *e;
  }
  return Value::integer(n);
}

Result<Value> m_list_copy(Interp&, const Value& l, CallArgs&) { return Value::list(l.list().items, l.seq_kind()); }

// ---- lenient mutators (refused in the sandbox) ----

void track_list(Interp& in, const Value& l) {
  in.track(l.shared(), [](void* p) { static_cast<ListData*>(p)->items.clear(); });
}

Result<Value> m_append(Interp& in, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"item"}, 1, "append");
  if (!b) return b.error();
  KT_TRY(in.charge_bytes(l.list().items.size() * 16));
  track_list(in, l);
  l.list().items.push_back(*(*b)[0]);
  return Value::none();
}

Result<Value> m_extend(Interp& in, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"iterable"}, 1, "extend");
  if (!b) return b.error();
  auto items = iterate(*(*b)[0]);
  if (!items) return items.error();
  KT_TRY(in.charge_bytes((l.list().items.size() + items->size()) * 16));
  track_list(in, l);
  l.list().items.insert(l.list().items.end(), items->begin(), items->end());
  return Value::none();
}

Result<Value> m_insert(Interp& in, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"index", "item"}, 2, "insert");
  if (!b) return b.error();
  if (!(*b)[0]->is_integral()) return err("TypeError: list indices must be integers");
  auto& items = l.list().items;
  int64_t n = int64_t(items.size()), i = (*b)[0]->as_int();
  if (i < 0) i = std::max<int64_t>(i + n, 0);
  i = std::min(i, n);
  KT_TRY(in.charge_bytes(items.size() * 16));
  track_list(in, l);
  items.insert(items.begin() + i, *(*b)[1]);
  return Value::none();
}

Result<Value> m_list_pop(Interp&, const Value& l, CallArgs& a) {
  auto b = bind_args(a, {"index"}, 0, "pop");
  if (!b) return b.error();
  auto& items = l.list().items;
  int64_t n = int64_t(items.size()), i = opt_int(*b, 0, -1);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return err("IndexError: pop index out of range");
  Value v = items[size_t(i)];
  items.erase(items.begin() + i);
  return v;
}

Result<Value> m_dict_pop(Interp&, const Value& d, CallArgs& a) {
  auto b = bind_args(a, {"key", "default"}, 1, "pop");
  if (!b) return b.error();
  if (const Value* v = d.dict().find(*(*b)[0])) {
    Value out = *v;
    d.dict().erase(*(*b)[0]);
    return out;
  }
  if ((*b)[1]) return *(*b)[1];
  return err("KeyError: key not found");
}

Result<Value> m_update(Interp& in, const Value& d, CallArgs& a) {
  CallArgs one = a;
  if (one.pos.size() > 1) return err("TypeError: update expected at most 1 argument");
  in.track(d.shared(), [](void* p) { static_cast<DictData*>(p)->clear(); });
  if (!one.pos.empty()) {
    if (!one.pos[0].is_dict()) return err("TypeError: update() argument must be a mapping");
    for (const auto& [k, v] : one.pos[0].dict().items()) KT_TRY(d.dict().set(k, v));
  }
  for (const auto& [k, v] : one.kw) d.dict().set(std::string_view(k), v);
  return Value::none();
}

struct MethodEntry {
  std::string_view name;
  MethodFn fn;  // nullptr: exists but mutates (refused unless lenient)
  MethodFn lenient_fn;
};

constexpr MethodEntry kStrMethods[] = {
    {"strip", m_strip, nullptr},          {"lstrip", m_lstrip, nullptr},
    {"rstrip", m_rstrip, nullptr},        {"split", m_split, nullptr},
    {"rsplit", m_rsplit, nullptr},        {"splitlines", m_splitlines, nullptr},
    {"startswith", m_startswith, nullptr}, {"endswith", m_endswith, nullptr},
    {"upper", m_upper, nullptr},          {"lower", m_lower, nullptr},
    {"title", m_title, nullptr},          {"capitalize", m_capitalize, nullptr},
    {"replace", m_replace, nullptr},      {"find", m_find, nullptr},
    {"rfind", m_rfind, nullptr},          {"index", m_str_index, nullptr},
    {"count", m_str_count, nullptr},      {"join", m_join, nullptr},
    {"format", m_format, nullptr},        {"removeprefix", m_removeprefix, nullptr},
    {"removesuffix", m_removesuffix, nullptr}, {"isdigit", m_is<0>, nullptr},
    {"isalpha", m_is<1>, nullptr},        {"isalnum", m_is<2>, nullptr},
    {"isspace", m_is<3>, nullptr},        {"islower", m_is<4>, nullptr},
    {"isupper", m_is<5>, nullptr},
};

constexpr MethodEntry kDictMethods[] = {
    {"get", m_get, nullptr},           {"items", m_items, nullptr},
    {"keys", m_keys, nullptr},         {"values", m_values, nullptr},
    {"copy", m_dict_copy, nullptr},    {"pop", nullptr, m_dict_pop},
    {"update", nullptr, m_update},     {"popitem", nullptr, nullptr},
    {"setdefault", nullptr, nullptr},  {"clear", nullptr, nullptr},
};

constexpr MethodEntry kListMethods[] = {
    {"index", m_list_index, nullptr}, {"count", m_list_count, nullptr},
    {"copy", m_list_copy, nullptr},   {"append", nullptr, m_append},
    {"extend", nullptr, m_extend},    {"insert", nullptr, m_insert},
    {"pop", nullptr, m_list_pop},     {"remove", nullptr, nullptr},
    {"reverse", nullptr, nullptr},    {"sort", nullptr, nullptr},
    {"clear", nullptr, nullptr},
};

template <size_t N>
MethodFn lookup(const MethodEntry (&table)[N], std::string_view name, bool lenient, bool* unsafe) {
  for (const auto& m : table) {
    if (m.name != name) continue;
    if (m.fn) return m.fn;
    if (lenient && m.lenient_fn) return m.lenient_fn;
    *unsafe = true;
    return nullptr;
  }
  return nullptr;
}

}  // namespace

MethodFn find_method(const Value& obj, std::string_view name, bool lenient, bool* unsafe) {
  switch (obj.kind()) {
    case Kind::String: return lookup(kStrMethods, name, lenient, unsafe);
    case Kind::Dict: return lookup(kDictMethods, name, lenient, unsafe);
    case Kind::List:
      if (obj.seq_kind() == SeqKind::Generator) return nullptr;
      if (obj.seq_kind() == SeqKind::Tuple && name != "index" && name != "count") return nullptr;
      return lookup(kListMethods, name, lenient, unsafe);
    default: return nullptr;
  }
}

}  // namespace kt::jinja
