// JSON Schema to grammar (json_schema_grammar.h).
#include "runtime/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "runtime/json_number_ranges.h"
#include "runtime/regex_grammar.h"

namespace kt {

namespace {

using J = nlohmann::ordered_json;
using Seq = GrammarBuilder::Seq;

constexpr int kMaxDigits = kJsonMaxDigits;
constexpr int64_t kDigitsLimit = kJsonDigitsLimit;

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title",   "description", "$schema",    "$id",       "$comment",
                                          "default", "examples",    "deprecated", "readOnly",  "writeOnly",
                                          "$anchor", "$defs",       "definitions"};
  return k;
}
const std::set<std::string>& object_keywords() {
  static const std::set<std::string> k = {"properties", "required", "additionalProperties"};
  return k;
}
const std::set<std::string>& array_keywords() {
  static const std::set<std::string> k = {"items", "minItems", "maxItems"};
  return k;
}
const std::set<std::string>& string_keywords() {
  static const std::set<std::string> k = {"pattern", "minLength", "maxLength", "format"};
  return k;
}
const std::set<std::string>& number_keywords() {
  static const std::set<std::string> k = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}
const std::set<std::string>& combining_keywords() {
  static const std::set<std::string> k = {"type", "enum", "const", "anyOf", "allOf", "$ref"};
  return k;
}

bool known_keyword(const std::string& k) {
  return annotation_keywords().count(k) || object_keywords().count(k) || array_keywords().count(k) ||
         string_keywords().count(k) || number_keywords().count(k) || combining_keywords().count(k);
}

std::string dump(const J& v) { return v.dump(-1, ' ', false, J::error_handler_t::replace); }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return printable(out, 64);
}

}  // namespace

struct JsonSchemaCompiler::Impl {
  Impl(GrammarBuilder& b, JsonSchemaOptions o) : b(b), o(o) {}

  GrammarBuilder& b;
  JsonSchemaOptions o;
  std::string error;
  size_t n_schemas = 0;
  const J* doc = nullptr;
  std::string doc_name;
  std::map<std::pair<const J*, std::string>, uint32_t> refs;  // (document, pointer) -> rule
  // Shared rules, made on first use.
  std::optional<uint32_t> ws_, value_, object_, array_, string_, number_, integer_, boolean_, null_, char_,
      digit_run_, frac_, exp_;

  bool fail(const std::string& path, const std::string& message) {
    if (error.empty()) error = path + ": " + message;
    return false;
  }

  using Element = Grammar::Element;
  Element ref(uint32_t r) { return GrammarBuilder::ref(r); }

