// Values with Python semantics (see jinja_value.h); JSON lives in jinja_json.cpp.
#include "runtime/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

thread_local WalkBudget* t_walk = nullptr;

Error too_deep() { return err("RecursionError: value nested deeper than ", kMaxValueDepth); }

// Python hashes 1, 1.0 and True alike; strings go to their own index.
std::optional<std::string> other_key(const Value& k, int depth = 0) {
  if (depth > kMaxValueDepth) return std::nullopt;
  switch (k.kind()) {
    case Kind::None: return std::string("n");
    case Kind::Bool:
    case Kind::Int: return std::string("i").append(std::to_string(k.as_int()));
    case Kind::Float: {
      double f = k.as_double();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
        return std::string("i").append(std::to_string(int64_t(f)));
      return std::string("f").append(format_float(f));
    }
    case Kind::String: return "s" + k.str();
    case Kind::List: {
      if (k.seq_kind() != SeqKind::Tuple) return std::nullopt;
      std::string key = "t";
      for (const Value& item : k.list().items) {
        auto sub = other_key(item, depth + 1);
        if (!sub) return std::nullopt;
        key += std::to_string(sub->size()) + ":" + *sub;
      }
      return key;
    }
    default: return std::nullopt;
  }
}

Result<std::string> repr_at(const Value& v, int depth);

Result<std::string> seq_repr(const Value& v, int depth) {
  const ListData& l = v.list();
  if (l.kind == SeqKind::Generator) return std::string("<generator object>");
  bool tuple = l.kind == SeqKind::Tuple;
  std::string out = tuple ? "(" : "[";
  for (size_t k = 0; k < l.items.size(); ++k) {
    if (k) out += ", ";
    auto r = repr_at(l.items[k], depth + 1);
    if (!r) return r.error();
    out += *r;
    KT_TRY(walk_size(out.size()));
  }
  if (tuple && l.items.size() == 1) out += ",";
  out += tuple ? ")" : "]";
  return out;
}

Result<std::string> dict_repr(const DictData& d, int depth) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, val] : d.items()) {
    if (!first) out += ", ";
    first = false;
    auto rk = repr_at(k, depth + 1);
    if (!rk) return rk.error();
    auto rv = repr_at(val, depth + 1);
    if (!rv) return rv.error();
    out += *rk + ": " + *rv;
    KT_TRY(walk_size(out.size()));
  }
  return out + "}";
}

Result<std::string> str_at(const Value& v, int depth) {
  if (depth > kMaxValueDepth) return too_deep();
  KT_TRY(walk_step());
  switch (v.kind()) {
    case Kind::Undefined: return std::string();
    case Kind::None: return std::string("None");
    case Kind::Bool: return std::string(v.as_bool() ? "True" : "False");
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return format_float(v.as_double());
    case Kind::String: return v.str();
    case Kind::List: return seq_repr(v, depth);
    case Kind::Dict: return dict_repr(v.dict(), depth);
    case Kind::Object: return v.object().repr(depth + 1);
    case Kind::Callable:
      return v.fn().is_macro ? "<Macro '" + v.fn().name + "'>" : "<function " + v.fn().name + ">";
  }
  return std::string();
}

Result<std::string> repr_at(const Value& v, int depth) {
  if (v.is_undefined()) return std::string("Undefined");
  if (v.is_string())
    return v.markup() ? "Markup(" + text::repr(v.str()) + ")" : text::repr(v.str());
  return str_at(v, depth);
}

Result<bool> equals_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return too_deep();
  KT_TRY(walk_step());
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      const ListData &x = a.list(), &y = b.list();
      if (&x == &y) return true;
      if (x.kind != y.kind || x.kind == SeqKind::Generator || x.items.size() != y.items.size())
        return false;
      for (size_t k = 0; k < x.items.size(); ++k) {
        auto e = equals_at(x.items[k], y.items[k], depth + 1);
        if (!e || !*e) return e;
      }
      return true;
    }
    case Kind::Dict: {
      const DictData &x = a.dict(), &y = b.dict();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (const auto& [k, val] : x.items()) {
        const Value* other = y.find(k);
        if (!other) return false;
        auto e = equals_at(val, *other, depth + 1);
        if (!e || !*e) return e;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

Result<int> compare_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return too_deep();
  KT_TRY(walk_step());
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral())
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
      a.seq_kind() != SeqKind::Generator) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      auto e = equals_at(x[k], y[k], depth + 1);
      if (!e) return e.error();
      if (!*e) return compare_at(x[k], y[k], depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return err("TypeError: '<' not supported between instances of '", type_name(a), "' and '",
             type_name(b), "'");
}

}  // namespace

