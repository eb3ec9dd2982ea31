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

// Compact JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace kt::serve
