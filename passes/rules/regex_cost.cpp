#include "passes/rules/regex_cost.h"

#include <cctype>
#include <vector>

namespace kt::rules {
namespace {

// What a group holds, for the rule on repeating it.
struct Group {
  bool repeats = false;    // a quantifier inside (any depth)
  bool alternates = false;  // a | inside (its own level)
};

// Reads {n}, {n,} or {n,m} at p[i] == '{'; returns false when it is not a
// counted repetition (ECMAScript then takes '{' literally).
bool counted(std::string_view p, size_t& i, long& lo, long& hi) {
  size_t j = i + 1;
  auto number = [&](long& v) {
    if (j >= p.size() || !std::isdigit(static_cast<unsigned char>(p[j]))) return false;
    v = 0;
    while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) {
      v = v > 100000 ? v : v * 10 + (p[j] - '0');
      ++j;
    }
    return true;
  };
  if (!number(lo)) return false;
  hi = lo;
  if (j < p.size() && p[j] == ',') {
    ++j;
    hi = -1;  // unbounded unless a number follows
    if (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) number(hi);
  }
  if (j >= p.size() || p[j] != '}') return false;
  i = j;
  return true;
}

}  // namespace

std::string regex_cost_problem(std::string_view p) {
  std::vector<Group> open{Group{}};  // open[0]: the whole pattern
  Group last_atom;                   // the atom a quantifier would repeat (a group's contents, or nothing)
  bool have_atom = false;
  int unbounded = 0;
  // Quantifiers in a row: 1 after one, 2 after a lazy '?' behind it. ECMAScript
  // forbids a quantifier on a quantifier (a**, a+*, a*{2}) but libstdc++ takes
  // it as a repetition of a repetition: fuzz_rules' timeout, ".**" against a
  // module path, backtracking without end.
  int quantifiers = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    bool quantifier = false, repeating = false, is_unbounded = false;
    const int quantifiers_before = quantifiers;
    quantifiers = 0;
    switch (c) {
      case '\\': {
        ++i;  // an escaped character is one atom
        // A backreference \N: std::regex reads N into an int, unchecked
        // (fuzz_rules: \8888888888888888888 overflowed inside libstdc++).
        size_t j = i;
        while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) ++j;
        if (j - i > 3)
          return "the backreference \\" + std::string(p.substr(i, j - i)) + " names no group (at most 3 digits)";
        last_atom = {};
        have_atom = true;
        continue;
      }
      case '[': {  // a class is one atom: skip to its closing ']'
        size_t j = i + 1;
        if (j < p.size() && p[j] == '^') ++j;
        if (j < p.size() && p[j] == ']') ++j;
        while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
        i = j;
        last_atom = {};
        have_atom = true;
        continue;
      }
      case '(':
        open.push_back({});
        if (i + 2 < p.size() && p[i + 1] == '?') i += (p[i + 2] == '<' && i + 3 < p.size() && (p[i + 3] == '=' || p[i + 3] == '!')) ? 3 : 2;
        have_atom = false;
        continue;
      case ')':
        if (open.size() > 1) {
          last_atom = open.back();
          open.pop_back();
          open.back().repeats |= last_atom.repeats;
          have_atom = true;
        }
        continue;
      case '|':
        open.back().alternates = true;
        have_atom = false;
        continue;
      case '*':
      case '+':
        quantifier = repeating = is_unbounded = true;
        break;
      case '?':
        quantifier = true;  // at most once (or lazy after another quantifier): no repetition
        break;
      case '{': {
        long lo = 0, hi = 0;
        size_t j = i;
        if (counted(p, j, lo, hi)) {
          if (lo > kMaxRepeatCount || hi > kMaxRepeatCount)
            return "the repetition {" + std::string(p.substr(i + 1, j - i - 1)) + "} counts past " +
                   std::to_string(kMaxRepeatCount);
          i = j;
          quantifier = true;
          repeating = hi < 0 || hi > 1;
          is_unbounded = hi < 0;
          break;
        }
        last_atom = {};
        have_atom = true;
        continue;
      }
      default:
        last_atom = {};
        have_atom = true;
        continue;
    }
    if (quantifier) {
      if (quantifiers_before == 1 && c == '?') {
        quantifiers = 2;  // lazy: a*?, a+?, a??, a{n,m}?
        continue;
      }
      if (quantifiers_before > 0)
        return "a quantifier follows a quantifier (like a** or a+*): write one (a lazy '?' may follow one)";
      quantifiers = 1;
    }
    if (!quantifier || !have_atom) continue;
    if (repeating && (last_atom.repeats || last_atom.alternates))
      return std::string("a repeated group holds ") + (last_atom.repeats ? "a repetition" : "alternatives") +
             " (like (a+)+ or (a|b)*): backtracking can take exponential time; repeat a class or a single "
             "character instead";
    if (is_unbounded && ++unbounded > kMaxUnboundedRepeats)
      return "more than " + std::to_string(kMaxUnboundedRepeats) +
             " unbounded repetitions (*, +, {n,}): backtracking can take time of the path's length to their number";
    if (repeating) open.back().repeats = true;
    last_atom = {};  // a quantified atom is not requantified (quantifiers above)
  }
  return "";
}

}  // namespace kt::rules
