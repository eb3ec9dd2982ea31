// Grammar rules for JSON integers and numbers between JSON Schema bounds
// (minimum / maximum / exclusive*), for json_schema_grammar.cpp: every decimal
// string between two bounds as alternatives of byte ranges, e.g. [3, 120] ->
// [3-9] | [1-9][0-9] | 1[01][0-9] | 120. Numbers have at most kJsonMaxDigits
// digits before the point (and after it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar.h"

namespace kt {

// 16 digits keep every integer JavaScript can hold exactly... nearly, and
// bound what an unruly model can write.
inline constexpr int kJsonMaxDigits = 16;
inline constexpr int64_t kJsonDigitsLimit = 10'000'000'000'000'000;  // 10^16: the first 17-digit number

// Bounds as integers: lo/hi absent = unbounded; past 16 digits = unbounded
// (no longer number is ever written).
struct JsonBounds {
  std::optional<int64_t> lo, hi;
  bool lo_excl = false, hi_excl = false;
};

class JsonNumberRanges {
 public:
  explicit JsonNumberRanges(GrammarBuilder& b) : b_(b) {}

  // A rule matching the integers within bd (no leading zeros, "-0" never).
  uint32_t integer_range(const JsonBounds& bd, const std::string& name);
  // A rule matching the decimals within bd (whole bounds), without an
  // exponent; frac: the rule of an optional fraction, "(.[0-9]{1,16})?".
  uint32_t number_range(const JsonBounds& bd, const std::string& name, uint32_t frac);

 private:
  using Seq = GrammarBuilder::Seq;

  // Equal-length decimal strings lo <= hi: every string between, as
  // alternatives of byte-range sequences after prefix.
  void same_length(const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>* out);
  // Integers in [lo, hi] (hi < 0: no upper bound), lo >= 0, no leading zeros.
  void nonneg_range(int64_t lo, int64_t hi, const Seq& prefix, const Seq& suffix, std::vector<Seq>* out);
  // Non-negative decimals in [a, b] (b < 0: unbounded), each end open or
  // closed, without an exponent; appended to out after prefix.
  void nonneg_decimal(int64_t a, bool a_excl, int64_t hi, bool hi_excl, const Seq& prefix, std::vector<Seq>* out,
                      const std::string& name, uint32_t frac);

  GrammarBuilder::Element ref(uint32_t r);
  Seq lit(std::string_view s);
  uint32_t digits_rule(int64_t min, int64_t max, const std::string& name);

  GrammarBuilder& b_;
};

}  // namespace kt
