// Code point sets and patterns as JSON-string grammar rules (regex_grammar.h).
#include "runtime/regex_grammar.h"

#include <algorithm>
#include <cctype>

namespace kt {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRegexDepth = 64;

int utf8_encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = uint8_t(0xC0 | (cp >> 6));
    out[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = uint8_t(0xE0 | (cp >> 12));
    out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (cp >> 18));
  out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// The UTF-8 encodings of [lo, hi] as sequences of byte ranges (the classic
// split: by encoded length, then until every continuation byte spans freely).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  for (uint32_t m : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= m && hi > m) {
      utf8_sequences(lo, m, out);
      utf8_sequences(m + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = utf8_encode(lo, a);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  utf8_encode(hi, b);
  ByteRanges seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out->push_back(std::move(seq));
}

std::string json_escape_of(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\f': return "\\f";
    case '\r': return "\\r";
  }
  static const char* hex = "0123456789abcdef";
  return std::string("\\u00") + hex[cp >> 4] + hex[cp & 15];
}

// ---- patterns ----------------------------------------------------------

struct RNode {
  enum Kind { Empty, Set, Concat, Alt, Repeat, Begin, End } kind;
  explicit RNode(Kind k) : kind(k) {}
  CodePointSet set;
  std::vector<int> kids;
  int64_t min = 0, max = 0;
};

class RegexParser {
 public:
  RegexParser(std::string_view p, int64_t max_repeat) : p_(p), max_repeat_(max_repeat) {}

  int parse() {
    const int root = alternation();
    if (error_.empty() && i_ < p_.size()) fail("unbalanced ')'");
    return root;
  }
  const std::string& error() const { return error_; }
  std::vector<RNode>& nodes() { return nodes_; }

