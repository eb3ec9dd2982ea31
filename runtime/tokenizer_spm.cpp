// SentencePiece-style BPE ("llama" vocabularies), as llama.cpp's
// llm_tokenizer_spm: start from UTF-8 characters, repeatedly merge the adjacent
// pair whose concatenation is the highest-scoring token (leftmost on ties), then
// emit each final piece as its token, or as byte tokens when it is none.
#include <queue>

#include "runtime/pretokenize.h"
#include "runtime/tokenizer.h"

namespace kt {

namespace {

struct Symbol {
  int prev, next;
  size_t offset, n;  // bytes of the text; n == 0 once merged into the left neighbour
};

struct Bigram {
  int left, right;
  float score;
  size_t size;  // bytes of both symbols when queued; a mismatch later means stale
};

struct BigramOrder {  // the top is the highest score, then the leftmost
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::encode_spm(std::string_view raw, std::vector<int32_t>* out) const {
  // Spaces are U+2581 in SentencePiece vocabularies.
  std::string text;
  text.reserve(raw.size() + raw.size() / 4);
  for (char c : raw) {
    if (c == ' ') text += "\xE2\x96\x81";
    else text += c;
  }
  if (text.empty()) return;

  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_sequence_length(uint8_t(text[off])), text.size() - off);
    const int idx = int(sym.size());
    sym.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = sym[left].n + sym[right].n;
    const int32_t id = find_token(std::string_view(text).substr(sym[left].offset, size));
    if (id >= 0) queue.push({left, right, score_[id], size});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Every merged piece is a token (only token texts are queued), so a piece that
  // is none is a single character outside the vocabulary: one byte token per
  // byte. (llama.cpp's resegment() also looks such a piece up among merged
  // texts, which can never hold it.)
  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = std::string_view(text).substr(sym[i].offset, sym[i].n);
    if (const int32_t id = find_token(piece); id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      // llama.cpp throws when a byte has no token; we fall back to <unk>.
      const int32_t id = byte_token_[uint8_t(c)] >= 0 ? byte_token_[uint8_t(c)] : unk_;
      if (id >= 0) out->push_back(id);
    }
  }
}

}  // namespace kt