  Seq lit(std::string_view s) { return b.literal(s); }
  Seq cat(std::initializer_list<Seq> parts) {
    Seq out;
    for (const Seq& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  }
  Seq w() {
    if (!o.whitespace) return {};
    return {ref(ws())};
  }

  uint32_t ws() {
    if (ws_) return *ws_;
    const uint32_t r = b.add_rule("ws");
    ws_ = r;
    b.add_alt(r, {});
    if (o.whitespace) {
      b.add_alt(r, lit(" "));
      const uint32_t indent = b.repeat({b.bytes(ByteSet().add(' ').add('\t'))}, 0, 20, "ws-indent");
      b.add_alt(r, cat({lit("\n"), {ref(indent)}}));
    }
    return r;
  }

  uint32_t string_char() {
    if (!char_) {
      // Every code point but the surrogates, raw or as \uXXXX (surrogate
      // escapes are not written: a character is one code point, so
      // minLength/maxLength count what validators count).
      char_ = json_string_char_rule(b, {{0, 0x10FFFF}}, "char");
      ByteSet hex, hex_no_d, low8;
      hex.add_range('0', '9').add_range('a', 'f').add_range('A', 'F');
      hex_no_d = hex;
      hex_no_d.bits['d' >> 6] &= ~(uint64_t(1) << ('d' & 63));
      hex_no_d.bits['D' >> 6] &= ~(uint64_t(1) << ('D' & 63));
      low8.add_range('0', '7');
      const Element h = b.bytes(hex);
      b.add_alt(*char_, cat({lit("\\u"), {b.bytes(hex_no_d), h, h, h}}));
      b.add_alt(*char_, cat({lit("\\u"), {b.bytes(ByteSet().add('d').add('D')), b.bytes(low8), h, h}}));
    }
    return *char_;
  }

  uint32_t any_string() {
    if (string_) return *string_;
    const uint32_t chars = b.repeat({ref(string_char())}, 0, -1, "chars");
    const uint32_t r = b.add_rule("string");
    b.add_alt(r, cat({lit("\""), {ref(chars)}, lit("\"")}));
    return *(string_ = r);
  }

  uint32_t digits_rule(int64_t min, int64_t max, const std::string& name) {
    return b.repeat({b.bytes(ByteSet().add_range('0', '9'))}, min, max, name);
  }

  uint32_t frac() {
    if (!frac_) frac_ = b.repeat(cat({lit("."), {ref(digits_rule(1, kMaxDigits, "frac-digits"))}}), 0, 1, "frac");
    return *frac_;
  }

  uint32_t exponent() {
    if (!exp_) {
      const uint32_t r = b.add_rule("exp");
      b.add_alt(r, {});
      const Element e = b.bytes(ByteSet().add('e').add('E'));
      const uint32_t sign = b.repeat({b.bytes(ByteSet().add('+').add('-'))}, 0, 1, "exp-sign");
      b.add_alt(r, {e, ref(sign), ref(digits_rule(1, 2, "exp-digits"))});
      exp_ = r;
    }
    return *exp_;
  }

  // -?(0|[1-9][0-9]{0,15})
  uint32_t any_integer() {
    if (integer_) return *integer_;
    const uint32_t r = b.add_rule("integer");
    const uint32_t sign = b.repeat(lit("-"), 0, 1, "minus");
    b.add_alt(r, {ref(sign), b.byte('0')});
    b.add_alt(r, {ref(sign), b.bytes(ByteSet().add_range('1', '9')), ref(digits_rule(0, kMaxDigits - 1, "int-digits"))});
    return *(integer_ = r);
  }

  uint32_t any_number() {
    if (number_) return *number_;
    const uint32_t r = b.add_rule("number");
    b.add_alt(r, {ref(any_integer()), ref(frac()), ref(exponent())});
    return *(number_ = r);
  }

  uint32_t boolean() {
    if (!boolean_) boolean_ = b.one_of_literals({"true", "false"}, "boolean");
    return *boolean_;
  }
  uint32_t null_rule() {
    if (!null_) {
      null_ = b.add_rule("null");
      b.add_alt(*null_, lit("null"));
    }
    return *null_;
  }

  // "{" ws "}" | "{" ws member (ws "," ws member)* ws "}"
  uint32_t object_of(const Seq& key, const Seq& value, const std::string& name) {
    const uint32_t r = b.add_rule(name);
    const Seq member = cat({key, w(), lit(":"), w(), value});
    const uint32_t members = b.repeat_separated(member, cat({w(), lit(","), w()}), 1, -1, name + "-members");
    b.add_alt(r, cat({lit("{"), w(), lit("}")}));
    b.add_alt(r, cat({lit("{"), w(), {ref(members)}, w(), lit("}")}));
    return r;
  }

  // "[" ws "]" (when min is 0) | "[" ws item (ws "," ws item){min-1,max-1} ws "]"
  uint32_t array_of(const Seq& item, int64_t min, int64_t max, const std::string& name) {
    const uint32_t r = b.add_rule(name);
    if (min == 0) b.add_alt(r, cat({lit("["), w(), lit("]")}));
    if (max != 0) {
      const uint32_t items = b.repeat_separated(item, cat({w(), lit(","), w()}), std::max<int64_t>(min, 1), max,
                                                name + "-items");
      b.add_alt(r, cat({lit("["), w(), {ref(items)}, w(), lit("]")}));
    }
    return r;
  }

  uint32_t any_value() {
    if (value_) return *value_;
    const uint32_t r = b.add_rule("value");
    value_ = r;
    object_ = object_of({ref(any_string())}, {ref(r)}, "object");
    array_ = array_of({ref(r)}, 0, -1, "array");
    for (uint32_t alt : {*object_, *array_, any_string(), any_number(), boolean(), null_rule()}) b.add_alt(r, {ref(alt)});
    return r;
  }

  uint32_t any_object() {
    any_value();
    return *object_;
  }

  // ---- integer and number ranges (json_number_ranges.h) ----------------------

  bool read_bounds(const J& s, const std::string& path, bool integer, JsonBounds* out) {
    auto num = [&](const char* key, std::optional<double>* v, bool* excl_flag) -> bool {
      auto it = s.find(key);
      if (it == s.end()) return true;
      if (it->is_boolean() && excl_flag) {  // draft 4: exclusiveMinimum: true modifies minimum
        *excl_flag = it->get<bool>();
        return true;
      }
      if (!it->is_number()) return fail(path + "/" + key, "must be a number");
      const double d = it->get<double>();
      if (!std::isfinite(d)) return fail(path + "/" + key, "must be finite");
      *v = d;
      return true;
    };
    std::optional<double> mn, mx, xmn, xmx;
    bool d4_lo = false, d4_hi = false;
    if (!num("minimum", &mn, nullptr) || !num("maximum", &mx, nullptr) || !num("exclusiveMinimum", &xmn, &d4_lo) ||
        !num("exclusiveMaximum", &xmx, &d4_hi))
      return false;
    if (d4_lo && mn) xmn = mn, mn.reset();
    if (d4_hi && mx) xmx = mx, mx.reset();
    // The tighter of minimum and exclusiveMinimum (and the same above).
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
    if (mn) lo = mn;
    if (xmn && (!lo || *xmn >= *lo)) lo = xmn, lo_excl = true;
    if (mx) hi = mx;
    if (xmx && (!hi || *xmx <= *hi)) hi = xmx, hi_excl = true;
    auto whole = [](double d) { return std::floor(d) == d; };
    if (integer) {
      if (lo) {
        double l = lo_excl ? std::floor(*lo) + 1 : std::ceil(*lo);
        if (l >= double(kDigitsLimit)) return fail(path, "the minimum is beyond 16 digits");
        if (l > -double(kDigitsLimit)) out->lo = int64_t(l);
      }
      if (hi) {
        double h = hi_excl ? std::ceil(*hi) - 1 : std::floor(*hi);
        if (h <= -double(kDigitsLimit)) return fail(path, "the maximum is beyond 16 digits");
        if (h < double(kDigitsLimit)) out->hi = int64_t(h);
      }
      if (out->lo && out->hi && *out->lo > *out->hi) return fail(path, "no integer lies between minimum and maximum");
      return true;
    }
    if ((lo && !whole(*lo)) || (hi && !whole(*hi)))
      return fail(path, "minimum/maximum of a number must be whole numbers (fractional bounds are not supported)");
    if (lo && *lo >= double(kDigitsLimit)) return fail(path, "the minimum is beyond 16 digits");
    if (hi && *hi <= -double(kDigitsLimit)) return fail(path, "the maximum is beyond 16 digits");
    if (lo && *lo > -double(kDigitsLimit)) out->lo = int64_t(*lo), out->lo_excl = lo_excl;
    if (hi && *hi < double(kDigitsLimit)) out->hi = int64_t(*hi), out->hi_excl = hi_excl;
    if (out->lo && out->hi && (*out->lo > *out->hi || (*out->lo == *out->hi && (out->lo_excl || out->hi_excl))))
      return fail(path, "no number lies between minimum and maximum");
    return true;
  }

  uint32_t integer_range(const JsonBounds& bd, const std::string& name) {
    return JsonNumberRanges(b).integer_range(bd, name);
  }
  uint32_t number_range(const JsonBounds& bd, const std::string& name) {
    return JsonNumberRanges(b).number_range(bd, name, frac());
  }

  // ---- strings -------------------------------------------------------------

  static const char* format_pattern(const std::string& f) {
    static const char* date = "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
    static const char* time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    static const std::string date_time = std::string(date) + "T" + time;
    static const std::string s_date = std::string("^") + date + "$", s_time = std::string("^") + time + "$",
                             s_dt = "^" + date_time + "$";
    if (f == "date") return s_date.c_str();
    if (f == "time") return s_time.c_str();
    if (f == "date-time") return s_dt.c_str();
    if (f == "uuid") return "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
    if (f == "email") return "^[a-z0-9_+-]{1,32}(\\.[a-z0-9_+-]{1,32}){0,2}@([a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?\\.){1,3}[a-z]{2,12}$";
    return nullptr;
  }

  bool count(const J& s, const char* key, const std::string& path, std::optional<int64_t>* out) {
    auto it = s.find(key);
    if (it == s.end()) return true;
    if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
      return fail(path + "/" + key, "must be a non-negative integer");
    const double v = it->get<double>();
    if (v < 0) return fail(path + "/" + key, "must be a non-negative integer");
    *out = int64_t(std::min(v, 9e18));
    return true;
  }

  bool string_node(const J& s, const std::string& path, uint32_t* out) {
    std::optional<int64_t> mn, mx;
    if (!count(s, "minLength", path, &mn) || !count(s, "maxLength", path, &mx)) return false;
    std::string pattern;
    if (auto f = s.find("format"); f != s.end()) {
      if (!f->is_string()) return fail(path + "/format", "must be a string");
      const char* p = format_pattern(f->get<std::string>());
      if (!p)
        return fail(path + "/format", "format '" + printable(f->get<std::string>(), 40) +
                                          "' is not supported (date, time, date-time, uuid, email are)");
      pattern = p;
      if (s.contains("pattern")) return fail(path, "'format' together with 'pattern' is not supported");
    }
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) return fail(path + "/pattern", "must be a string");
      pattern = p->get<std::string>();
    }
    if (!pattern.empty() || s.contains("pattern")) {
      if (mn || mx) return fail(path, "'pattern' or 'format' together with 'minLength'/'maxLength' is not supported");
      auto body = json_string_pattern_rule(b, pattern, path + "#pattern", o.max_repeat);
      if (!body.ok()) return fail(path + "/pattern", body.error().message);
      const uint32_t r = b.add_rule(path + "#string");
      b.add_alt(r, cat({lit("\""), {ref(*body)}, lit("\"")}));
      *out = r;
      return true;
    }
    if (!mn && !mx) {
      *out = any_string();
      return true;
    }
    const int64_t lo = mn.value_or(0), hi = mx.value_or(-1);
    if (lo > o.max_repeat || hi > o.max_repeat) {
      if (lo > o.max_repeat) return fail(path + "/minLength", "is above " + std::to_string(o.max_repeat));
      // A larger maxLength allows what max_repeat allows, and more.
    }
    if (hi >= 0 && hi < lo) return fail(path, "maxLength is below minLength");
    const int64_t capped_hi = hi > o.max_repeat ? -1 : hi;
    const uint32_t chars = b.repeat({ref(string_char())}, lo, capped_hi, path + "#chars");
    const uint32_t r = b.add_rule(path + "#string");
    b.add_alt(r, cat({lit("\""), {ref(chars)}, lit("\"")}));
    *out = r;
    return true;
  }

  // ---- objects and arrays --------------------------------------------------

  bool object_node(const J& s, const std::string& path, int depth, uint32_t* out) {
    std::vector<std::pair<std::string, const J*>> props;
    static const J any_schema = J::object();
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return fail(path + "/properties", "must be an object");
      for (auto p = it->begin(); p != it->end(); ++p) props.push_back({p.key(), &p.value()});
    }
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return fail(path + "/required", "must be a list of property names");
      for (const J& r : *it) {
        if (!r.is_string()) return fail(path + "/required", "must be a list of property names");
        const std::string& name = r.get_ref<const std::string&>();
        if (!required.insert(name).second) continue;
        bool declared = false;
        for (const auto& p : props) declared |= p.first == name;
        if (!declared) props.push_back({name, &any_schema});  // required, any value
      }
    }
    const J* additional = nullptr;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (!it->is_boolean() && !it->is_object()) return fail(path + "/additionalProperties", "must be a boolean or a schema");
      additional = &*it;
    }
    if (props.empty()) {
      // A map: any keys, values under additionalProperties (or anything).
      if (additional && additional->is_boolean() && !additional->get<bool>()) {
        const uint32_t r = b.add_rule(path + "#object");
        b.add_alt(r, cat({lit("{"), w(), lit("}")}));
        *out = r;
        return true;
      }
      uint32_t value = 0;
      if (additional && additional->is_object()) {
        if (!node(*additional, path + "/additionalProperties", depth + 1, &value)) return false;
      } else {
        value = any_value();
      }
      *out = object_of({ref(any_string())}, {ref(value)}, path + "#map");
      return true;
    }
    if (props.size() > o.max_alternatives) return fail(path + "/properties", "has more than " + std::to_string(o.max_alternatives) + " properties");
    // Members in the schema's order; optional ones may be left out.
    // first[i]: the first member written is property i or a later one;
    // more[i]: after some member, properties i.. follow (each with a comma).
    const size_t n = props.size();
    std::vector<Seq> member(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t value = 0;
      if (!node(*props[i].second, path + "/properties/" + pointer_token(props[i].first), depth + 1, &value)) return false;
      member[i] = cat({lit(dump(J(props[i].first))), w(), lit(":"), w(), {ref(value)}});
    }
    std::vector<uint32_t> more(n + 1), first(n);
    more[n] = b.add_rule(path + "#more" + std::to_string(n));
    b.add_alt(more[n], {});
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(props[i].first) > 0;
      more[i] = b.add_rule(path + "#more" + std::to_string(i));
      b.add_alt(more[i], cat({w(), lit(","), w(), member[i], {ref(more[i + 1])}}));
      if (!req) b.add_alt(more[i], {ref(more[i + 1])});
      first[i] = b.add_rule(path + "#first" + std::to_string(i));
      b.add_alt(first[i], cat({member[i], {ref(more[i + 1])}}));
      if (!req && i + 1 < n) b.add_alt(first[i], {ref(first[i + 1])});
    }
    const uint32_t r = b.add_rule(path + "#object");
    if (required.empty()) b.add_alt(r, cat({lit("{"), w(), lit("}")}));
    b.add_alt(r, cat({lit("{"), w(), {ref(first[0])}, w(), lit("}")}));
    *out = r;
    return true;
  }

  bool array_node(const J& s, const std::string& path, int depth, uint32_t* out) {
    std::optional<int64_t> mn, mx;
    if (!count(s, "minItems", path, &mn) || !count(s, "maxItems", path, &mx)) return false;
    const int64_t lo = mn.value_or(0);
    int64_t hi = mx.value_or(-1);
    if (lo > o.max_repeat) return fail(path + "/minItems", "is above " + std::to_string(o.max_repeat));
    if (hi > o.max_repeat) hi = -1;
    if (hi >= 0 && hi < lo) return fail(path, "maxItems is below minItems");
    uint32_t item = 0;
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) return fail(path + "/items", "a list of schemas (tuple validation) is not supported");
      if (!node(*it, path + "/items", depth + 1, &item)) return false;
    } else {
      item = any_value();
    }
    *out = array_of({ref(item)}, lo, hi, path + "#array");
    return true;
  }

  // ---- the schema ------------------------------------------------------------

  bool literals(const std::vector<const J*>& values, const std::string& path, uint32_t* out) {
    std::vector<std::string> texts;
    size_t bytes = 0;
    for (const J* v : values) {
      texts.push_back(dump(*v));
      bytes += texts.back().size();
    }
    if (texts.empty()) return fail(path, "no value of the enum fits the schema's type");
    if (texts.size() > o.max_alternatives)
      return fail(path, "has more than " + std::to_string(o.max_alternatives) + " values");
    if (bytes > o.max_literal_bytes)
      return fail(path, "values take more than " + std::to_string(o.max_literal_bytes) + " bytes");
    *out = b.one_of_literals(texts, path + "#enum");
    return true;
  }

  static bool of_type(const J& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  // Keywords beside `what` that would constrain further (and so would be ignored).
  std::string constraining_sibling(const J& s, const std::set<std::string>& allowed) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!annotation_keywords().count(it.key()) && !allowed.count(it.key())) return it.key();
    return "";
  }

  bool resolve_ref(const std::string& ref_text, const std::string& path, const J** target) {
    if (ref_text.empty() || ref_text[0] != '#')
      return fail(path + "/$ref", "only references inside the schema ('#...') are supported, not '" + printable(ref_text, 64) + "'");
    const J* cur = doc;
    size_t i = 1;
    if (i < ref_text.size() && ref_text[i] != '/')
      return fail(path + "/$ref", "anchors ('" + printable(ref_text, 64) + "') are not supported; use a JSON pointer");
    while (i < ref_text.size()) {
      ++i;  // '/'
      const size_t end = std::min(ref_text.find('/', i), ref_text.size());
      std::string token;
      for (size_t k = i; k < end; ++k) {
        if (ref_text[k] == '~' && k + 1 < end && (ref_text[k + 1] == '0' || ref_text[k + 1] == '1')) {
          token += ref_text[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          token += ref_text[k];
        }
      }
      i = end;
      if (cur->is_object()) {
        auto it = cur->find(token);
        if (it == cur->end()) return fail(path + "/$ref", "'" + printable(ref_text, 64) + "' points at nothing");
        cur = &*it;
      } else if (cur->is_array()) {
        char* e = nullptr;
        const unsigned long idx = std::strtoul(token.c_str(), &e, 10);
        if (token.empty() || *e || idx >= cur->size())
          return fail(path + "/$ref", "'" + printable(ref_text, 64) + "' points at nothing");
        cur = &(*cur)[idx];
      } else {
        return fail(path + "/$ref", "'" + printable(ref_text, 64) + "' points at nothing");
      }
    }
    *target = cur;
    return true;
  }

  bool node(const J& s, const std::string& path, int depth, uint32_t* out) {
    if (b.failed()) return fail(path, "the grammar grew past its bounds");
    if (++n_schemas > o.max_schemas) return fail(path, "the schema has more than " + std::to_string(o.max_schemas) + " subschemas");
    if (depth > o.max_depth) return fail(path, "nested deeper than " + std::to_string(o.max_depth) + " levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) {
        *out = any_value();
        return true;
      }
      return fail(path, "the schema 'false' admits no value");
    }
    if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!known_keyword(it.key()))
        return fail(path, "unsupported keyword '" + printable(it.key(), 48) + "'" + (it.key() == "oneOf" ? " (anyOf is)" : ""));

    if (auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) return fail(path + "/$ref", "must be a string");
      if (auto k = constraining_sibling(s, {"$ref"}); !k.empty())
        return fail(path, "'$ref' together with '" + printable(k, 48) + "' is not supported");
      const std::string target_path = it->get<std::string>();
      const auto key = std::make_pair(doc, target_path);
      if (auto m = refs.find(key); m != refs.end()) {
        *out = m->second;
        return true;
      }
      const J* target = nullptr;
      if (!resolve_ref(target_path, path, &target)) return false;
      // Declared before its body: a recursive reference finds it.
      const uint32_t r = b.add_rule(doc_name + target_path);
      refs[key] = r;
      uint32_t body = 0;
      if (!node(*target, doc_name + target_path.substr(1), depth + 1, &body)) return false;
      b.add_alt(r, {ref(body)});
      *out = r;
      return true;
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1)
        return fail(path + "/allOf", "only a list of one schema is supported");
      if (auto k = constraining_sibling(s, {"allOf"}); !k.empty())
        return fail(path, "'allOf' together with '" + printable(k, 48) + "' is not supported");
      return node((*it)[0], path + "/allOf/0", depth + 1, out);
    }
    if (auto it = s.find("anyOf"); it != s.end()) {
      if (!it->is_array() || it->empty()) return fail(path + "/anyOf", "must be a non-empty list of schemas");
      if (it->size() > o.max_alternatives) return fail(path + "/anyOf", "has more than " + std::to_string(o.max_alternatives) + " schemas");
      if (auto k = constraining_sibling(s, {"anyOf"}); !k.empty())
        return fail(path, "'anyOf' together with '" + printable(k, 48) + "' is not supported");
      const uint32_t r = b.add_rule(path + "#anyOf");
      for (size_t i = 0; i < it->size(); ++i) {
        uint32_t branch = 0;
        if (!node((*it)[i], path + "/anyOf/" + std::to_string(i), depth + 1, &branch)) return false;
        b.add_alt(r, {ref(branch)});
      }
      *out = r;
      return true;
    }

    // type: one name or a list of them.
    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      auto add = [&](const J& t) {
        static const std::set<std::string> names = {"string", "number", "integer", "boolean", "null", "object", "array"};
        if (!t.is_string() || !names.count(t.get<std::string>()))
          return fail(path + "/type", "must be one of string, number, integer, boolean, null, object, array");
        if (std::find(types.begin(), types.end(), t.get<std::string>()) == types.end()) types.push_back(t.get<std::string>());
        return true;
      };
      if (it->is_array()) {
        if (it->empty()) return fail(path + "/type", "an empty list admits no value");
        for (const J& t : *it)
          if (!add(t)) return false;
      } else if (!add(*it)) {
        return false;
      }
    }

    const bool has_enum = s.contains("enum"), has_const = s.contains("const");
    if (has_enum || has_const) {
      std::set<std::string> allowed = {"enum", "const", "type"};
      if (auto k = constraining_sibling(s, allowed); !k.empty())
        return fail(path, std::string("'") + (has_enum ? "enum" : "const") + "' together with '" + printable(k, 48) +
                              "' is not supported");
      std::vector<const J*> values;
      if (has_const) {
        values.push_back(&s["const"]);
      } else {
        const J& e = s["enum"];
        if (!e.is_array() || e.empty()) return fail(path + "/enum", "must be a non-empty list");
        for (const J& v : e) values.push_back(&v);
      }
      if (has_const && has_enum) {  // the const, if the enum has it
        bool found = false;
        for (const J& v : s["enum"]) found |= v == s["const"];
        if (!found) return fail(path, "the const is not among the enum's values");
      }
      if (!types.empty()) {
        std::vector<const J*> typed;
        for (const J* v : values)
          for (const std::string& t : types)
            if (of_type(*v, t)) {
              typed.push_back(v);
              break;
            }
        values = std::move(typed);
      }
      return literals(values, path + (has_const ? "/const" : "/enum"), out);
    }

    if (types.empty()) {  // what the keywords are about, or anything
      auto any_of = [&](const std::set<std::string>& kws) {
        for (const std::string& k : kws)
          if (s.contains(k)) return true;
        return false;
      };
      if (any_of(object_keywords())) types = {"object"};
      else if (any_of(array_keywords())) types = {"array"};
      else if (any_of(string_keywords())) types = {"string"};
      else if (any_of(number_keywords())) types = {"number"};
      else {
        *out = any_value();
        return true;
      }
    }
    std::vector<uint32_t> branches;
    for (const std::string& t : types) {
      uint32_t r = 0;
      if (t == "string") {
        if (!string_node(s, path, &r)) return false;
      } else if (t == "integer" || t == "number") {
        JsonBounds bd;
        if (!read_bounds(s, path, t == "integer", &bd)) return false;
        if (!bd.lo && !bd.hi) r = t == "integer" ? any_integer() : any_number();
        else r = t == "integer" ? integer_range(bd, path + "#integer") : number_range(bd, path + "#number");
      } else if (t == "boolean") {
        r = boolean();
      } else if (t == "null") {
        r = null_rule();
      } else if (t == "object") {
        if (!object_node(s, path, depth, &r)) return false;
      } else if (t == "array") {
        if (!array_node(s, path, depth, &r)) return false;
      }
      branches.push_back(r);
    }
    if (branches.size() == 1) {
      *out = branches[0];
      return true;
    }
    const uint32_t r = b.add_rule(path + "#types");
    for (uint32_t br : branches) b.add_alt(r, {ref(br)});
    *out = r;
    return true;
  }
};