 private:
  int add(RNode n) {
    nodes_.push_back(std::move(n));
    return int(nodes_.size() - 1);
  }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = "pattern offset " + std::to_string(i_) + ": " + what;
  }
  bool more() const { return i_ < p_.size() && error_.empty(); }

  uint32_t code_point() {  // decodes the UTF-8 character at i_ (the request's JSON was valid UTF-8)
    const uint8_t c = uint8_t(p_[i_]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i_ + size_t(n) > p_.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(p_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return std::min(cp, kMaxCodePoint);
  }

  int alternation() {
    if (++depth_ > kMaxRegexDepth) {
      fail("nested deeper than " + std::to_string(kMaxRegexDepth) + " groups");
      return add(RNode(RNode::Empty));
    }
    std::vector<int> alts{concatenation()};
    while (more() && p_[i_] == '|') {
      ++i_;
      alts.push_back(concatenation());
    }
    --depth_;
    if (alts.size() == 1) return alts[0];
    RNode n(RNode::Alt);
    n.kids = std::move(alts);
    return add(std::move(n));
  }

  int concatenation() {
    RNode n(RNode::Concat);
    while (more() && p_[i_] != '|' && p_[i_] != ')') n.kids.push_back(repetition());
    return add(std::move(n));
  }

  bool number(int64_t* v) {
    if (!more() || p_[i_] < '0' || p_[i_] > '9') return false;
    int64_t x = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      x = std::min<int64_t>(x * 10 + (p_[i_] - '0'), int64_t(1) << 40);
      ++i_;
    }
    *v = x;
    return true;
  }

  int repetition() {
    int atom_node = atom();
    while (more()) {
      int64_t lo = 0, hi = -1;
      const char c = p_[i_];
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        lo = 1, ++i_;
      } else if (c == '?') {
        hi = 1, ++i_;
      } else if (c == '{') {
        const size_t at = i_++;
        if (!number(&lo)) {  // ECMAScript: a '{' that starts no count is a literal
          i_ = at;
          break;
        }
        hi = lo;
        if (more() && p_[i_] == ',') {
          ++i_;
          hi = -1;
          number(&hi);
        }
        if (!more() || p_[i_] != '}') {
          fail("a count {m,n} is not closed");
          return atom_node;
        }
        ++i_;
        if (hi >= 0 && hi < lo) fail("a count {m,n} with n < m");
      } else {
        break;
      }
      if (lo > max_repeat_ || hi > max_repeat_) fail("counts above " + std::to_string(max_repeat_) + " are not supported");
      if (more() && p_[i_] == '?') ++i_;  // lazy: the same strings
      if (nodes_[size_t(atom_node)].kind == RNode::Begin || nodes_[size_t(atom_node)].kind == RNode::End)
        fail("a quantifier on an anchor");
      RNode n(RNode::Repeat);
      n.kids = {atom_node};
      n.min = lo;
      n.max = hi;
      atom_node = add(std::move(n));
    }
    return atom_node;
  }

  int set_node(CodePointSet s) {
    RNode n(RNode::Set);
    n.set = normalize(std::move(s));
    return add(std::move(n));
  }

  // \d \w \s and negations; returns false when c is not a class escape.
  static bool class_escape(char c, CodePointSet* out) {
    CodePointSet s;
    switch (c) {
      case 'd': case 'D': s = {{'0', '9'}}; break;
      case 'w': case 'W': s = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; break;
      case 's': case 'S':
        s = {{9, 13}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
             {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
        break;
      default: return false;
    }
    *out = (c >= 'A' && c <= 'Z') ? complement(normalize(s)) : normalize(s);
    return true;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i_ >= p_.size() || !std::isxdigit(uint8_t(p_[i_]))) {
        fail("a \\x or \\u escape needs hex digits");
        return 0;
      }
      const char h = p_[i_++];
      v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After a backslash: a single code point (outside classes \b is refused).
  bool escape_char(bool in_class, uint32_t* cp) {
    const char c = p_[i_++];
    switch (c) {
      case 'n': *cp = '\n'; return true;
      case 'r': *cp = '\r'; return true;
      case 't': *cp = '\t'; return true;
      case 'f': *cp = '\f'; return true;
      case 'v': *cp = '\v'; return true;
      case '0': *cp = 0; return true;
      case 'x': *cp = hex_digits(2); return true;
      case 'u': *cp = hex_digits(4); return true;
      case 'b':
        if (in_class) {
          *cp = '\b';
          return true;
        }
        fail("word boundaries (\\b) are not supported");
        return false;
      case 'B': fail("word boundaries (\\B) are not supported"); return false;
      case 'c': case 'k': case 'p': case 'P': fail(std::string("the escape \\") + c + " is not supported"); return false;
    }
    if (c >= '1' && c <= '9') {
      fail("backreferences are not supported");
      return false;
    }
    --i_;
    *cp = code_point();  // an escaped literal: \. \\ \/ \- ...
    return true;
  }

  int atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (i_ + 1 < p_.size() && p_[i_] == '?') {
        if (p_[i_ + 1] != ':') {
          fail("lookaround and named groups are not supported");
          return add(RNode(RNode::Empty));
        }
        i_ += 2;
      }
      const int inner = alternation();
      if (!more() || p_[i_] != ')') {
        fail("a group is not closed");
        return inner;
      }
      ++i_;
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return set_node(complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})));
    }
    if (c == '^') {
      ++i_;
      return add(RNode(RNode::Begin));
    }
    if (c == '$') {
      ++i_;
      return add(RNode(RNode::End));
    }
    if (c == '*' || c == '+' || c == '?') {
      fail("nothing to repeat");
      ++i_;
      return add(RNode(RNode::Empty));
    }
    if (c == '\\') {
      ++i_;
      if (i_ >= p_.size()) {
        fail("a pattern cannot end with a backslash");
        return add(RNode(RNode::Empty));
      }
      CodePointSet s;
      if (class_escape(p_[i_], &s)) {
        ++i_;
        return set_node(std::move(s));
      }
      uint32_t cp = 0;
      if (!escape_char(false, &cp)) return add(RNode(RNode::Empty));
      return set_node({{cp, cp}});
    }
    const uint32_t cp = code_point();
    return set_node({{cp, cp}});
  }

  int char_class() {
    ++i_;  // [
    bool negate = false;
    if (more() && p_[i_] == '^') negate = true, ++i_;
    CodePointSet s;
    while (more() && p_[i_] != ']') {
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        if (i_ >= p_.size()) break;
        CodePointSet cls;
        if (class_escape(p_[i_], &cls)) {
          ++i_;
          s.insert(s.end(), cls.begin(), cls.end());
          continue;
        }
        if (!escape_char(true, &lo)) return add(RNode(RNode::Empty));
      } else {
        lo = code_point();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          if (i_ >= p_.size() || !escape_char(true, &hi)) return add(RNode(RNode::Empty));
        } else {
          hi = code_point();
        }
        if (hi < lo) fail("a class range out of order");
      }
      s.push_back({lo, hi});
    }
    if (!more() || p_[i_] != ']') {
      fail("a class [...] is not closed");
      return add(RNode(RNode::Empty));
    }
    ++i_;
    s = normalize(std::move(s));
    return set_node(negate ? complement(s) : s);
  }

  std::string_view p_;
  size_t i_ = 0;
  int64_t max_repeat_;
  int depth_ = 0;
  std::vector<RNode> nodes_;
  std::string error_;
};

