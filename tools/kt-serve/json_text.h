// JSON text in and out at the HTTP boundary, never throwing: nlohmann throws
// on malformed input and on invalid UTF-8 when dumping, so both are caught
// here and become values.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/result.h"

namespace kt::serve {

// Nesting deeper than this is refused: no request needs it, and a body of
// nested brackets must not cost a recursion per level anywhere later.
inline constexpr int kMaxJsonDepth = 64;

// A request body that must be one JSON object. The error says what is wrong
// and where (nlohmann's message: "syntax error while parsing ... at line 1, column 7").
Result<nlohmann::json> parse_json_object(std::string_view body);

// The same body with objects in the order written (tools, messages and JSON
// schemas: key order is part of a prompt and of the output's order). Each
// object is limited to kMaxJsonKeys keys: ordered objects find keys by a
// linear search, so a huge one would make parsing quadratic.
inline constexpr size_t kMaxJsonKeys = 4096;
Result<nlohmann::ordered_json> parse_ordered_json_object(std::string_view body);

// Compact JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace kt::serve