// ---- walk budget ----

ScopedWalkBudget::ScopedWalkBudget(WalkBudget budget) : budget_(budget), previous_(t_walk) {
  t_walk = &budget_;
}

ScopedWalkBudget::~ScopedWalkBudget() { t_walk = previous_; }

Status walk_step(uint64_t n) {
  if (!t_walk) return ok_status();
  *t_walk->steps += n;
  if (*t_walk->steps > t_walk->max_steps)
    return err("template exceeded its step budget (", t_walk->max_steps, " steps)");
  return ok_status();
}

Status walk_size(size_t bytes) {
  if (t_walk && bytes > t_walk->max_bytes)
    return err("MemoryError: string of ", bytes, " bytes exceeds the limit of ", t_walk->max_bytes);
  return ok_status();
}

// ---- DictData ----

const Value* DictData::find(std::string_view key) const {
  auto it = str_index_.find(key);
  return it == str_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  auto k = other_key(key);
  if (!k) return nullptr;
  auto it = other_index_.find(*k);
  return it == other_index_.end() ? nullptr : &items_[it->second].second;
}

void DictData::set(std::string_view key, Value value) {
  auto it = str_index_.find(key);
  if (it != str_index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  str_index_.emplace(std::string(key), items_.size());
  items_.emplace_back(Value::string(std::string(key)), std::move(value));
}

Status DictData::set(const Value& key, Value value) {
  if (key.is_string()) {
    set(std::string_view(key.str()), std::move(value));
    return ok_status();
  }
  auto k = other_key(key);
  if (!k) return err("TypeError: unhashable type: '", type_name(key), "'");
  auto it = other_index_.find(*k);
  if (it != other_index_.end()) {
    items_[it->second].second = std::move(value);
  } else {
    other_index_.emplace(std::move(*k), items_.size());
    items_.emplace_back(key, std::move(value));
  }
  return ok_status();
}

bool DictData::erase(const Value& key) {
  for (size_t k = 0; k < items_.size(); ++k) {
    auto e = equals_at(items_[k].first, key, 0);
    if (e && *e) {
      items_.erase(items_.begin() + long(k));
      reindex();
      return true;
    }
  }
  return false;
}

void DictData::reindex() {
  str_index_.clear();
  other_index_.clear();
  for (size_t k = 0; k < items_.size(); ++k) {
    const Value& key = items_[k].first;
    if (key.is_string())
      str_index_.emplace(key.str(), k);
    else if (auto ok = other_key(key))
      other_index_.emplace(*ok, k);
  }
}

void DictData::clear() {
  std::vector<Value> values;
  values.reserve(items_.size() * 2);
  for (auto& [k, v] : items_) {
    values.push_back(std::move(k));
    values.push_back(std::move(v));
  }
  items_.clear();
  str_index_.clear();
  other_index_.clear();
  release_values(values);
}

void release_values(std::vector<Value>& values) {
  // Children whose last reference dies here are queued instead of destroyed
  // inside their parent's destructor; the outermost call drains the queue.
  thread_local std::vector<Value> pending;
  thread_local bool draining = false;
  for (Value& v : values)
    if (v.is_list() || v.is_dict() || v.is_object()) pending.push_back(std::move(v));
  values.clear();
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    Value last = std::move(pending.back());
    pending.pop_back();
  }  // `last` dies here; its own children land in `pending`
  draining = false;
}

// ---- NamespaceData ----

void ObjectData::set(std::string_view, Value) {}


Value NamespaceData::get(std::string_view attr) const {
  const Value* v = attrs.find(attr);
  if (v) return *v;
  return Value::undefined("'Namespace object' has no attribute '" + std::string(attr) + "'");
}