class RegexCompiler {
 public:
  RegexCompiler(GrammarBuilder& b, std::vector<RNode>& nodes, std::string name)
      : b_(b), n_(nodes), name_(std::move(name)) {}

  bool nullable(int i) const {
    const RNode& n = n_[size_t(i)];
    switch (n.kind) {
      case RNode::Empty: case RNode::Begin: case RNode::End: return true;
      case RNode::Set: return false;
      case RNode::Concat:
        for (int k : n.kids)
          if (!nullable(k)) return false;
        return true;
      case RNode::Alt:
        for (int k : n.kids)
          if (nullable(k)) return true;
        return false;
      case RNode::Repeat: return n.min == 0 || nullable(n.kids[0]);
    }
    return true;
  }

  GrammarBuilder::Seq compile(int i) {
    const RNode& n = n_[size_t(i)];
    GrammarBuilder::Seq out;
    switch (n.kind) {
      case RNode::Empty: break;
      case RNode::Begin: case RNode::End: fail("anchors (^ $) are supported only at the ends of the pattern"); break;
      case RNode::Set: {
        if (n.set.empty()) {
          fail("a class that matches nothing");
          break;
        }
        // Printable ASCII other than " and \ is one byte set; anything else a rule.
        bool plain = true;
        for (const auto& [lo, hi] : n.set)
          if (lo < 0x20 || hi > 0x7E || (lo <= '"' && hi >= '"') || (lo <= '\\' && hi >= '\\')) plain = false;
        if (plain) {
          ByteSet bs;
          for (const auto& [lo, hi] : n.set) bs.add_range(uint8_t(lo), uint8_t(hi));
          out.push_back(b_.bytes(bs));
        } else {
          out.push_back(GrammarBuilder::ref(json_string_char_rule(b_, n.set, name_ + "-c" + std::to_string(k_++))));
        }
        break;
      }
      case RNode::Concat:
        for (int k : n.kids) {
          GrammarBuilder::Seq s = compile(k);
          out.insert(out.end(), s.begin(), s.end());
        }
        break;
      case RNode::Alt: {
        const uint32_t r = b_.add_rule(name_ + "-alt" + std::to_string(k_++));
        for (int k : n.kids) b_.add_alt(r, compile(k));
        out.push_back(GrammarBuilder::ref(r));
        break;
      }
      case RNode::Repeat: {
        if (n.max < 0 && nullable(n.kids[0])) {
          fail("a group that can match nothing, repeated without bound (like (a*)*)");
          break;
        }
        out.push_back(GrammarBuilder::ref(b_.repeat(compile(n.kids[0]), n.min, n.max, name_ + "-rep" + std::to_string(k_++))));
        break;
      }
    }
    return out;
  }

