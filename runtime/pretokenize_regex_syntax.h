// The syntax of SplitRegex patterns, shared by the parser
// (pretokenize_regex_parse.cpp) and the compiler and matcher
// (pretokenize_regex.cpp). Internal to those two files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/pretokenize_regex.h"
#include "runtime/result.h"

namespace kt::split_regex {

using Range = std::pair<uint32_t, uint32_t>;  // inclusive

struct CharClass {
  std::vector<Range> ranges;  // sorted, merged
  bool negated = false;

  bool contains(uint32_t c) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), Range{c, UINT32_MAX});
    const bool in = it != ranges.begin() && (it - 1)->second >= c;
    return in != negated;
  }
};

// Stand-in bytes of the collapsed subject, and the ASCII members of each
// category as llama.cpp lists them (its symbol list omits '~'; kept, to match).
constexpr uint32_t kCollapsedOther = 0xD0, kCollapsedNumber = 0xD1, kCollapsedLetter = 0xD2,
                   kCollapsedPunct = 0xD3, kCollapsedMark = 0xD4, kCollapsedSymbol = 0xD5;

struct CollapsedCategory {
  const char* name;
  uint32_t stand_in;
  std::vector<Range> ascii;
};
const std::vector<CollapsedCategory>& collapsed_categories();

// A parsed pattern. Character classes live in a table; kClass nodes index it.
struct Node {
  enum Kind { kEmpty, kChar, kClass, kSeq, kAlt, kRepeat, kLook, kBegin, kEnd } kind = kEmpty;
  uint32_t ch = 0;
  int cls = -1;
  std::vector<Node> kids;
  int min = 0, max = 0;  // kRepeat; max < 0: unbounded
  bool greedy = true;
  bool negative = false;  // kLook
};

// Parses a UTF-8 pattern for the given mode, appending its classes to *classes.
Result<Node> parse_pattern(std::string_view pattern, SplitRegex::Mode mode,
                           std::vector<CharClass>* classes);

}  // namespace kt::split_regex
