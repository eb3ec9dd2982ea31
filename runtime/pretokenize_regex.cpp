// Compiler and backtracking matcher for SplitRegex (see the header). The
// parsed pattern (pretokenize_regex_parse.cpp) is compiled into instructions
// for a backtracking machine (as in Thompson/Pike programs, but run depth-first
// so that the first alternative and the longest greedy repetition win, which is
// what ECMAScript specifies); lookaheads become sub-programs run atomically.
#include "runtime/pretokenize_regex.h"

#include <algorithm>
#include <optional>

#include "runtime/pretokenize_regex_syntax.h"
#include "runtime/unicode_data.h"

namespace kt {

using namespace split_regex;  // this file's own internals

namespace {

enum class Op : uint8_t { kChar, kClass, kSplit, kJmp, kBegin, kEnd, kLook, kMatch };

struct Inst {
  Op op;
  bool negative = false;  // kLook
  uint32_t a = 0;         // kChar: code point; kClass: class; kSplit/kJmp: first target; kLook: sub-program
  uint32_t b = 0;         // kSplit: second (lower-priority) target
};

constexpr size_t kMaxInstructions = 1 << 16;

// The states (pc, sp) of the main program already reached in the current
// piece, as in RE2's bit-state backtracker. A depth-first search that reaches a
// state a second time can only do so after everything from the first visit
// failed (no path returns to a state without consuming input: unbounded loops
// of empty-matching bodies are refused), and a state's fate does not depend on
// where the attempt started, so later attempts in the same piece may skip it
// too. This keeps patterns like \s+$ linear on long runs of spaces, where
// plain backtracking (and std::regex) is quadratic.
class Visited {
 public:
  Visited(size_t n_pc, size_t base, size_t width) : n_pc_(n_pc), base_(base), bits_((n_pc * width + 63) / 64) {}
  bool test_and_set(uint32_t pc, size_t sp) {
    const size_t i = (sp - base_) * n_pc_ + pc;
    const uint64_t bit = uint64_t(1) << (i % 64);
    const bool seen = bits_[i / 64] & bit;
    bits_[i / 64] |= bit;
    max_sp_ = std::max(max_sp_, sp);
    return seen;
  }
  // After a match ending at sp: states from there on may lie on its path, so
  // they are forgotten before the search resumes at sp.
  void forget_from(size_t sp) {
    for (size_t q = sp; q <= max_sp_; ++q)
      for (size_t pc = 0; pc < n_pc_; ++pc) {
        const size_t i = (q - base_) * n_pc_ + pc;
        bits_[i / 64] &= ~(uint64_t(1) << (i % 64));
      }
    max_sp_ = 0;
  }

 private:
  size_t n_pc_, base_;
  std::vector<uint64_t> bits_;
  size_t max_sp_ = 0;
};

constexpr size_t kMaxVisitedBits = size_t(1) << 28;  // beyond this, plain backtracking

}  // namespace

struct SplitRegex::Program {
  Mode mode = Mode::kWide;
  std::vector<CharClass> classes;
  std::vector<std::vector<Inst>> subs;  // [0] is the pattern; the rest are lookahead bodies

  bool emit(const Node& n, size_t sub) {
    if (subs[sub].size() > kMaxInstructions) return false;
    switch (n.kind) {
      case Node::kEmpty: return true;
      case Node::kChar: subs[sub].push_back({Op::kChar, false, n.ch, 0}); return true;
      case Node::kClass: subs[sub].push_back({Op::kClass, false, uint32_t(n.cls), 0}); return true;
      case Node::kBegin: subs[sub].push_back({Op::kBegin}); return true;
      case Node::kEnd: subs[sub].push_back({Op::kEnd}); return true;
      case Node::kSeq:
        for (const Node& k : n.kids) if (!emit(k, sub)) return false;
        return true;
      case Node::kAlt: {
        std::vector<size_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          size_t split = SIZE_MAX;
          if (i + 1 < n.kids.size()) {
            split = subs[sub].size();
            subs[sub].push_back({Op::kSplit, false, uint32_t(split + 1), 0});
          }
          if (!emit(n.kids[i], sub)) return false;
          if (i + 1 < n.kids.size()) {
            jumps.push_back(subs[sub].size());
            subs[sub].push_back({Op::kJmp});
            subs[sub][split].b = uint32_t(subs[sub].size());
          }
        }
        for (size_t j : jumps) subs[sub][j].a = uint32_t(subs[sub].size());
        return true;
      }
      case Node::kRepeat: {
        const Node& body = n.kids[0];
        for (int i = 0; i < n.min; ++i) if (!emit(body, sub)) return false;
        if (n.max < 0) {
          const size_t loop = subs[sub].size();
          subs[sub].push_back({Op::kSplit});
          if (!emit(body, sub)) return false;
          subs[sub].push_back({Op::kJmp, false, uint32_t(loop), 0});
          set_split(sub, loop, loop + 1, subs[sub].size(), n.greedy);
          return true;
        }
        std::vector<size_t> splits;
        for (int i = n.min; i < n.max; ++i) {
          splits.push_back(subs[sub].size());
          subs[sub].push_back({Op::kSplit});
          if (!emit(body, sub)) return false;
        }
        for (size_t s : splits) set_split(sub, s, s + 1, subs[sub].size(), n.greedy);
        return true;
      }
      case Node::kLook: {
        const size_t inner = subs.size();
        subs.emplace_back();
        if (!emit(n.kids[0], inner)) return false;
        subs[inner].push_back({Op::kMatch});
        subs[sub].push_back({Op::kLook, n.negative, uint32_t(inner), 0});
        return true;
      }
    }
    return false;
  }

