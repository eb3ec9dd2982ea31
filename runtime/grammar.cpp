// Grammar construction and its checks (grammar.h).
#include "runtime/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <unordered_map>

namespace kt {

namespace {

uint32_t sat_add(uint32_t a, uint32_t b) { return std::min<uint64_t>(uint64_t(a) + b, Grammar::kInfinite); }

void fnv(uint64_t* h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    *h ^= (v >> (8 * i)) & 0xff;
    *h *= 0x100000001b3ull;
  }
}

// Appends one byte as GBNF writes it. (Appending, not operator+ on
// temporaries: GCC 12 warns -Wrestrict on those, wrongly.)
void put_byte(std::string& out, uint8_t b, bool in_class) {
  static const char* hex = "0123456789ABCDEF";
  const bool special = b == '\\' || b == '"' || (in_class && (b == ']' || b == '-' || b == '^'));
  if (b >= 0x20 && b < 0x7f && !special) {
    out.push_back(char(b));
  } else if (special) {
    out.push_back('\\');
    out.push_back(char(b));
  } else {
    out.append("\\x");
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
}

void put_set(std::string& out, const ByteSet& s) {
  int n = 0, single = -1;
  for (int b = 0; b < 256; ++b)
    if (s.has(uint8_t(b))) ++n, single = b;
  if (n == 1) {
    out.push_back('"');
    put_byte(out, uint8_t(single), false);
    out.push_back('"');
    return;
  }
  out.push_back('[');
  for (int b = 0; b < 256;) {
    if (!s.has(uint8_t(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.has(uint8_t(e + 1))) ++e;
    put_byte(out, uint8_t(b), true);
    if (e > b + 1) out.push_back('-');
    if (e > b) put_byte(out, uint8_t(e), true);
    b = e + 1;
  }
  out.push_back(']');
}

}  // namespace

std::string Grammar::to_text() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += names_[r] + " ::=";
    for (size_t a = 0; a < rules_[r].size(); ++a) {
      if (a) out += " |";
      uint32_t pos = rules_[r][a];
      if (elements_[pos].kind == Kind::End) out += " \"\"";
      for (; elements_[pos].kind != Kind::End; ++pos) {
        const Element& e = elements_[pos];
        out += " ";
        if (e.kind == Kind::Bytes)
          put_set(out, sets_[e.arg]);
        else
          out += names_[e.arg];
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t GrammarBuilder::add_rule(std::string name) {
  if (g_.rules_.size() >= limits_.max_rules) {
    fail("the grammar needs more than " + std::to_string(limits_.max_rules) + " rules");
    // Keep handing out valid ids so that callers need not check each one.
    if (g_.rules_.empty()) {
      g_.rules_.emplace_back();
      g_.names_.push_back("overflow");
    }
    return uint32_t(g_.rules_.size() - 1);
  }
  g_.rules_.emplace_back();
  g_.names_.push_back(std::move(name));
  return uint32_t(g_.rules_.size() - 1);
}

void GrammarBuilder::add_alt(uint32_t rule, const Seq& seq) {
  if (failed()) return;
  if (g_.elements_.size() + seq.size() + 1 > limits_.max_elements) {
    fail("the grammar needs more than " + std::to_string(limits_.max_elements) + " elements");
    return;
  }
  g_.rules_[rule].push_back(uint32_t(g_.elements_.size()));
  g_.elements_.insert(g_.elements_.end(), seq.begin(), seq.end());
  g_.elements_.push_back({Grammar::Kind::End, rule});
}

GrammarBuilder::Element GrammarBuilder::bytes(const ByteSet& set) {
  const std::string key(reinterpret_cast<const char*>(set.bits), sizeof set.bits);
  if (auto it = set_index_.find(key); it != set_index_.end()) return {Grammar::Kind::Bytes, it->second};
  if (g_.sets_.size() >= limits_.max_sets) {
    fail("the grammar needs more than " + std::to_string(limits_.max_sets) + " byte sets");
    return {Grammar::Kind::Bytes, 0};
  }
  g_.sets_.push_back(set);
  set_index_.emplace(key, uint32_t(g_.sets_.size() - 1));
  return {Grammar::Kind::Bytes, uint32_t(g_.sets_.size() - 1)};
}

void GrammarBuilder::append_literal(Seq& seq, std::string_view text) {
  for (char c : text) seq.push_back(byte(uint8_t(c)));
}

uint32_t GrammarBuilder::one_of_literals(const std::vector<std::string>& texts, const std::string& name) {
  struct Node {
    std::map<uint8_t, uint32_t> next;
    bool terminal = false;
  };
  std::vector<Node> nodes(1);
  for (const std::string& t : texts) {
    uint32_t n = 0;
    for (char c : t) {
      auto it = nodes[n].next.find(uint8_t(c));
      if (it == nodes[n].next.end()) {
        nodes.emplace_back();
        it = nodes[n].next.emplace(uint8_t(c), uint32_t(nodes.size() - 1)).first;
      }
      n = it->second;
    }
    nodes[n].terminal = true;
  }
  // A rule per branching node; chains of one child are written as literals.
  std::function<uint32_t(uint32_t, const std::string&)> build = [&](uint32_t n, const std::string& rname) {
    const uint32_t rule = add_rule(rname);
    if (nodes[n].terminal) add_alt(rule, {});
    int k = 0;
    for (const auto& [b, child] : nodes[n].next) {
      Seq seq{byte(b)};
      uint32_t c = child;
      while (!nodes[c].terminal && nodes[c].next.size() == 1) {
        seq.push_back(byte(nodes[c].next.begin()->first));
        c = nodes[c].next.begin()->second;
      }
      if (!nodes[c].next.empty()) seq.push_back(ref(build(c, rname + "-" + std::to_string(k))));
      add_alt(rule, seq);
      ++k;
      if (failed()) break;
    }
    return rule;
  };
  return build(0, name);
}

uint32_t GrammarBuilder::repeat(const Seq& item, int64_t min, int64_t max, const std::string& name) {
  const uint32_t rule = add_rule(name);
  Seq seq;
  for (int64_t i = 0; i < min && !failed(); ++i) {
    seq.insert(seq.end(), item.begin(), item.end());
    if (seq.size() > limits_.max_elements) fail("the grammar needs more than " + std::to_string(limits_.max_elements) + " elements");
  }
  if (max < 0) {
    const uint32_t star = add_rule(name + "-star");
    Seq again = item;
    again.push_back(ref(star));
    add_alt(star, again);
    add_alt(star, {});
    seq.push_back(ref(star));
  } else if (max > min) {
    // opt_k ::= item opt_{k-1} | "" ; the innermost has no tail.
    uint32_t inner = 0;
    for (int64_t k = 1; k <= max - min && !failed(); ++k) {
      const uint32_t opt = add_rule(name + "-opt" + std::to_string(k));
      Seq s = item;
      if (k > 1) s.push_back(ref(inner));
      add_alt(opt, s);
      add_alt(opt, {});
      inner = opt;
    }
    seq.push_back(ref(inner));
  }
  add_alt(rule, seq);
  return rule;
}

uint32_t GrammarBuilder::repeat_separated(const Seq& item, const Seq& sep, int64_t min, int64_t max,
                                          const std::string& name) {
  const uint32_t rule = add_rule(name);
  if (max == 0) {
    add_alt(rule, {});
    return rule;
  }
  Seq more = sep;
  more.insert(more.end(), item.begin(), item.end());
  const uint32_t tail = repeat(more, std::max<int64_t>(min, 1) - 1, max < 0 ? -1 : max - 1, name + "-more");
  Seq first = item;
  first.push_back(ref(tail));
  add_alt(rule, first);
  if (min == 0) add_alt(rule, {});
  return rule;
}

// Left recursion: r -> s when s can come first in an alternative of r (after
// rules that may match nothing). A cycle would expand forever.
Status GrammarBuilder::check_left_recursion(const Grammar& g) {
  const size_t n_rules = g.n_rules();
  std::vector<std::vector<uint32_t>> first(n_rules);
  for (uint32_t r = 0; r < n_rules; ++r)
    for (uint32_t start : g.rules_[r])
      for (uint32_t p = start; g.elements_[p].kind == Grammar::Kind::Rule; ++p) {
        first[r].push_back(g.elements_[p].arg);
        if (g.rule_min_[g.elements_[p].arg] != 0) break;
      }
  std::vector<uint8_t> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
  for (uint32_t s = 0; s < n_rules; ++s) {
    if (color[s]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{s, 0}};
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = first[r][i++];
      if (color[t] == 1) {
        std::string cycle;
        size_t from = 0;
        while (path[from].first != t) ++from;
        for (size_t k = from; k < path.size() && k < from + 8; ++k) cycle += g.names_[path[k].first] + " -> ";
        if (path.size() - from > 8) cycle += "... -> ";
        return err("grammar: a cycle that consumes no input (a $ref cycle?): ", cycle, g.names_[t]);
      }
      if (color[t] == 0) {
        color[t] = 1;
        path.push_back({t, 0});
      }
    }
  }
  return ok_status();
}

Result<Grammar> GrammarBuilder::finish(uint32_t root) {
  if (failed()) return err(error_);
  Grammar& g = g_;
  const size_t n_rules = g.rules_.size();
  if (root >= n_rules) return err("grammar: no root rule");
  for (size_t r = 0; r < n_rules; ++r)
    if (g.rules_[r].empty()) return err("grammar: rule '", g.names_[r], "' has no alternatives");
  g.root_ = root;

  // Shortest derivations (Knuth's generalization of Dijkstra): an
  // alternative's length is known once every rule in it is; a rule's is the
  // least of its alternatives', taken in increasing order.
  struct Alt {
    uint32_t rule, start;
    uint32_t unresolved = 0;
    uint32_t sum = 0;
  };
  std::vector<Alt> alts;
  std::vector<std::vector<uint32_t>> uses(n_rules);  // rule -> alternatives using it (with repeats)
  for (uint32_t r = 0; r < n_rules; ++r)
    for (uint32_t start : g.rules_[r]) {
      Alt a{r, start};
      for (uint32_t p = start; g.elements_[p].kind != Grammar::Kind::End; ++p) {
        if (g.elements_[p].kind == Grammar::Kind::Bytes) {
          a.sum = sat_add(a.sum, 1);
        } else {
          ++a.unresolved;
          uses[g.elements_[p].arg].push_back(uint32_t(alts.size()));
        }
      }
      alts.push_back(a);
    }
  g.rule_min_.assign(n_rules, Grammar::kInfinite);
  std::vector<bool> done(n_rules, false);
  using Item = std::pair<uint32_t, uint32_t>;  // (length, rule)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pq;
  for (const Alt& a : alts)
    if (a.unresolved == 0) pq.push({a.sum, a.rule});
  while (!pq.empty()) {
    const auto [len, r] = pq.top();
    pq.pop();
    if (done[r] || len >= Grammar::kInfinite) continue;
    done[r] = true;
    g.rule_min_[r] = len;
    for (uint32_t ai : uses[r]) {
      Alt& a = alts[ai];
      a.sum = sat_add(a.sum, len);
      if (--a.unresolved == 0) pq.push({a.sum, a.rule});
    }
  }
  if (!done[root]) {
    KT_TRY(check_left_recursion(g));  // the likelier reason, when it is one
    return err("grammar: '", g.names_[root], "' cannot finish: every way through it recurses forever");
  }
  // Alternatives that cannot finish are dropped: the matcher must never enter
  // a path without an end.
  for (uint32_t r = 0; r < n_rules; ++r) {
    std::vector<uint32_t> keep;
    for (uint32_t start : g.rules_[r]) {
      bool finite = true;
      for (uint32_t p = start; g.elements_[p].kind != Grammar::Kind::End; ++p)
        if (g.elements_[p].kind == Grammar::Kind::Rule && !done[g.elements_[p].arg]) finite = false;
      if (finite) keep.push_back(start);
    }
    g.rules_[r] = std::move(keep);
  }

  g.suffix_min_.assign(g.elements_.size(), 0);
  for (size_t i = g.elements_.size(); i-- > 0;) {
    const Grammar::Element& e = g.elements_[i];
    if (e.kind == Grammar::Kind::End) continue;
    const uint32_t next = g.suffix_min_[i + 1];
    g.suffix_min_[i] = sat_add(e.kind == Grammar::Kind::Bytes ? 1 : g.rule_min_[e.arg], next);
  }

  KT_TRY(check_left_recursion(g));

  uint64_t h = 0xcbf29ce484222325ull;
  fnv(&h, g.elements_.size());
  for (const Grammar::Element& e : g.elements_) fnv(&h, (uint64_t(e.kind) << 32) | e.arg);
  for (const ByteSet& s : g.sets_)
    for (uint64_t w : s.bits) fnv(&h, w);
  for (const auto& alts_of : g.rules_) {
    fnv(&h, alts_of.size());
    for (uint32_t a : alts_of) fnv(&h, a);
  }
  fnv(&h, root);
  g.fingerprint_ = h;
  return std::move(g_);
}

}  // namespace kt
