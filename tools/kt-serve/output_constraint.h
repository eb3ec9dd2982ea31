// What a request asks its output to be, as a grammar for the engine's
// constrained decoding (runtime/json_schema_grammar.h): OpenAI's
// response_format (text, json_object, json_schema) and Ollama's format
// ("json" or a JSON schema). The runtime does the work; this only reads the
// fields and turns a schema the grammar compiler refuses into a 400 that
// names the keyword and where it is.
#pragma once

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "tools/kt-serve/api_errors.h"

namespace kt::serve {

// response_format (null or absent: free text). *out stays null for "text".
std::optional<ApiError> read_response_format(const nlohmann::ordered_json* rf, std::shared_ptr<const Grammar>* out);
// Ollama's format: "" or absent: free text; "json": any JSON object; an object: a schema.
std::optional<ApiError> read_ollama_format(const nlohmann::ordered_json* format, std::shared_ptr<const Grammar>* out);
// A schema under `where` (for errors), compiled.
std::optional<ApiError> schema_grammar(const nlohmann::ordered_json& schema, const std::string& where,
                                       const std::string& param, std::shared_ptr<const Grammar>* out);

}  // namespace kt::serve
