// A small backtracking regex engine over code points, for the pre-tokenizer
// split patterns. It implements the ECMAScript subset those patterns use
// (alternation, (?:), (?=), (?!), classes with ranges and \s \S \d \w \p{..},
// greedy and lazy ? * + {n,m}, ^ $) with ECMAScript's leftmost-first,
// backtracking semantics, because llama.cpp runs the same patterns through
// std::regex and the tokens must come out identical.
//
// llama.cpp does not hand std::regex the text as it is; it maps it first, and
// so does this engine (SplitRegex::Mode):
// - Collapsed (the pattern contains \p{..}): every code point >= 128 becomes
//   one stand-in byte for its category (letter 0xD2, number 0xD1, ...), non-ASCII
//   whitespace becomes \v, and \p{X} matches X's stand-in plus X's ASCII members.
// - Wide (no \p{..}): code points as they are, except non-ASCII whitespace,
//   which becomes \v so that \s sees it.
// In both modes \s, \d and \w are the ASCII ("C" locale) classes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/result.h"

namespace kt {

class SplitRegex {
 public:
  enum class Mode { kCollapsed, kWide };

  // pattern is UTF-8. Errors name the pattern and the offending position.
  static Result<SplitRegex> compile(std::string_view pattern);

  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  Mode mode() const;

  // The subject as this regex's mode sees it (see above).
  static std::vector<uint32_t> map_subject(std::span<const uint32_t> cpts, Mode mode);

  // Splits each piece (lengths in code points, consecutive over `subject`, which
  // must be map_subject() of the text for mode()) the way std::regex_iterator
  // walks it: every match is a piece and so is every gap between matches.
  std::vector<size_t> split(std::span<const uint32_t> subject,
                            std::span<const size_t> pieces) const;

  // The end of the leftmost-first match starting exactly at `at` within
  // [begin, end) of subject, or -1. Exposed for tests.
  int64_t match_at(std::span<const uint32_t> subject, size_t begin, size_t at, size_t end) const;

 private:
  struct Program;
  explicit SplitRegex(std::unique_ptr<Program> p);
  std::unique_ptr<Program> prog_;
};

}  // namespace kt
