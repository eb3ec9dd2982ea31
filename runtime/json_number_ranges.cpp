// Decimal ranges as grammar alternatives (json_number_ranges.h).
#include "runtime/json_number_ranges.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace kt {

namespace {

using Seq = GrammarBuilder::Seq;

std::string digits(int64_t n) { return std::to_string(n); }

Seq cat(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

GrammarBuilder::Element JsonNumberRanges::ref(uint32_t r) { return GrammarBuilder::ref(r); }
GrammarBuilder::Seq JsonNumberRanges::lit(std::string_view s) { return b_.literal(s); }
uint32_t JsonNumberRanges::digits_rule(int64_t min, int64_t max, const std::string& name) {
  return b_.repeat({b_.bytes(ByteSet().add_range('0', '9'))}, min, max, name);
}

void JsonNumberRanges::same_length(const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>* out) {
  if (lo.empty()) {
    out->push_back(std::move(prefix));
    return;
  }
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    prefix.push_back(b_.byte(uint8_t(lo[0])));
    same_length(lo_rest, hi_rest, std::move(prefix), out);
    return;
  }
  const bool lo_zeros = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool hi_nines = hi_rest.find_first_not_of('9') == std::string::npos;
  auto free_digits = [&](Seq s, char a, char z, size_t n) {
    s.push_back(b_.bytes(ByteSet().add_range(uint8_t(a), uint8_t(z))));
    for (size_t k = 0; k < n; ++k) s.push_back(b_.bytes(ByteSet().add_range('0', '9')));
    out->push_back(std::move(s));
  };
  const char first = lo_zeros ? lo[0] : char(lo[0] + 1);
  const char last = hi_nines ? hi[0] : char(hi[0] - 1);
  if (!lo_zeros) {
    Seq s = prefix;
    s.push_back(b_.byte(uint8_t(lo[0])));
    same_length(lo_rest, std::string(lo_rest.size(), '9'), std::move(s), out);
  }
  if (first <= last) free_digits(prefix, first, last, lo_rest.size());
  if (!hi_nines) {
    Seq s = prefix;
    s.push_back(b_.byte(uint8_t(hi[0])));
    same_length(std::string(hi_rest.size(), '0'), hi_rest, std::move(s), out);
  }
}

void JsonNumberRanges::nonneg_range(int64_t lo, int64_t hi, const Seq& prefix, const Seq& suffix, std::vector<Seq>* out) {
  if (hi >= 0 && hi < lo) return;
  const std::string a = digits(lo);
  const size_t last_len = hi >= 0 ? digits(hi).size() : a.size();
  std::vector<Seq> alts;
  for (size_t len = a.size(); len <= last_len; ++len) {
    std::string from = a;
    if (len != a.size()) {  // 10...0 (built in place: GCC 12 warns, falsely, on "1" + string)
      from.assign(len, '0');
      from[0] = '1';
    }
    const std::string to = (hi >= 0 && len == last_len) ? digits(hi) : std::string(len, '9');
    same_length(from, to, prefix, &alts);
  }
  if (hi < 0 && a.size() < size_t(kJsonMaxDigits)) {  // the longer numbers, up to 16 digits
    Seq s = prefix;
    s.push_back(b_.bytes(ByteSet().add_range('1', '9')));
    for (size_t k = 0; k < a.size(); ++k) s.push_back(b_.bytes(ByteSet().add_range('0', '9')));
    s.push_back(ref(digits_rule(0, int64_t(kJsonMaxDigits) - int64_t(a.size()) - 1, "int-more")));
    alts.push_back(std::move(s));
  }
  for (Seq& s : alts) {
    s.insert(s.end(), suffix.begin(), suffix.end());
    out->push_back(std::move(s));
  }
}

void JsonNumberRanges::nonneg_decimal(int64_t a, bool a_excl, int64_t hi, bool hi_excl, const Seq& prefix,
                                      std::vector<Seq>* out, const std::string& name, uint32_t frac) {
  const Seq frac_opt = {ref(frac)};
  // a with a fraction that is not all zeros: ".0{0,14}[1-9][0-9]{0,14}"
  const uint32_t nz_zeros = b_.repeat(lit("0"), 0, kJsonMaxDigits - 2, name + "-nz0");
  const Seq frac_nonzero = {b_.byte('.'), ref(nz_zeros), b_.bytes(ByteSet().add_range('1', '9')),
                            ref(digits_rule(0, kJsonMaxDigits - 2, name + "-nzd"))};
  const bool bounded = hi >= 0;
  // The whole numbers strictly inside get any fraction.
  const int64_t inner_lo = a_excl ? a + 1 : a;
  const int64_t inner_hi = bounded ? hi - 1 : -1;
  if (!bounded || inner_lo <= inner_hi) nonneg_range(inner_lo, inner_hi, prefix, frac_opt, out);
  if (a_excl && (!bounded || a < hi)) out->push_back(cat({prefix, lit(digits(a)), frac_nonzero}));
  if (bounded && !hi_excl) {
    const uint32_t zero_frac =
        b_.repeat(cat({lit("."), {ref(b_.repeat(lit("0"), 1, kJsonMaxDigits, name + "-hz"))}}), 0, 1, name + "-hzf");
    out->push_back(cat({prefix, lit(digits(hi)), {ref(zero_frac)}}));
  }
}

uint32_t JsonNumberRanges::integer_range(const JsonBounds& bd, const std::string& name) {
  std::vector<Seq> alts;
  const int64_t lo = bd.lo.value_or(INT64_MIN), hi = bd.hi.value_or(INT64_MAX);
  if (lo < 0) {  // -y with y in [max(1, -hi), -lo]
    const int64_t ylo = hi < 0 ? -hi : 1;
    nonneg_range(ylo, bd.lo ? -lo : -1, lit("-"), {}, &alts);
  }
  if (hi >= 0) nonneg_range(std::max<int64_t>(lo, 0), bd.hi ? hi : -1, {}, {}, &alts);
  const uint32_t r = b_.add_rule(name);
  for (const Seq& s : alts) b_.add_alt(r, s);
  return r;
}

uint32_t JsonNumberRanges::number_range(const JsonBounds& bd, const std::string& name, uint32_t frac) {
  std::vector<Seq> alts;
  const bool neg = !bd.lo || *bd.lo < 0;
  const bool nonneg = !bd.hi || *bd.hi > 0 || (*bd.hi == 0 && !bd.hi_excl);
  if (neg) {
    // x = -y, y > 0: y >= -hi (when hi < 0), y <= -lo.
    const bool hi_neg = bd.hi && *bd.hi < 0;
    nonneg_decimal(hi_neg ? -*bd.hi : 0, hi_neg ? bd.hi_excl : true, bd.lo ? -*bd.lo : -1, bd.lo_excl, lit("-"), &alts,
                   name + "-neg", frac);
  }
  if (nonneg) {
    const bool lo_pos = bd.lo && *bd.lo >= 0;
    nonneg_decimal(lo_pos ? *bd.lo : 0, lo_pos ? bd.lo_excl : false, bd.hi ? *bd.hi : -1, bd.hi ? bd.hi_excl : false,
                   {}, &alts, name + "-pos", frac);
  }
  const uint32_t r = b_.add_rule(name);
  for (const Seq& s : alts) b_.add_alt(r, s);
  return r;
}

}  // namespace kt