  void fail(const std::string& m) {
    if (error_.empty()) error_ = m;
  }
  const std::string& error() const { return error_; }

 private:
  GrammarBuilder& b_;
  std::vector<RNode>& n_;
  std::string name_;
  int k_ = 0;
  std::string error_;
};

}  // namespace

CodePointSet normalize(CodePointSet set) {
  std::sort(set.begin(), set.end());
  CodePointSet out;
  for (auto [lo, hi] : set) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

CodePointSet complement(const CodePointSet& set) {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : set) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

uint32_t json_string_char_rule(GrammarBuilder& b, const CodePointSet& set, const std::string& name) {
  const uint32_t rule = b.add_rule(name);
  ByteSet ascii;
  for (const auto& [lo, hi] : set) {
    for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0x7F); ++cp) {
      if (cp < 0x20 || cp == '"' || cp == '\\')
        b.add_alt(rule, b.literal(json_escape_of(cp)));
      else
        ascii.add(uint8_t(cp));
    }
  }
  if (!ascii.empty()) b.add_alt(rule, {b.bytes(ascii)});
  std::vector<ByteRanges> seqs;
  for (const auto& [lo, hi] : set)
    if (hi >= 0x80) utf8_sequences(std::max<uint32_t>(lo, 0x80), hi, &seqs);
  for (const ByteRanges& seq : seqs) {
    GrammarBuilder::Seq s;
    for (const auto& [lo, hi] : seq) s.push_back(b.bytes(ByteSet().add_range(lo, hi)));
    b.add_alt(rule, s);
  }
  return rule;
}

Result<uint32_t> json_string_pattern_rule(GrammarBuilder& b, std::string_view pattern, const std::string& name,
                                          int64_t max_repeat) {
  RegexParser parser(pattern, max_repeat);
  const int root = parser.parse();
  if (!parser.error().empty()) return err(parser.error());
  std::vector<RNode>& nodes = parser.nodes();
  RegexCompiler compiler(b, nodes, name);

  // Each top-level alternative: anchors at its ends are stripped; an
  // unanchored side may have any text.
  std::vector<int> alts;
  if (nodes[size_t(root)].kind == RNode::Alt)
    alts = nodes[size_t(root)].kids;
  else
    alts = {root};
  uint32_t any_star = 0;
  bool have_any = false;
  auto any = [&]() {
    if (!have_any) {
      const uint32_t any_char = json_string_char_rule(b, {{0, kMaxCodePoint}}, name + "-any");
      any_star = b.repeat({GrammarBuilder::ref(any_char)}, 0, -1, name + "-anys");
      have_any = true;
    }
    return GrammarBuilder::ref(any_star);
  };
  const uint32_t rule = b.add_rule(name);
  for (int a : alts) {
    std::vector<int> kids = nodes[size_t(a)].kind == RNode::Concat ? nodes[size_t(a)].kids : std::vector<int>{a};
    bool begin = false, end = false;
    while (!kids.empty() && nodes[size_t(kids.front())].kind == RNode::Begin) begin = true, kids.erase(kids.begin());
    while (!kids.empty() && nodes[size_t(kids.back())].kind == RNode::End) end = true, kids.pop_back();
    GrammarBuilder::Seq seq;
    if (!begin) seq.push_back(any());
    for (int k : kids) {
      GrammarBuilder::Seq s = compiler.compile(k);
      seq.insert(seq.end(), s.begin(), s.end());
    }
    if (!end) seq.push_back(any());
    b.add_alt(rule, seq);
  }
  if (!compiler.error().empty()) return err(compiler.error());
  return rule;
}

}  // namespace kt
