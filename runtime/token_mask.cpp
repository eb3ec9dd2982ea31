// Vocabulary tries and token masks (token_mask.h).
#include "runtime/token_mask.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace kt {

namespace {

// Longer tokens are left out of the trie (never allowed): no real vocabulary
// has them, and the depth is a 16-bit field.
constexpr size_t kMaxTokenBytes = 4096;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

size_t TokenMask::count() const {
  size_t n = 0;
  for (uint64_t w : bits) n += size_t(std::popcount(w));
  return n;
}

std::shared_ptr<const TokenVocab> TokenVocab::build(const Tokenizer& tok, bool render_special) {
  auto v = std::make_shared<TokenVocab>();
  v->render_special_ = render_special;
  const int32_t n = int32_t(tok.n_vocab());
  v->bytes_.resize(size_t(n));
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_eog(id)) {
      v->eog_.push_back(id);
      continue;
    }
    v->bytes_[size_t(id)] = tok.decode_token(id, render_special);
    if (!v->bytes_[size_t(id)].empty() && v->bytes_[size_t(id)].size() <= kMaxTokenBytes) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = v->bytes_[size_t(a)].compare(v->bytes_[size_t(b)]);
    return c < 0 || (c == 0 && a < b);
  });

  // Sorted strings give the trie in depth-first order: each string shares its
  // longest common prefix with the previous one and adds nodes for the rest.
  v->byte_.push_back(0);
  v->depth_.push_back(0);
  v->end_.push_back(0);
  std::vector<uint32_t> path{0};
  std::vector<uint32_t> token_node;  // per entry of order
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = v->bytes_[size_t(id)];
    size_t l = 0;
    if (prev)
      while (l < s.size() && l < prev->size() && s[l] == (*prev)[l]) ++l;
    while (path.size() - 1 > l) {
      v->end_[path.back()] = uint32_t(v->byte_.size());
      path.pop_back();
    }
    for (size_t k = l; k < s.size(); ++k) {
      v->byte_.push_back(uint8_t(s[k]));
      v->depth_.push_back(uint16_t(k + 1));
      v->end_.push_back(0);
      path.push_back(uint32_t(v->byte_.size() - 1));
    }
    token_node.push_back(path.back());
    v->max_depth_ = std::max<uint16_t>(v->max_depth_, uint16_t(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    v->end_[path.back()] = uint32_t(v->byte_.size());
    path.pop_back();
  }
  // Tokens arrive in node order (equal strings are adjacent), so a node's
  // tokens are contiguous.
  v->tok_begin_.assign(v->byte_.size() + 1, 0);
  for (uint32_t node : token_node) ++v->tok_begin_[node + 1];
  for (size_t i = 1; i < v->tok_begin_.size(); ++i) v->tok_begin_[i] += v->tok_begin_[i - 1];
  v->tok_ids_ = order;
  return v;
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
                         size_t cache_bytes, GrammarMatcherLimits limits)
    : matcher_(std::move(grammar), limits), vocab_(std::move(vocab)),
      max_cached_(cache_bytes / std::max<size_t>(8, size_t(vocab_->n_vocab() + 63) / 64 * 8)) {
  at_depth_.resize(size_t(vocab_->max_depth_) + 1);
}

bool TokenMasker::walk(GrammarMatcher::State state, uint64_t budget, TokenMask* out, uint32_t* max_need) {
  const TokenVocab& v = *vocab_;
  out->clear(v.n_vocab());
  bool excluded = false;
  uint32_t need_max = 0;
  const uint32_t n = uint32_t(v.byte_.size());
  at_depth_[0] = state;
  uint64_t visited = 0;
  for (uint32_t i = 1; i < n;) {
    ++visited;
    const GrammarMatcher::State s = matcher_.next(at_depth_[v.depth_[i] - 1u], v.byte_[i]);
    if (s == GrammarMatcher::kDead) {
      i = v.end_[i];
      continue;
    }
    at_depth_[v.depth_[i]] = s;
    if (v.tok_begin_[i] != v.tok_begin_[i + 1]) {
      const uint32_t need = matcher_.min_bytes_to_end(s);
      if (need <= budget) {
        need_max = std::max(need_max, need);
        for (uint32_t k = v.tok_begin_[i]; k < v.tok_begin_[i + 1]; ++k) out->allow(v.tok_ids_[k]);
      } else {
        excluded = true;
      }
    }
    ++i;
  }
  if (matcher_.accepting(state))
    for (int32_t id : v.eog_) out->allow(id);
  stats_.nodes += visited;
  ++stats_.walks;
  *max_need = need_max;
  return excluded;
}

const TokenMask& TokenMasker::mask(GrammarMatcher::State state, int64_t tokens_left) {
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.masks;
  // Bytes the tokens after this one can still write (one at least each).
  const uint64_t budget = tokens_left > 1 ? uint64_t(tokens_left - 1) : 0;
  ++clock_;
  if (auto it = cache_.find(state); it != cache_.end() && budget >= it->second.max_need) {
    it->second.used = clock_;
    stats_.seconds += since(t0);
    return it->second.mask;
  }
  uint32_t max_need = 0;
  const bool excluded = walk(state, budget, &scratch_, &max_need);
  // Only a mask the budget did not cut holds for later calls (with a budget
  // that still covers max_need).
  if (excluded || max_cached_ == 0) {
    stats_.seconds += since(t0);
    return scratch_;
  }
  if (cache_.size() >= max_cached_) {
    auto oldest = cache_.begin();
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->second.used < oldest->second.used) oldest = it;
    cache_.erase(oldest);
  }
  Cached& c = cache_[state];
  c.mask = scratch_;
  c.max_need = max_need;
  c.used = clock_;
  stats_.seconds += since(t0);
  return c.mask;
}

const TokenMask* TokenConstraint::next_mask(int64_t tokens_left) {
  const TokenMask& m = masker_->mask(state_, tokens_left);
  for (uint64_t w : m.bits)
    if (w) return &m;
  // Too few tokens left to end the text whatever comes: continue it anyway
  // (it will be cut, as an unconstrained reply is) rather than fail.
  const TokenMask& any = masker_->mask(state_, std::numeric_limits<int64_t>::max());
  for (uint64_t w : any.bits)
    if (w) return &any;
  if (masker_->matcher().overflowed())
    error_ = "the output constraint outgrew its bounds (states or stack depth)";
  else
    error_ = "no token of the vocabulary can continue the constrained output";
  return nullptr;
}

bool TokenConstraint::accept(int32_t token) {
  if (token < 0 || token >= masker_->vocab().n_vocab()) return false;
  const std::string& b = masker_->vocab().bytes(token);
  if (b.empty()) return false;
  const GrammarMatcher::State s = masker_->matcher().walk(state_, b);
  if (s == GrammarMatcher::kDead) return false;
  state_ = s;
  return true;
}

}  // namespace kt