JsonSchemaCompiler::JsonSchemaCompiler(GrammarBuilder& b, JsonSchemaOptions o) : p_(std::make_unique<Impl>(b, o)) {}
JsonSchemaCompiler::~JsonSchemaCompiler() = default;

Result<uint32_t> JsonSchemaCompiler::compile(const nlohmann::ordered_json& schema, const std::string& where) {
  p_->doc = &schema;
  p_->doc_name = where;
  p_->n_schemas = 0;
  uint32_t rule = 0;
  if (!p_->node(schema, where, 0, &rule)) return err(p_->error);
  if (p_->b.failed()) return err(where, ": the schema's grammar grew past its bounds");
  return rule;
}

uint32_t JsonSchemaCompiler::any_value() { return p_->any_value(); }
uint32_t JsonSchemaCompiler::any_object() { return p_->any_object(); }
uint32_t JsonSchemaCompiler::ws() { return p_->ws(); }

Result<Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& where,
                                    const JsonSchemaOptions& options) {
  GrammarBuilder b;
  JsonSchemaCompiler c(b, options);
  auto rule = c.compile(schema, where);
  if (!rule.ok()) return rule.error();
  auto g = b.finish(*rule);
  if (!g.ok()) return err(where, ": ", g.error().message);
  return g;
}

Result<Grammar> json_object_grammar(const JsonSchemaOptions& options) {
  GrammarBuilder b;
  JsonSchemaCompiler c(b, options);
  return b.finish(c.any_object());
}

}  // namespace kt
