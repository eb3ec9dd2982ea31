// One sequence of tokens on an Executor's KV slot: what kt-exec and kt-serve
// drive. feed() runs tokens after those already cached (a prompt in prefill
// steps of the plan's size, single tokens as decode steps) and truncate()
// forgets a suffix, so a new prompt that shares a prefix with the cached one
// (multi-turn chat) only runs what is new.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/executor.h"

namespace kt {

class Sequence {
 public:
  Sequence(Executor& ex, int32_t slot) : ex_(ex), slot_(slot) {}

  // Runs tokens at positions n_past(), n_past()+1, ...; returns the logits of
  // the last. each_row, when given, sees every token's logits (index into
  // tokens, logits), which costs the lm_head for every row.
  using RowFn = std::function<void(int64_t, std::span<const float>)>;
  Result<std::span<const float>> feed(std::span<const int32_t> tokens, const RowFn& each_row = {});

  int64_t n_past() const { return int64_t(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t slot() const { return slot_; }
  // Forgets the cached tokens from n on (the cache rows are overwritten later).
  void truncate(int64_t n);
  // Tokens of `next` this sequence already holds as a prefix.
  int64_t common_prefix(std::span<const int32_t> next) const;

 private:
  Executor& ex_;
  int32_t slot_;
  std::vector<int32_t> tokens_;
  std::vector<float> last_;
};

}  // namespace kt
