// JSON Schema to a grammar over bytes (grammar.h): the texts it accepts are
// JSON values valid under the schema. Compiled once per request; the engine
// then masks every token that cannot continue such a text (token_mask.h).
//
// Covered: type (one or a list), object (properties in the order given,
// required, additionalProperties: false/true, or a schema for a map without
// properties), array (items, minItems, maxItems), string (minLength,
// maxLength, pattern, format: date, time, date-time, uuid, email), integer
// and number (minimum, maximum, exclusiveMinimum, exclusiveMaximum; number
// bounds must be whole), boolean, null, enum, const, anyOf, allOf of one
// schema, $ref into the document (#, #/$defs/..., #/definitions/..., any JSON
// pointer; recursion works), and annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly).
//
// The grammar may accept fewer texts than the schema, never more: properties
// come in the schema's order, only declared ones are written when others are
// merely allowed, numbers have at most 16 digits before and after the point,
// whitespace between tokens is at most one space or a newline and 20 spaces
// or tabs. Anything else, e.g. oneOf, not, if/then/else, uniqueItems,
// multipleOf, patternProperties, minProperties, prefixItems, a remote $ref,
// is an error naming the keyword and where it is ("PATH: unsupported keyword
// 'oneOf'"), never ignored. Errors are one line; PATH starts with the name
// the caller gives (e.g. "response_format.json_schema.schema") followed by
// the JSON pointer inside the schema.
//
// Bounded (hostile schemas get an error, not a huge grammar): nesting depth,
// subschemas, alternatives of one enum/anyOf, bytes of one enum's values,
// repetition counts, and the grammar's own limits. A $ref cycle that never
// consumes input and a required property that recurses forever are errors
// (from GrammarBuilder::finish).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/result.h"

namespace kt {

struct JsonSchemaOptions {
  int max_depth = 64;                     // nested subschemas
  size_t max_schemas = 10000;             // subschemas compiled in all
  size_t max_alternatives = 1024;         // values of one enum, branches of one anyOf
  size_t max_literal_bytes = 64u << 10;   // one enum's values, as JSON
  int64_t max_repeat = 4096;              // minItems, maxItems, minLength, maxLength, pattern counts
  bool whitespace = true;                 // allow (bounded) whitespace between tokens
};

// Compiles schemas into rules of a builder, for grammars that hold JSON
// inside other text (tool calls). $refs resolve in the schema's document.
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(GrammarBuilder& b, JsonSchemaOptions o = {});
  ~JsonSchemaCompiler();

  // A rule for the JSON values valid under schema, which is its own $ref
  // document; where names it in errors.
  Result<uint32_t> compile(const nlohmann::ordered_json& schema, const std::string& where);
  // Any JSON value / any JSON object.
  uint32_t any_value();
  uint32_t any_object();
  // Optional whitespace between JSON tokens (empty when whitespace is off).
  uint32_t ws();

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

Result<Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& where = "schema",
                                    const JsonSchemaOptions& options = {});
// Any JSON object (OpenAI's response_format json_object, Ollama's format "json").
Result<Grammar> json_object_grammar(const JsonSchemaOptions& options = {});

}  // namespace kt
