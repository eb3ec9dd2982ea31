// JSON string contents as grammar rules (grammar.h): sets of code points
// written as a JSON string writes them, and JSON Schema's `pattern` (an
// ECMAScript regular expression) turned into a rule matching the body of the
// strings it accepts.
//
// Inside a JSON string a code point is written raw (valid UTF-8, split into
// byte ranges per encoded length, surrogates excluded), except `"` and `\`
// (written \" and \\) and the controls below U+0020 (\n, \t, ... or \u00XX).
//
// Patterns: alternation, groups ((...) and (?:...)), classes with ranges and
// negation, `.`, \d \w \s and their negations, escapes (\n \t \uXXXX \xHH and
// punctuation), quantifiers * + ? {n} {n,} {n,m} (lazy forms too: the same
// strings). A pattern matches anywhere in the string unless anchored (^ at
// the start, $ at the end of an alternative), as JSON Schema says. Refused
// with a one-line error naming the offset: backreferences, lookaround, word
// boundaries, anchors elsewhere, counts above max_repeat, unbalanced syntax.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/grammar.h"
#include "runtime/result.h"

namespace kt {

// Sorted, disjoint, inclusive ranges of code points.
using CodePointSet = std::vector<std::pair<uint32_t, uint32_t>>;

CodePointSet normalize(CodePointSet set);
CodePointSet complement(const CodePointSet& set);  // within [0, 0x10FFFF]

// A rule matching one code point of the set, written as inside a JSON string.
uint32_t json_string_char_rule(GrammarBuilder& b, const CodePointSet& set, const std::string& name);

// A rule matching the body (between the quotes) of the JSON strings whose
// value the pattern accepts.
Result<uint32_t> json_string_pattern_rule(GrammarBuilder& b, std::string_view pattern, const std::string& name,
                                          int64_t max_repeat = 1000);

}  // namespace kt
