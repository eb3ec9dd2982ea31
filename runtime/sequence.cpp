#include "runtime/sequence.h"

#include <algorithm>

namespace kt {

Result<std::span<const float>> Sequence::feed(std::span<const int32_t> tokens, const RowFn& each_row) {
  if (tokens.empty()) return err("feed: no tokens");
  if (n_past() + int64_t(tokens.size()) > ex_.n_ctx())
    return err(n_past() + int64_t(tokens.size()), " tokens do not fit the context of ", ex_.n_ctx(),
               " (kt-exec --ctx, kt-compile --ctx)");
  const int64_t n_vocab = ex_.n_vocab();
  const bool single = tokens.size() == 1;
  const PhaseKind phase = single ? PhaseKind::Decode : PhaseKind::Prefill;
  const int64_t chunk = ex_.max_tokens(phase);
  for (size_t at = 0; at < tokens.size(); at += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - at, size_t(chunk));
    const bool last_chunk = at + n == tokens.size();
    const Batch b = Batch::sequence(tokens.subspan(at, n), int32_t(n_past()), slot_, bool(each_row));
    auto logits = ex_.forward(b, phase);
    if (!logits.ok()) return logits.error();
    tokens_.insert(tokens_.end(), tokens.begin() + long(at), tokens.begin() + long(at + n));
    if (each_row)
      for (size_t i = 0; i < n; ++i)
        each_row(int64_t(at + i), logits->subspan(i * size_t(n_vocab), size_t(n_vocab)));
    if (last_chunk) {
      const float* row = logits->data() + (logits->size() - size_t(n_vocab));
      last_.assign(row, row + n_vocab);
    }
  }
  return std::span<const float>(last_);
}

void Sequence::truncate(int64_t n) {
  if (n < n_past()) tokens_.resize(size_t(std::max<int64_t>(n, 0)));
}

int64_t Sequence::common_prefix(std::span<const int32_t> next) const {
  int64_t i = 0;
  while (i < n_past() && size_t(i) < next.size() && tokens_[size_t(i)] == next[size_t(i)]) ++i;
  return i;
}

}  // namespace kt
