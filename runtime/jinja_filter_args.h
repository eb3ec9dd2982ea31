// Argument helpers shared by the filter files (internal to runtime/).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/jinja_eval.h"

namespace kt::jinja::filter_args {

using Args = std::vector<std::optional<Value>>;

inline Result<Args> bind(const CallArgs& a, std::initializer_list<std::string_view> params,
                         size_t required, std::string_view name) {
  return bind_args(a, params, required, name);
}
inline Value arg_or(const Args& a, size_t k, Value dflt) { return a[k] ? *a[k] : std::move(dflt); }
inline bool flag(const Args& a, size_t k) { return a[k] && truthy(*a[k]); }
// jinja2's soft_str: strings as they are, anything else through str().
inline Result<std::string> soft_str(const Value& v) {
  return v.is_string() ? Result<std::string>(v.str()) : to_str(v);
}
inline Value generator(std::vector<Value> items) {
  return Value::list(std::move(items), SeqKind::Generator);
}

}  // namespace kt::jinja::filter_args
