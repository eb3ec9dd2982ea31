// Runs a Grammar (grammar.h) over bytes: a pushdown automaton whose
// configurations are sets of stacks, determinized lazily into numbered
// states, so that "the state after this byte" is one table lookup once seen.
//
// A stack is a chain of frames (position in the grammar, the frame below),
// interned: the same stack is always the same frame id, and stacks share
// their tails. A frame whose position ends its alternative is its parent
// (tail calls do not grow the stack, so `x*` written as `r ::= x r | ""`
// runs in constant depth). The top of every stack in a state is a byte set;
// the empty stack means the text may end here. A state is the sorted set of
// its stacks' tops (plus that flag), interned too, so one byte from one state
// always leads to the same state: inside a JSON string every ordinary
// character returns to the same state, which is what makes token masks
// cacheable (token_mask.h).
//
// Each frame also knows the fewest bytes that finish it and everything below
// it (the grammar's suffix lengths, summed down the stack), so a state knows
// how many bytes, at least, the text still needs: a constrained generation can
// be kept short enough to end within its token budget.
//
// Bounded: stacks deeper than max_depth are cut (that way is dead; closing
// brackets still lead out), and past max_states or max_frames the automaton
// stops growing and reports overflow (new transitions are dead).
// Not thread-safe: one thread (the engine's worker) drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/grammar.h"

namespace kt {

struct GrammarMatcherLimits {
  uint32_t max_depth = 512;      // frames in one stack
  size_t max_states = 1 << 15;   // each costs 1 KiB of transitions once it has a successor
  size_t max_frames = 1 << 20;
};

class GrammarMatcher {
 public:
  using State = int32_t;
  static constexpr State kDead = -1;

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, GrammarMatcherLimits limits = {});

  State start() const { return 0; }
  // The state after one more byte; kDead when the byte cannot come next.
  State next(State s, uint8_t byte) {
    int32_t* t = table(s);
    return t[byte] != kUnknown ? t[byte] : (t[byte] = compute_next(s, byte));
  }
  State walk(State s, std::string_view bytes) {
    for (char c : bytes) {
      if (s == kDead) break;
      s = next(s, uint8_t(c));
    }
    return s;
  }

  bool accepting(State s) const { return states_[size_t(s)].accepting; }
  // No byte can follow: the text is complete.
  bool finished(State s) const { return states_[size_t(s)].tops.empty(); }
  // The fewest bytes that still end the text from s (0 when accepting).
  uint32_t min_bytes_to_end(State s) const { return states_[size_t(s)].min_end; }

  // Whether the automaton hit a limit (some transitions were cut to kDead).
  bool overflowed() const { return overflow_; }
  size_t n_states() const { return states_.size(); }
  size_t n_frames() const { return frames_.size(); }
  const Grammar& grammar() const { return *g_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return g_; }

 private:
  static constexpr State kUnknown = -2;
  static constexpr int32_t kEmpty = -1;     // the empty stack (a frame id)
  static constexpr int32_t kTooDeep = -2;   // a stack past max_depth (a frame id)

  struct Frame {
    uint32_t pos;
    int32_t parent;
    uint32_t depth;
    uint32_t cum;  // fewest bytes that finish this frame and those below
  };
  struct Closure {
    bool computed = false;
    bool accepting = false;
    std::vector<int32_t> tops;
  };
  struct StateInfo {
    std::vector<int32_t> tops;  // sorted frame ids, each at a byte set
    bool accepting = false;
    uint32_t min_end = 0;
    int32_t table = -1;  // index of its 256 transitions in tables_, once needed
  };
  struct TopsHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 0xcbf29ce484222325ull;
      for (int32_t x : v) h = (h ^ uint32_t(x)) * 0x100000001b3ull;
      return size_t(h);
    }
  };

  int32_t* table(State s);
  State compute_next(State s, uint8_t byte);
  int32_t make_frame(uint32_t pos, int32_t parent);
  const Closure& closure(int32_t frame);
  State intern(std::vector<int32_t>&& tops, bool accepting);

  std::shared_ptr<const Grammar> g_;
  GrammarMatcherLimits limits_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> frame_index_;
  std::vector<Closure> closures_;  // by frame id
  std::vector<StateInfo> states_;
  std::unordered_map<std::vector<int32_t>, State, TopsHash> state_index_;  // tops + [accepting marker]
  std::vector<int32_t> tables_;  // 256 per state that has successors
  int closure_depth_ = 0;
  bool overflow_ = false;
};

}  // namespace kt
