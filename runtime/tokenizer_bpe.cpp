// Byte-level BPE ("gpt2" vocabularies), as llama.cpp's llm_tokenizer_bpe: the
// pre-tokenizer cuts the text into words; each word's UTF-8 bytes are written as
// GPT-2's printable stand-in characters; inside a word the adjacent pair with the
// lowest merge rank (leftmost on ties) merges until none is left in the merges.
#include <array>
#include <cstdio>
#include <queue>

#include "runtime/pretokenize.h"
#include "runtime/tokenizer.h"

namespace kt {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the
// other 68 bytes for U+0100.. in byte order, so no byte is whitespace or control.
struct ByteLevelTables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 0x144> cp_to_byte;  // the stand-ins all lie below U+0144

  ByteLevelTables() {
    cp_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
      append_utf8(cp, &byte_to_text[b]);
      cp_to_byte[cp] = int16_t(b);
    }
  }
};

const ByteLevelTables& byte_level() {
  static const ByteLevelTables t;
  return t;
}

struct Symbol {
  int prev, next;
  size_t offset, n;  // bytes of the word; n == 0 once merged into the left neighbour
};

struct Bigram {
  int left, right;
  int32_t rank;
  size_t size;  // bytes of both symbols when queued; a mismatch later means stale
};

struct BigramOrder {  // the top is the lowest rank, then the leftmost
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

int32_t Tokenizer::merge_rank(std::string_view left, std::string_view right) const {
  thread_local std::string key;
  key.assign(left);
  key += ' ';
  key += right;
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>* out) const {
  const ByteLevelTables& bl = byte_level();
  std::vector<Symbol> sym;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  for (const std::string& raw_word : pre_->split(text)) {
    std::string word;
    word.reserve(raw_word.size() * 2);
    for (char c : raw_word) word += bl.byte_to_text[uint8_t(c)];

    if (ignore_merges_) {
      if (const int32_t id = find_token(word); id >= 0) {
        out->push_back(id);
        continue;
      }
    }

    sym.clear();
    for (size_t off = 0; off < word.size();) {
      const size_t n = std::min(utf8_sequence_length(uint8_t(word[off])), word.size() - off);
      const int idx = int(sym.size());
      sym.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, off, n});
      off += n;
    }
    const std::string_view w(word);
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const int32_t rank = merge_rank(w.substr(sym[left].offset, sym[left].n),
                                      w.substr(sym[right].offset, sym[right].n));
      if (rank >= 0) queue.push({left, right, rank, sym[left].n + sym[right].n});
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

    for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
      const std::string_view piece = w.substr(sym[i].offset, sym[i].n);
      if (const int32_t id = find_token(piece); id >= 0) {
        out->push_back(id);
        continue;
      }
      // As llama.cpp: a piece that is no token falls back to single-byte
      // tokens of its (stand-in) text; bytes without one are dropped.
      for (char c : piece) {
        if (const int32_t id = find_token(std::string_view(&c, 1)); id >= 0) out->push_back(id);
      }
    }
  }
}

// A token's text in stand-in characters back to the bytes it stands for; a
// character that is no stand-in is written as llama.cpp does.
std::string Tokenizer::bpe_piece_bytes(const std::string& token) const {
  const ByteLevelTables& bl = byte_level();
  std::string out;
  for (uint32_t cp : utf8_to_codepoints(token)) {
    if (cp < bl.cp_to_byte.size() && bl.cp_to_byte[cp] >= 0) {
      out += char(bl.cp_to_byte[cp]);
      continue;
    }
    std::string utf8;
    append_utf8(cp, &utf8);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%02x", uint8_t(c));
      out += hex;
    }
    out += token + "]";
  }
  return out;
}

}  // namespace kt