void NamespaceData::set(std::string_view attr, Value v) { attrs.set(attr, std::move(v)); }

Result<std::string> NamespaceData::repr(int depth) const {
  auto inner = dict_repr(attrs, depth);
  if (!inner) return inner.error();
  return "<Namespace " + *inner + ">";
}

void NamespaceData::clear() { attrs.clear(); }

// ---- Value ----

Value Value::undefined(std::string message, bool unsafe) {
  Value v;
  v.p_ = std::make_shared<UndefinedInfo>(UndefinedInfo{std::move(message), unsafe});
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.markup_ = markup;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  Value v;
  v.kind_ = Kind::List;
  v.p_ = std::make_shared<ListData>(ListData{std::move(items), kind});
  return v;
}

Value Value::dict(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.p_ = std::move(d);
  return v;
}

Value Value::object(std::shared_ptr<ObjectData> o) {
  Value v;
  v.kind_ = Kind::Object;
  v.p_ = std::move(o);
  return v;
}

Value Value::function(std::string name, NativeFn fn, bool is_macro) {
  Value v;
  v.kind_ = Kind::Callable;
  v.p_ = std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn), is_macro});
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    case Kind::Int: return double(i_);
    case Kind::Float: return f_;
    default: return 0.0;
  }
}

// ---- free functions ----

Result<std::vector<std::optional<Value>>> bind_args(const CallArgs& args,
                                                    std::initializer_list<std::string_view> params,
                                                    size_t required, std::string_view fname) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.pos.size() > params.size())
    return err("TypeError: ", fname, "() takes at most ", params.size(), " argument(s) (",
               args.pos.size(), " given)");
  for (size_t k = 0; k < args.pos.size(); ++k) out[k] = args.pos[k];
  for (const auto& [name, value] : args.kw) {
    size_t k = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++k;
    }
    if (k == params.size())
      return err("TypeError: ", fname, "() got an unexpected keyword argument '", name, "'");
    if (out[k]) return err("TypeError: ", fname, "() got multiple values for argument '", name, "'");
    out[k] = value;
  }
  for (size_t k = 0; k < required; ++k)
    if (!out[k])
      return err("TypeError: ", fname, "() missing required argument '", *(params.begin() + k),
                 "'");
  return out;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_double() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return v.seq_kind() == SeqKind::Generator || !v.list().items.empty();
    case Kind::Dict: return v.dict().size() != 0;
    default: return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return v.markup() ? "Markup" : "str";
    case Kind::List:
      return v.seq_kind() == SeqKind::List    ? "list"
             : v.seq_kind() == SeqKind::Tuple ? "tuple"
                                              : "generator";
    case Kind::Dict: return "dict";
    case Kind::Object: return std::string(v.object().type_name());
    case Kind::Callable: return v.fn().is_macro ? "Macro" : "function";
  }
  return "object";
}

std::string object_desc(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, laid out as Python's repr: positional when
  // the decimal exponent is in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      out += digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

Result<std::string> to_str(const Value& v) { return str_at(v, 0); }
Result<std::string> to_repr(const Value& v) { return repr_at(v, 0); }
Result<bool> equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }
Result<int> compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }

Result<std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return std::vector<Value>{};
    case Kind::List: return v.list().items;
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& kv : v.dict().items()) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      KT_TRY(walk_step(4 * s.size()));  // a Value and a small string per code point
      for (size_t i = 0; i < s.size();) {
        size_t b = i;
        text::decode(s, i);
        chars.push_back(Value::string(s.substr(b, i - b)));
      }
      return chars;
    }
    default: return err("TypeError: '", type_name(v), "' object is not iterable");
  }
}

Result<int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return int64_t(0);
    case Kind::String: return int64_t(text::length(v.str()));
    case Kind::List:
      if (v.seq_kind() != SeqKind::Generator) return int64_t(v.list().items.size());
      break;
    case Kind::Dict: return int64_t(v.dict().size());
    default: break;
  }
  return err("TypeError: object of type '", type_name(v), "' has no len()");
}

}  // namespace kt::jinja
