// Token masks for constrained decoding: which tokens of the vocabulary may
// come next so that the text still matches a grammar (grammar_matcher.h).
//
// TokenVocab holds the bytes each token adds to the text (as the engine's
// text stream renders it), sorted into a trie laid out in depth-first order:
// node i's subtree is the index range [i, end[i]). A mask is one pass over
// that array carrying the automaton's state per depth; a byte that kills the
// state skips the whole subtree. So the cost is the number of trie nodes whose
// prefix is still possible: a few dozen after "{", most of the trie inside a
// string, where each node costs one table lookup (the automaton is
// determinized lazily and repeats its states there).
//
// TokenMasker keeps the masks it computed, by automaton state (LRU-bounded):
// a string's characters and a number's digits return to the same state, so a
// long string costs one walk. The masker (automaton, vocabulary, cache) may
// serve many requests with the same grammar, one after another or
// interleaved, on one thread; TokenConstraint is one request's position in it.
//
// Ending in time: a token is allowed only if the text can still end within
// the tokens left after it (the automaton knows the fewest bytes that finish
// a state, and a vocabulary with a token per byte can always write them), so
// an output cut by max_tokens or the context is still complete (when the
// budget is too small for even the shortest text, the mask ignores it and the
// output is cut as an unconstrained one would be). End-of-
// generation tokens are allowed exactly where the text may end; tokens that
// add no bytes (control tokens) never are.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar_matcher.h"
#include "runtime/tokenizer.h"

namespace kt {

struct TokenMask {
  std::vector<uint64_t> bits;
  int64_t n_vocab = 0;

  void clear(int64_t n) {
    n_vocab = n;
    bits.assign(size_t((n + 63) / 64), 0);
  }
  void allow(int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
  bool allowed(int32_t id) const {
    return id >= 0 && id < n_vocab && ((bits[size_t(id) >> 6] >> (id & 63)) & 1);
  }
  size_t count() const;
};

class TokenVocab {
 public:
  // render_special: control tokens add their text (as the engine renders
  // them when asked to); otherwise they add nothing and are never allowed.
  static std::shared_ptr<const TokenVocab> build(const Tokenizer& tok, bool render_special);

  int64_t n_vocab() const { return int64_t(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  const std::vector<int32_t>& end_tokens() const { return eog_; }
  bool render_special() const { return render_special_; }
  size_t n_nodes() const { return byte_.size(); }

 private:
  friend class TokenMasker;
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;
  bool render_special_ = false;
  // The trie, node 0 the root: the byte that leads to the node, its depth,
  // the end of its subtree, and the tokens whose bytes end there.
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> tok_begin_;  // tokens of node i: tok_ids_[tok_begin_[i] .. tok_begin_[i + 1])
  std::vector<int32_t> tok_ids_;
  uint16_t max_depth_ = 0;
};

struct TokenMaskStats {
  uint64_t masks = 0;        // masks handed out
  uint64_t walks = 0;        // of which computed by a walk of the trie (the rest from the cache)
  uint64_t nodes = 0;        // trie nodes visited by the walks
  double seconds = 0;        // time in mask computation, cache lookups included
};

class TokenMasker {
 public:
  // cache_bytes bounds the cached masks (n_vocab / 8 bytes each: 4 MiB
  // hold 327 masks of a 102k vocabulary, 8192 of a 4k one).
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
              size_t cache_bytes = size_t(4) << 20, GrammarMatcherLimits limits = {});

  // The tokens allowed after `state` when tokens_left tokens (this one
  // included) may still be generated. The pointer is valid until the next call.
  const TokenMask& mask(GrammarMatcher::State state, int64_t tokens_left);

  GrammarMatcher& matcher() { return matcher_; }
  const TokenVocab& vocab() const { return *vocab_; }
  const TokenMaskStats& stats() const { return stats_; }

 private:
  struct Cached {
    TokenMask mask;
    uint32_t max_need = 0;  // the largest bytes-to-end after an allowed token
    uint64_t used = 0;
  };
  // Walks the trie; returns whether the budget left out a token.
  bool walk(GrammarMatcher::State state, uint64_t budget, TokenMask* out, uint32_t* max_need);

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_cached_;
  std::unordered_map<GrammarMatcher::State, Cached> cache_;
  uint64_t clock_ = 0;
  TokenMask scratch_;
  std::vector<GrammarMatcher::State> at_depth_;
  TokenMaskStats stats_;
};

// One generation's place in a TokenMasker.
class TokenConstraint {
 public:
  explicit TokenConstraint(std::shared_ptr<TokenMasker> masker)
      : masker_(std::move(masker)), state_(masker_->matcher().start()) {}

  // Null when no token can continue the text at all (error() says why).
  const TokenMask* next_mask(int64_t tokens_left);
  // Feeds a generated token (not an end-of-generation one); false, with the
  // state unchanged, when its bytes do not fit.
  bool accept(int32_t token);
  bool accepting() const { return masker_->matcher().accepting(state_); }
  bool finished() const { return masker_->matcher().finished(state_); }
  const std::string& error() const { return error_; }
  TokenMasker& masker() { return *masker_; }

 private:
  std::shared_ptr<TokenMasker> masker_;
  GrammarMatcher::State state_;
  std::string error_;
};

}  // namespace kt
