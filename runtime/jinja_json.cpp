// JSON in and out of interpreter values. Output is Python's json.dumps
// byte for byte (transformers' tojson filter is json.dumps with
// ensure_ascii=False), input keeps object key order (nlohmann::ordered_json).
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "runtime/jinja_text.h"
#include "runtime/jinja_value.h"

namespace kt::jinja {
namespace {

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  auto u_escape = [&](uint32_t c) {
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += hex[(c >> (4 * k)) & 0xF];
  };
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    uint32_t c = text::decode(s, i);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      u_escape(c);
    } else if (c < 0x80 || !ensure_ascii) {
      out.append(s.substr(b, i - b));
    } else if (c < 0x10000) {
      u_escape(c);
    } else {
      uint32_t v = c - 0x10000;
      u_escape(0xD800 + (v >> 10));
      u_escape(0xDC00 + (v & 0x3FF));
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return format_float(f);
}

Error not_serializable(const Value& v) {
  return err("TypeError: Object of type ", type_name(v), " is not JSON serializable");
}

Result<std::string> key_text(const Value& k) {
  switch (k.kind()) {
    case Kind::String: return k.str();
    case Kind::Bool: return std::string(k.as_bool() ? "true" : "false");
    case Kind::None: return std::string("null");
    case Kind::Int: return std::to_string(k.as_int());
    case Kind::Float: return json_float(k.as_double());
    default:
      return err("TypeError: keys must be str, int, float, bool or None, not ", type_name(k));
  }
}

Status dump(std::string& out, const Value& v, const JsonStyle& st, int level) {
  if (level > kMaxValueDepth) return err("ValueError: Circular reference detected");
  KT_TRY(walk_step());
  KT_TRY(walk_size(out.size()));
  std::string newline_indent;
  if (st.indent) {
    newline_indent = "\n";
    for (int k = 0; k <= level; ++k) newline_indent += *st.indent;
  }
  auto close_indent = [&]() {
    if (!st.indent) return std::string();
    std::string s = "\n";
    for (int k = 0; k < level; ++k) s += *st.indent;
    return s;
  };
  switch (v.kind()) {
    case Kind::None: out += "null"; return ok_status();
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return ok_status();
    case Kind::Int: out += std::to_string(v.as_int()); return ok_status();
    case Kind::Float: out += json_float(v.as_double()); return ok_status();
    case Kind::String: dump_string(out, v.str(), st.ensure_ascii); return ok_status();
    case Kind::List: {
      if (v.seq_kind() == SeqKind::Generator && !st.allow_generators) return not_serializable(v);
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return ok_status();
      }
      out += "[" + newline_indent;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += st.item_sep + newline_indent;
        KT_TRY(dump(out, items[k], st, level + 1));
      }
      out += close_indent() + "]";
      return ok_status();
    }
    case Kind::Dict: {
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict().items()) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return ok_status();
      }
      if (st.sort_keys) {
        Status failed = ok_status();
        std::stable_sort(items.begin(), items.end(), [&](auto* a, auto* b) {
          auto c = compare(a->first, b->first);
          if (!c) failed = c.error();
          return c && *c < 0;
        });
        KT_TRY(failed);
      }
      out += "{" + newline_indent;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += st.item_sep + newline_indent;
        auto key = key_text(items[k]->first);
        if (!key) return key.error();
        dump_string(out, *key, st.ensure_ascii);
        out += st.key_sep;
        KT_TRY(dump(out, items[k]->second, st, level + 1));
      }
      out += close_indent() + "}";
      return ok_status();
    }
    default: return not_serializable(v);
  }
}

Result<Value> convert(const nlohmann::ordered_json& j, int depth) {
  using T = nlohmann::ordered_json::value_t;
  if (depth > kMaxValueDepth) return err("JSON input nested deeper than ", kMaxValueDepth);
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(*j.get_ptr<const bool*>());
    case T::number_integer: return Value::integer(*j.get_ptr<const int64_t*>());
    case T::number_unsigned: {
      uint64_t u = *j.get_ptr<const uint64_t*>();
      if (u <= uint64_t(INT64_MAX)) return Value::integer(int64_t(u));
      return Value::number(double(u));
    }
    case T::number_float: return Value::number(*j.get_ptr<const double*>());
    case T::string: return Value::string(*j.get_ptr<const std::string*>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        auto v = convert(e, depth + 1);
        if (!v) return v.error();
        items.push_back(std::move(*v));
      }
      return Value::list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<DictData>();
      for (const auto& [k, e] : j.items()) {
        auto v = convert(e, depth + 1);
        if (!v) return v.error();
        d->set(std::string_view(k), std::move(*v));
      }
      return Value::dict(std::move(d));
    }
    default: return err("JSON value of type ", j.type_name(), " has no template equivalent");
  }
}

}  // namespace

Result<std::string> to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  KT_TRY(dump(out, v, style, 0));
  return out;
}

Result<Value> from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

Result<Value> parse_json(std::string_view text) {
  // nlohmann's parser recurses per nesting level; refuse deep input before it.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxValueDepth) return err("JSON input nested deeper than ", kMaxValueDepth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  auto j = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return err("ValueError: from_json: invalid JSON");
  return convert(j, 0);
}

}  // namespace kt::jinja
