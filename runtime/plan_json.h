// Plans as JSON, for reading and diffing (kt-compile --emit=plan-json,
// kt-plan json) and back (kt-plan pack): FlatBuffers' own JSON form of
// runtime/plan.fbs, whose text is compiled in. A plan survives the round trip
// unchanged (test/lit/tools/plan_roundtrip.test).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/result.h"

namespace kt {

// bytes: a size-prefixed plan (as written to .ktp); name for messages.
Result<std::string> plan_to_json(std::span<const uint8_t> bytes, const std::string& name);
// A size-prefixed plan from its JSON form; errors name the line.
Result<std::vector<uint8_t>> plan_from_json(const std::string& json, const std::string& name);

}  // namespace kt