  void set_split(size_t sub, size_t at, size_t body, size_t after, bool greedy) {
    subs[sub][at].a = uint32_t(greedy ? body : after);
    subs[sub][at].b = uint32_t(greedy ? after : body);
  }

  // Depth-first run of subs[sub] from sp; the first thread to reach kMatch wins.
  // not_null rejects a match that consumed nothing (std::regex_iterator retries so).
  int64_t run(size_t sub, std::span<const uint32_t> s, size_t begin, size_t start, size_t end,
              bool not_null, Visited* visited = nullptr) const {
    const std::vector<Inst>& code = subs[sub];
    std::vector<std::pair<uint32_t, size_t>> stack;
    uint32_t pc = 0;
    size_t sp = start;
    while (true) {
      const Inst& in = code[pc];
      bool ok = !(visited && visited->test_and_set(pc, sp));
      if (ok) switch (in.op) {
        case Op::kChar: ok = sp < end && s[sp] == in.a; ++pc; ++sp; break;
        case Op::kClass: ok = sp < end && classes[in.a].contains(s[sp]); ++pc; ++sp; break;
        case Op::kSplit: stack.push_back({in.b, sp}); pc = in.a; break;
        case Op::kJmp: pc = in.a; break;
        case Op::kBegin: ok = sp == begin; ++pc; break;
        case Op::kEnd: ok = sp == end; ++pc; break;
        case Op::kLook: ok = (run(in.a, s, begin, sp, end, false) >= 0) != in.negative; ++pc; break;
        case Op::kMatch:
          if (!(not_null && sp == start)) return int64_t(sp);
          ok = false;
          break;
      }
      if (ok) continue;
      if (stack.empty()) return -1;
      pc = stack.back().first;
      sp = stack.back().second;
      stack.pop_back();
    }
  }
};

SplitRegex::SplitRegex(std::unique_ptr<Program> p) : prog_(std::move(p)) {}
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

SplitRegex::Mode SplitRegex::mode() const { return prog_->mode; }

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) {
  auto prog = std::make_unique<Program>();
  // Same test as llama.cpp: any category escape switches the whole pattern to
  // the collapsed subject.
  prog->mode = Mode::kWide;
  for (const CollapsedCategory& cat : collapsed_categories()) {
    if (pattern.find(std::string("\\p{") + cat.name + "}") != std::string_view::npos)
      prog->mode = Mode::kCollapsed;
  }
  Result<Node> tree = parse_pattern(pattern, prog->mode, &prog->classes);
  if (!tree.ok()) return tree.error();
  prog->subs.emplace_back();
  if (!prog->emit(*tree, 0)) return err("split regex \"", pattern, "\": too large");
  prog->subs[0].push_back({Op::kMatch});
  return SplitRegex(std::move(prog));
}

std::vector<uint32_t> SplitRegex::map_subject(std::span<const uint32_t> cpts, Mode mode) {
  std::vector<uint32_t> out(cpts.begin(), cpts.end());
  for (uint32_t& c : out) {
    if (c < 0x80) continue;
    if (unicode::is_whitespace(c)) {
      c = '\v';
      continue;
    }
    if (mode == Mode::kWide) continue;
    switch (unicode::category_flag(c)) {
      case unicode::kNumber: c = kCollapsedNumber; break;
      case unicode::kLetter: c = kCollapsedLetter; break;
      case unicode::kPunctuation: c = kCollapsedPunct; break;
      case unicode::kMark: c = kCollapsedMark; break;
      case unicode::kSymbol: c = kCollapsedSymbol; break;
      default: c = kCollapsedOther; break;
    }
  }
  return out;
}

int64_t SplitRegex::match_at(std::span<const uint32_t> subject, size_t begin, size_t at,
                             size_t end) const {
  return prog_->run(0, subject, begin, at, end, false);
}

std::vector<size_t> SplitRegex::split(std::span<const uint32_t> subject,
                                      std::span<const size_t> pieces) const {
  std::vector<size_t> out;
  out.reserve(pieces.size());
  size_t begin = 0;
  for (size_t len : pieces) {
    const size_t end = begin + len;
    size_t emitted = begin;  // end of the last word pushed
    size_t pos = begin;      // where the next search starts
    // After an empty match std::regex_iterator first retries at the same place
    // for a non-empty match, then searches on from the next position.
    bool retry_not_null = false;
    const size_t n_pc = prog_->subs[0].size();
    std::optional<Visited> visited;
    if (n_pc * (len + 1) <= kMaxVisitedBits) visited.emplace(n_pc, begin, len + 1);
    while (pos <= end) {
      int64_t m = -1;
      size_t at = pos;
      for (; at <= end; ++at) {
        const bool not_null = retry_not_null && at == pos;  // depends on the start: no memo
        m = prog_->run(0, subject, begin, at, end, not_null, not_null || !visited ? nullptr : &*visited);
        if (m >= 0) break;
      }
      retry_not_null = false;
      if (m < 0) break;
      if (visited) visited->forget_from(size_t(m));
      if (at > emitted) out.push_back(at - emitted);     // the gap before the match
      if (size_t(m) > at) out.push_back(size_t(m) - at);  // the match (an empty one adds no word)
      emitted = size_t(m);
      if (size_t(m) == at) {
        if (at == end) break;
        retry_not_null = true;
      }
      pos = size_t(m);
    }
    if (end > emitted) out.push_back(end - emitted);
    begin = end;
  }
  return out;
}

}  // namespace kt

