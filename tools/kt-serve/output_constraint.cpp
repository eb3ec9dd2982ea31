#include "tools/kt-serve/output_constraint.h"

#include "runtime/json_schema_grammar.h"

namespace kt::serve {

namespace {

std::optional<ApiError> any_object(std::shared_ptr<const Grammar>* out) {
  auto g = json_object_grammar();
  if (!g.ok()) return server_error(g.error().message);
  *out = std::make_shared<const Grammar>(std::move(*g));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> schema_grammar(const nlohmann::ordered_json& schema, const std::string& where,
                                       const std::string& param, std::shared_ptr<const Grammar>* out) {
  auto g = json_schema_grammar(schema, where);
  if (!g.ok()) return bad_request(g.error().message, param);
  *out = std::make_shared<const Grammar>(std::move(*g));
  return std::nullopt;
}

std::optional<ApiError> read_response_format(const nlohmann::ordered_json* rf, std::shared_ptr<const Grammar>* out) {
  out->reset();
  if (!rf || rf->is_null()) return std::nullopt;
  if (!rf->is_object()) return bad_request("'response_format' must be an object", "response_format");
  const auto type = rf->find("type");
  if (type == rf->end() || !type->is_string())
    return bad_request("'response_format.type' must be text, json_object or json_schema", "response_format");
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") return any_object(out);
  if (t != "json_schema")
    return bad_request("'response_format.type' must be text, json_object or json_schema, not '" + printable(t, 40) + "'",
                       "response_format");
  const auto js = rf->find("json_schema");
  if (js == rf->end() || !js->is_object())
    return bad_request("'response_format.json_schema' must be an object with a schema", "response_format");
  if (auto name = js->find("name"); name != js->end() && !name->is_string())
    return bad_request("'response_format.json_schema.name' must be a string", "response_format");
  if (auto strict = js->find("strict"); strict != js->end() && !strict->is_boolean() && !strict->is_null())
    return bad_request("'response_format.json_schema.strict' must be true or false", "response_format");
  const auto schema = js->find("schema");
  // OpenAI's schema is optional: without one, any JSON object.
  if (schema == js->end() || schema->is_null()) return any_object(out);
  return schema_grammar(*schema, "response_format.json_schema.schema", "response_format", out);
}

std::optional<ApiError> read_ollama_format(const nlohmann::ordered_json* format, std::shared_ptr<const Grammar>* out) {
  out->reset();
  if (!format || format->is_null()) return std::nullopt;
  if (format->is_string()) {
    const std::string& f = format->get_ref<const std::string&>();
    if (f.empty()) return std::nullopt;
    if (f == "json") return any_object(out);
    return bad_request("format must be \"json\" or a JSON schema, not '" + printable(f, 40) + "'", "format");
  }
  if (!format->is_object()) return bad_request("format must be \"json\" or a JSON schema object", "format");
  return schema_grammar(*format, "format", "format", out);
}

}  // namespace kt::serve
