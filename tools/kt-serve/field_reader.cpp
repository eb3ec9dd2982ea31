#include "tools/kt-serve/field_reader.h"

#include <cmath>

#include "runtime/result.h"

namespace kt::serve {

namespace {

std::string range(double lo, double hi) {
  auto fmt = [](double v) {
    std::string s = std::to_string(v);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  };
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on the chain of +.
  std::string s = "[";
  s += fmt(lo);
  s += ", ";
  s += fmt(hi);
  s += "]";
  return s;
}

}  // namespace

const nlohmann::json* FieldReader::value(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::fail(const std::string& key, const std::string& message) {
  if (error_) return;
  std::string text = "'";
  text += name(key);
  text += "' ";
  text += message;
  error_ = bad_request(std::move(text), name(key));
}

std::optional<double> FieldReader::number(const char* key, double lo, double hi) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    fail(key, std::string("must be a number, not ") + v->type_name());
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    fail(key, "must be in " + range(lo, hi));
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> FieldReader::integer(const char* key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    i = u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
  } else if (v->is_number_integer()) {
    i = v->get<int64_t>();
  } else if (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    i = int64_t(v->get<double>());
  } else {
    fail(key, std::string("must be an integer, not ") + (v->is_number() ? "a fraction" : v->type_name()));
    return std::nullopt;
  }
  if (i < lo || i > hi) {
    fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return std::nullopt;
  }
  return i;
}

std::optional<uint64_t> FieldReader::seed(const char* key) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) return uint64_t(v->get<int64_t>());
  fail(key, std::string("must be an integer, not ") + v->type_name());
  return std::nullopt;
}

std::optional<bool> FieldReader::boolean(const char* key) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    fail(key, std::string("must be true or false, not ") + v->type_name());
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(const char* key, size_t max_bytes) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    fail(key, std::string("must be a string, not ") + v->type_name());
    return std::nullopt;
  }
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    fail(key, "is longer than " + std::to_string(max_bytes) + " bytes");
    return std::nullopt;
  }
  return s;
}

std::optional<std::vector<std::string>> FieldReader::strings(const char* key, size_t max_items, size_t max_bytes) {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  auto add = [&](const nlohmann::json& s) {
    if (!s.is_string()) {
      fail(key, std::string("must hold strings, not ") + s.type_name());
      return false;
    }
    const std::string& str = s.get_ref<const std::string&>();
    if (str.empty() || str.size() > max_bytes) {
      fail(key, "strings must be 1 to " + std::to_string(max_bytes) + " bytes long");
      return false;
    }
    out.push_back(str);
    return true;
  };
  if (v->is_string()) {
    if (!add(*v)) return std::nullopt;
  } else if (v->is_array()) {
    if (v->size() > max_items) {
      fail(key, "holds more than " + std::to_string(max_items) + " strings");
      return std::nullopt;
    }
    for (const nlohmann::json& s : *v)
      if (!add(s)) return std::nullopt;
  } else {
    fail(key, std::string("must be a string or a list of strings, not ") + v->type_name());
    return std::nullopt;
  }
  return out;
}

const nlohmann::json* FieldReader::object(const char* key) {
  const nlohmann::json* v = value(key);
  if (v && !v->is_object()) {
    fail(key, std::string("must be an object, not ") + v->type_name());
    return nullptr;
  }
  return v;
}

const nlohmann::json* FieldReader::array(const char* key) {
  const nlohmann::json* v = value(key);
  if (v && !v->is_array()) {
    fail(key, std::string("must be a list, not ") + v->type_name());
    return nullptr;
  }
  return v;
}

}  // namespace kt::serve
