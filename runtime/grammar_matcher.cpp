// The lazily determinized pushdown automaton (grammar_matcher.h).
#include "runtime/grammar_matcher.h"

#include <algorithm>

namespace kt {

namespace {

// Closures recurse through rules that begin alternatives; finish() rules out
// left recursion, so this depth is only reached by absurdly nested grammars.
constexpr int kMaxClosureDepth = 4000;

void merge_sorted(std::vector<int32_t>* into, const std::vector<int32_t>& more) {
  if (more.empty()) return;
  const size_t mid = into->size();
  into->insert(into->end(), more.begin(), more.end());
  std::inplace_merge(into->begin(), into->begin() + std::ptrdiff_t(mid), into->end());
  into->erase(std::unique(into->begin(), into->end()), into->end());
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, GrammarMatcherLimits limits)
    : g_(std::move(grammar)), limits_(limits) {
  std::vector<int32_t> tops;
  bool accepting = false;
  for (uint32_t start : g_->alternatives(g_->root())) {
    const int32_t f = make_frame(start, kEmpty);
    if (f == kEmpty) {
      accepting = true;
    } else if (f >= 0) {
      const Closure& c = closure(f);
      accepting |= c.accepting;
      merge_sorted(&tops, c.tops);
    }
  }
  intern(std::move(tops), accepting);  // state 0
  if (states_.empty()) states_.emplace_back();  // nothing can start (past a bound): a state that leads nowhere
}

int32_t GrammarMatcher::make_frame(uint32_t pos, int32_t parent) {
  if (parent == kTooDeep) return kTooDeep;
  if (g_->element(pos).kind == Grammar::Kind::End) return parent;  // a tail call
  const uint64_t key = (uint64_t(pos) << 32) | uint32_t(parent + 1);
  if (auto it = frame_index_.find(key); it != frame_index_.end()) return it->second;
  const uint32_t depth = parent >= 0 ? frames_[size_t(parent)].depth + 1 : 1;
  if (depth > limits_.max_depth) return kTooDeep;
  if (frames_.size() >= limits_.max_frames) {
    overflow_ = true;
    return kTooDeep;
  }
  const uint32_t below = parent >= 0 ? frames_[size_t(parent)].cum : 0;
  frames_.push_back({pos, parent, depth, uint32_t(std::min<uint64_t>(uint64_t(below) + g_->suffix_min(pos), Grammar::kInfinite))});
  closures_.emplace_back();
  const int32_t id = int32_t(frames_.size() - 1);
  frame_index_.emplace(key, id);
  return id;
}

// The stacks a frame expands to: rule references at the top are replaced by
// each alternative of the rule, until every top is a byte set (or the stack
// is empty). Memoized per frame: a frame's closure never changes.
const GrammarMatcher::Closure& GrammarMatcher::closure(int32_t frame) {
  if (closures_[size_t(frame)].computed) return closures_[size_t(frame)];
  Closure c;
  c.computed = true;
  const Frame f = frames_[size_t(frame)];
  const Grammar::Element& e = g_->element(f.pos);
  if (e.kind == Grammar::Kind::Bytes) {
    c.tops.push_back(frame);
  } else if (++closure_depth_ > kMaxClosureDepth) {
    overflow_ = true;
  } else {
    const int32_t cont = make_frame(f.pos + 1, f.parent);
    for (uint32_t start : g_->alternatives(e.arg)) {
      const int32_t child = make_frame(start, cont);
      if (child == kEmpty) {
        c.accepting = true;
      } else if (child >= 0) {
        const Closure& cc = closure(child);  // may grow closures_: copy out before the next call
        c.accepting |= cc.accepting;
        std::vector<int32_t> more = cc.tops;
        merge_sorted(&c.tops, more);
      }
    }
  }
  if (e.kind != Grammar::Kind::Bytes) --closure_depth_;
  closures_[size_t(frame)] = std::move(c);
  return closures_[size_t(frame)];
}

GrammarMatcher::State GrammarMatcher::intern(std::vector<int32_t>&& tops, bool accepting) {
  if (tops.empty() && !accepting) return kDead;
  // The accepting flag is the key's last entry (frame ids are >= 0).
  tops.push_back(accepting ? -1 : -2);
  if (auto it = state_index_.find(tops); it != state_index_.end()) return it->second;
  if (states_.size() >= limits_.max_states) {
    overflow_ = true;
    return kDead;
  }
  const State id = State(states_.size());
  state_index_.emplace(tops, id);
  tops.pop_back();
  StateInfo info;
  info.accepting = accepting;
  uint32_t min_end = accepting ? 0 : Grammar::kInfinite;
  for (int32_t t : tops) min_end = std::min(min_end, frames_[size_t(t)].cum);
  info.min_end = min_end;
  info.tops = std::move(tops);
  states_.push_back(std::move(info));
  return id;
}

int32_t* GrammarMatcher::table(State s) {
  StateInfo& st = states_[size_t(s)];
  if (st.table < 0) {
    st.table = int32_t(tables_.size() / 256);
    tables_.resize(tables_.size() + 256, kUnknown);
  }
  return tables_.data() + size_t(st.table) * 256;
}

GrammarMatcher::State GrammarMatcher::compute_next(State s, uint8_t byte) {
  std::vector<int32_t> tops;
  bool accepting = false;
  // states_ may grow below (interning): read the tops by index.
  const size_t n = states_[size_t(s)].tops.size();
  for (size_t i = 0; i < n; ++i) {
    const Frame f = frames_[size_t(states_[size_t(s)].tops[i])];
    if (!g_->set(g_->element(f.pos).arg).has(byte)) continue;
    const int32_t cont = make_frame(f.pos + 1, f.parent);
    if (cont == kEmpty) {
      accepting = true;
    } else if (cont >= 0) {
      const Closure& c = closure(cont);
      accepting |= c.accepting;
      std::vector<int32_t> more = c.tops;
      merge_sorted(&tops, more);
    }
  }
  return intern(std::move(tops), accepting);
}

}  // namespace kt
