// A bound on what a rule's name pattern can cost. Rules are regexes over module
// paths, run by a backtracking engine (std::regex), and a rule file can come
// from anywhere: a nested repetition such as (a+)+ or (a|a)* takes time
// exponential in the path's length, and many unbounded repetitions side by
// side (.*.*.*...) take time of the path's length to their number. Neither is
// needed to name modules (KTransformers' own files use at most two .* and no
// repeated group), so such patterns are refused when the file is read, with
// what to change, instead of stalling kt-compile.
#pragma once

#include <string>
#include <string_view>

namespace kt::rules {

inline constexpr int kMaxUnboundedRepeats = 4;  // *, + and {n,} in one pattern
inline constexpr int kMaxRepeatCount = 100;     // the largest n in {n} / {n,m}

// Empty when the pattern is within the bounds; else why it is not.
std::string regex_cost_problem(std::string_view pattern);

}  // namespace kt::rules
