// Parser of SplitRegex patterns: the ECMAScript subset the pre-tokenizer
// patterns use, into the tree of pretokenize_regex_syntax.h. In the collapsed
// mode \p{X} becomes the class of X's stand-in byte plus X's ASCII members.
#include "runtime/pretokenize_regex_syntax.h"

#include <string>

namespace kt::split_regex {

const std::vector<CollapsedCategory>& collapsed_categories() {
  static const std::vector<CollapsedCategory> k = {
      {"N", kCollapsedNumber, {{'0', '9'}}},
      {"L", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      // llama.cpp collapses every letter to one stand-in: \p{Lu} is \p{L} there.
      {"Lu", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      {"Ll", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      {"Lt", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      {"Lm", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      {"Lo", kCollapsedLetter, {{'A', 'Z'}, {'a', 'z'}}},
      {"P", kCollapsedPunct,
       {{0x21, 0x23}, {0x25, 0x2A}, {0x2C, 0x2F}, {0x3A, 0x3B}, {0x3F, 0x40}, {0x5B, 0x5D},
        {0x5F, 0x5F}, {0x7B, 0x7B}, {0x7D, 0x7D}}},
      {"M", kCollapsedMark, {}},
      {"S", kCollapsedSymbol,
       {{0x24, 0x24}, {0x2B, 0x2B}, {0x3C, 0x3E}, {0x5E, 0x5E}, {0x60, 0x60}, {0x7C, 0x7C}}},
  };
  return k;
}

namespace {

void normalize(std::vector<Range>& r) {
  std::sort(r.begin(), r.end());
  std::vector<Range> out;
  for (const Range& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  r = std::move(out);
}

std::vector<Range> complement(std::vector<Range> r) {
  normalize(r);
  std::vector<Range> out;
  uint32_t next = 0;
  for (const Range& x : r) {
    if (x.first > next) out.push_back({next, x.first - 1});
    next = x.second + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

// ASCII classes: std::regex in the "C" locale.
const std::vector<Range> kSpace = {{0x09, 0x0D}, {0x20, 0x20}};
const std::vector<Range> kDigit = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::kChar: case Node::kClass: return false;
    case Node::kSeq:
      for (const Node& k : n.kids) if (!nullable(k)) return false;
      return true;
    case Node::kAlt:
      for (const Node& k : n.kids) if (nullable(k)) return true;
      return false;
    case Node::kRepeat: return n.min == 0 || nullable(n.kids[0]);
    default: return true;
  }
}

std::vector<uint32_t> decode_pattern(std::string_view s) {
  // Patterns are our own constants: well-formed UTF-8.
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

class Parser {
 public:
  Parser(std::string_view pattern, SplitRegex::Mode mode, std::vector<CharClass>* classes)
      : src_(pattern), p_(decode_pattern(pattern)), mode_(mode), classes_(classes) {}

  Result<Node> parse() {
    Node n = disjunction();
    if (!error_.empty()) return fail();
    if (pos_ != p_.size()) {
      error_ = "unbalanced ')'";
      return fail();
    }
    return n;
  }

 private:
  Error fail() const {
    return err("split regex \"", src_, "\": code point ", pos_, ": ", error_);
  }
  bool more() const { return pos_ < p_.size() && error_.empty(); }
  uint32_t peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : 0; }

  Node disjunction() {
    Node alt;
    alt.kind = Node::kAlt;
    alt.kids.push_back(alternative());
    while (more() && peek() == '|') {
      ++pos_;
      alt.kids.push_back(alternative());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node alternative() {
    Node seq;
    seq.kind = Node::kSeq;
    while (more() && peek() != '|' && peek() != ')') seq.kids.push_back(term());
    return seq;
  }

  Node term() {
    Node atom_node = atom();
    if (!error_.empty() || atom_node.kind == Node::kBegin || atom_node.kind == Node::kEnd ||
        atom_node.kind == Node::kLook)
      return atom_node;
    int lo = -1, hi = -1;
    const uint32_t c = peek();
    if (c == '*') { lo = 0; hi = -1; ++pos_; }
    else if (c == '+') { lo = 1; hi = -1; ++pos_; }
    else if (c == '?') { lo = 0; hi = 1; ++pos_; }
    else if (c == '{') { if (!braces(&lo, &hi)) return atom_node; }
    else return atom_node;
    Node rep;
    rep.kind = Node::kRepeat;
    rep.min = lo;
    rep.max = hi;
    if (peek() == '?' && pos_ < p_.size()) { rep.greedy = false; ++pos_; }
    if (hi < 0 && nullable(atom_node)) error_ = "unbounded repetition of an empty-matching atom";
    rep.kids.push_back(std::move(atom_node));
    return rep;
  }

  bool braces(int* lo, int* hi) {
    ++pos_;  // '{'
    auto number = [&](int* out) {
      size_t start = pos_;
      long v = 0;
      while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9' && v < 10000) v = v * 10 + (p_[pos_++] - '0');
      *out = int(v);
      return pos_ > start;
    };
    if (!number(lo)) { error_ = "bad {} quantifier"; return false; }
    *hi = *lo;
    if (peek() == ',') {
      ++pos_;
      if (!number(hi)) *hi = -1;
    }
    if (peek() != '}' || (*hi >= 0 && *hi < *lo) || *lo > 1000 || *hi > 1000) {
      error_ = "bad {} quantifier";
      return false;
    }
    ++pos_;
    return true;
  }

  Node atom() {
    Node n;
    const uint32_t c = p_[pos_++];
    switch (c) {
      case '^': n.kind = Node::kBegin; return n;
      case '$': n.kind = Node::kEnd; return n;
      case '(': {
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == '=' || peek(1) == '!') {
            n.kind = Node::kLook;
            n.negative = peek(1) == '!';
            pos_ += 2;
            n.kids.push_back(disjunction());
            close_group();
            return n;
          } else {
            error_ = "unsupported group syntax";
            return n;
          }
        }
        n = disjunction();
        close_group();
        return n;
      }
      case '[': return class_atom();
      case '.': {
        std::vector<Range> r = {{'\n', '\n'}, {'\r', '\r'}};
        if (mode_ == SplitRegex::Mode::kWide) r.push_back({0x2028, 0x2029});
        return make_class(std::move(r), true);
      }
      case '\\': {
        std::vector<Range> set;
        uint32_t lit = 0;
        bool is_set = false;
        if (!escape(&set, &lit, &is_set)) return n;
        if (is_set) return make_class(std::move(set), false);
        return literal(lit);
      }
      case '*': case '+': case '?': case '{': case ')':
        error_ = "nothing to repeat or unbalanced group";
        return n;
      default: return literal(c);
    }
  }

  void close_group() {
    if (error_.empty() && peek() == ')' && pos_ < p_.size()) ++pos_;
    else if (error_.empty()) error_ = "missing ')'";
  }

  Node literal(uint32_t c) {
    Node n;
    if (mode_ == SplitRegex::Mode::kCollapsed && c >= 0x80) {
      // Collapsed text has no code points >= 128 left to match (llama.cpp refuses too).
      error_ = "non-ASCII character in a pattern that uses \\p{..}";
      return n;
    }
    n.kind = Node::kChar;
    n.ch = c;
    return n;
  }

  Node make_class(std::vector<Range> r, bool negated) {
    normalize(r);
    CharClass cc;
    cc.ranges = std::move(r);
    cc.negated = negated;
    classes_->push_back(std::move(cc));
    Node n;
    n.kind = Node::kClass;
    n.cls = int(classes_->size() - 1);
    return n;
  }

  // After a backslash. A class escape (\s \S \d \p{..} ...) fills *set and
  // sets *is_set; anything else is one literal code point in *lit.
  bool escape(std::vector<Range>* set, uint32_t* lit, bool* is_set) {
    if (pos_ >= p_.size()) { error_ = "trailing backslash"; return false; }
    const uint32_t e = p_[pos_++];
    *is_set = e == 's' || e == 'S' || e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 'p';
    switch (e) {
      case 's': *set = kSpace; return true;
      case 'S': *set = complement(kSpace); return true;
      case 'd': *set = kDigit; return true;
      case 'D': *set = complement(kDigit); return true;
      case 'w': *set = kWord; return true;
      case 'W': *set = complement(kWord); return true;
      case 'n': *lit = '\n'; return true;
      case 'r': *lit = '\r'; return true;
      case 't': *lit = '\t'; return true;
      case 'v': *lit = '\v'; return true;
      case 'f': *lit = '\f'; return true;
      case '0': *lit = 0; return true;
      case 'x': case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          const uint32_t h = peek();
          int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
          if (d < 0 || pos_ >= p_.size()) { error_ = "bad hex escape"; return false; }
          v = v * 16 + uint32_t(d);
          ++pos_;
        }
        *lit = v;
        return true;
      }
      case 'p': {
        if (mode_ != SplitRegex::Mode::kCollapsed || peek() != '{') {
          error_ = "\\p outside a recognised \\p{..}";
          return false;
        }
        const size_t close = std::find(p_.begin() + pos_, p_.end(), uint32_t('}')) - p_.begin();
        std::string name;
        for (size_t k = pos_ + 1; k < close && k < p_.size(); ++k) name += char(p_[k]);
        for (const CollapsedCategory& cat : collapsed_categories()) {
          if (name == cat.name) {
            *set = cat.ascii;
            set->push_back({cat.stand_in, cat.stand_in});
            pos_ = close + 1;
            return true;
          }
        }
        error_ = "unsupported property \\p{" + name + "}";
        return false;
      }
      case 'b': case 'B':
        error_ = "word boundaries are not supported";
        return false;
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          error_ = "unknown escape";
          return false;
        }
        *lit = e;
        return true;
    }
  }

  Node class_atom() {
    bool negated = false;
    if (peek() == '^' && pos_ < p_.size()) { negated = true; ++pos_; }
    std::vector<Range> set;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) { error_ = "missing ']'"; return Node{}; }
      uint32_t c = p_[pos_];
      if (c == ']' && !first) { ++pos_; break; }
      first = false;
      ++pos_;
      uint32_t lo = c;
      if (c == '\\') {
        std::vector<Range> sub;
        bool is_set = false;
        if (!escape(&sub, &lo, &is_set)) return Node{};
        if (is_set) {
          set.insert(set.end(), sub.begin(), sub.end());
          continue;
        }
      }
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi = p_[pos_++];
        if (hi == '\\') {
          std::vector<Range> sub;
          bool is_set = false;
          if (!escape(&sub, &hi, &is_set)) return Node{};
          if (is_set) { error_ = "class escape as a range end"; return Node{}; }
        }
        if (hi < lo) { error_ = "range out of order"; return Node{}; }
        if (!collapsed_ok(lo) || !collapsed_ok(hi)) return Node{};
        set.push_back({lo, hi});
      } else {
        if (!collapsed_ok(lo)) return Node{};
        set.push_back({lo, lo});
      }
    }
    return make_class(std::move(set), negated);
  }

  bool collapsed_ok(uint32_t c) {
    if (mode_ == SplitRegex::Mode::kCollapsed && c >= 0x80) {
      error_ = "non-ASCII character in a pattern that uses \\p{..}";
      return false;
    }
    return true;
  }

  std::string_view src_;
  std::vector<uint32_t> p_;
  size_t pos_ = 0;
  SplitRegex::Mode mode_;
  std::vector<CharClass>* classes_;
  std::string error_;
};

}  // namespace

Result<Node> parse_pattern(std::string_view pattern, SplitRegex::Mode mode,
                           std::vector<CharClass>* classes) {
  return Parser(pattern, mode, classes).parse();
}

}  // namespace kt::split_regex
