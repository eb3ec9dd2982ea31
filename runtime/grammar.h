// A context-free grammar over bytes: what constrained decoding holds the
// generated text to. json_schema_grammar.h and the tool-call formats build
// them, grammar_matcher.h runs them, token_mask.h turns a matcher's state into
// the set of tokens that may come next.
//
// A rule is a list of alternatives; an alternative is a sequence of elements,
// each a set of bytes (matches one byte) or a reference to a rule, ended by an
// End element. All alternatives live in one flat element array, so a position
// in the grammar is one integer (what the matcher's stacks hold).
//
// finish() checks what the matcher relies on, with one-line errors naming the
// rule (rules are named after the schema path they come from):
// - no left recursion, including through rules that match the empty string
//   (it would expand forever: "#/$defs/a -> #/$defs/b -> #/$defs/a");
// - every rule reachable from the root can finish (an alternative that cannot,
//   such as an object whose required property recurses into itself, is
//   dropped; a rule left with none is an error);
// - resource bounds: elements, rules, byte sets.
// and it computes, for every position, the fewest bytes that finish its
// alternative: the matcher's "bytes still needed" for a state, which lets a
// constrained generation end within its token budget.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/result.h"

namespace kt {

struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};

  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  ByteSet& add(uint8_t b) {
    bits[b >> 6] |= uint64_t(1) << (b & 63);
    return *this;
  }
  ByteSet& add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b));
    return *this;
  }
  bool empty() const { return !(bits[0] | bits[1] | bits[2] | bits[3]); }
  bool operator==(const ByteSet&) const = default;
};

class Grammar {
 public:
  enum class Kind : uint8_t { Bytes, Rule, End };
  struct Element {
    Kind kind;
    uint32_t arg;  // Bytes: index of the set; Rule: the rule; End: the rule it ends
    bool operator==(const Element&) const = default;
  };
  static constexpr uint32_t kInfinite = 1u << 30;  // "cannot finish" in the length tables

  const std::vector<Element>& elements() const { return elements_; }
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  const ByteSet& set(uint32_t i) const { return sets_[i]; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  size_t n_rules() const { return rules_.size(); }
  uint32_t root() const { return root_; }
  // The fewest bytes that finish the alternative holding pos, from pos on.
  uint32_t suffix_min(uint32_t pos) const { return suffix_min_[pos]; }
  uint32_t rule_min(uint32_t rule) const { return rule_min_[rule]; }
  // A hash of the grammar's structure: equal grammars, equal fingerprints
  // (caches of matchers are keyed by it, together with to_text() equality).
  uint64_t fingerprint() const { return fingerprint_; }
  // The same rules, alternatives and byte sets (names aside).
  bool same_as(const Grammar& o) const {
    return fingerprint_ == o.fingerprint_ && root_ == o.root_ && elements_ == o.elements_ && sets_ == o.sets_ &&
           rules_ == o.rules_;
  }

  // GBNF-like text, one rule per line ("name ::= [a-z] other | "x""), for
  // tests and debugging.
  std::string to_text() const;

 private:
  friend class GrammarBuilder;
  std::vector<Element> elements_;
  std::vector<ByteSet> sets_;
  std::vector<std::vector<uint32_t>> rules_;
  std::vector<std::string> names_;
  std::vector<uint32_t> suffix_min_, rule_min_;
  uint32_t root_ = 0;
  uint64_t fingerprint_ = 0;
};

struct GrammarLimits {
  size_t max_elements = size_t(1) << 20;
  size_t max_rules = size_t(1) << 18;
  size_t max_sets = size_t(1) << 16;
};

class GrammarBuilder {
 public:
  using Element = Grammar::Element;
  using Seq = std::vector<Element>;

  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}

  // A rule without alternatives yet (rules may refer to each other before
  // they are filled: that is how recursion is written).
  uint32_t add_rule(std::string name);
  void add_alt(uint32_t rule, const Seq& seq);
  size_t n_alts(uint32_t rule) const { return g_.rules_[rule].size(); }

  Element bytes(const ByteSet& set);
  Element byte(uint8_t b) { return bytes(ByteSet().add(b)); }
  static Element ref(uint32_t rule) { return {Grammar::Kind::Rule, rule}; }
  // Appends the bytes of text, one element each.
  void append_literal(Seq& seq, std::string_view text);
  Seq literal(std::string_view text) {
    Seq s;
    append_literal(s, text);
    return s;
  }

  // A rule matching exactly one of the strings, factored as a trie (shared
  // prefixes are matched once, so a long enum costs no more stacks than its
  // distinct prefixes).
  uint32_t one_of_literals(const std::vector<std::string>& texts, const std::string& name);
  // item{min,max} (max < 0: unbounded), as right-recursive rules.
  uint32_t repeat(const Seq& item, int64_t min, int64_t max, const std::string& name);
  // item (sep item){min-1,max-1}, or nothing when min == 0.
  uint32_t repeat_separated(const Seq& item, const Seq& sep, int64_t min, int64_t max, const std::string& name);

  // Whether a limit was passed (the first error is kept; finish() reports it).
  bool failed() const { return !error_.empty(); }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  Result<Grammar> finish(uint32_t root);

 private:
  static Status check_left_recursion(const Grammar& g);

  GrammarLimits limits_;
  Grammar g_;
  std::unordered_map<std::string, uint32_t> set_index_;  // a set's 32 bytes -> its index
  std::string error_;
};

}  // namespace kt
