// Typed fields of a JSON request body. Every reader returns nullopt when the
// field is absent or null (the API's default applies) and when it has the
// wrong type or range, in which case the first such error is kept, naming
// the field, for a 400. Nothing here throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/kt-serve/api_errors.h"

namespace kt::serve {

// A value that asks for something: present, and not null or an empty string,
// list or object (clients send "tools": [] to mean none).
inline bool nonempty(const nlohmann::json* v) {
  return v && !v->is_null() && !((v->is_array() || v->is_object() || v->is_string()) && v->empty());
}

class FieldReader {
 public:
  // prefix names where obj sits, for messages ("options.").
  explicit FieldReader(const nlohmann::json& obj, std::string prefix = "") : obj_(obj), prefix_(std::move(prefix)) {}

  std::optional<double> number(const char* key, double lo, double hi);
  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi);
  std::optional<uint64_t> seed(const char* key);  // any integer, taken as its 64 bits
  std::optional<bool> boolean(const char* key);
  std::optional<std::string> string(const char* key, size_t max_bytes);
  // A string or a list of strings (OpenAI's "stop"): at most max_items, each
  // 1 to max_bytes long.
  std::optional<std::vector<std::string>> strings(const char* key, size_t max_items, size_t max_bytes);
  // The raw value when present and not null.
  const nlohmann::json* value(const char* key) const;
  const nlohmann::json* object(const char* key);  // wrong type: an error
  const nlohmann::json* array(const char* key);

  // Fails the request for a field (the first failure wins).
  void fail(const std::string& key, const std::string& message);
  bool failed() const { return error_.has_value(); }
  const ApiError& error() const { return *error_; }

 private:
  std::string name(const std::string& key) const { return prefix_ + key; }

  const nlohmann::json& obj_;
  std::string prefix_;
  std::optional<ApiError> error_;
};

}  // namespace kt::serve
