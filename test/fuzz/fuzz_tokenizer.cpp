// libFuzzer target: arbitrary bytes through the two bundled vocabularies (a
// SentencePiece and a byte-level BPE one, from llama.cpp's tokenizer tests):
// every id in range, and decode(encode(x)) == x where the vocabulary can hold
// any byte (byte fallback / byte-level BPE) and x is valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/gguf.h"
#include "runtime/tokenizer.h"

namespace {

struct Vocab {
  kt::GgufFile gguf;
  kt::Tokenizer tok;
};

Vocab* load(const char* name) {
  auto g = kt::GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/vocab/" + name);
  if (!g) std::abort();
  auto t = kt::Tokenizer::from_gguf(g.value());
  if (!t) std::abort();
  return new Vocab{std::move(g.value()), std::move(t.value())};
}

// Well-formed UTF-8 (Unicode 15, table 3-7): no overlong forms (C0, C1; E0
// 80..9F; F0 80..8F), no surrogates (ED A0..BF), nothing past U+10FFFF (F4
// 90..BF, F5..FF). The tokenizers decode leniently as llama.cpp does (an
// overlong C0 A9 becomes ')'), so such text does not round trip byte for byte
// and is not expected to.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the first continuation byte
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (i + size_t(n) >= s.size() && n > 0) return false;
    for (int k = 1; k <= n; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + size_t(k)]);
      if (k == 1 ? (b < lo || b > hi) : (b >> 6) != 2) return false;
    }
    i += size_t(n) + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Vocab* spm = load("ggml-vocab-llama-spm.gguf");
  static Vocab* bpe = load("ggml-vocab-deepseek-coder.gguf");
  if (size < 1) return 0;
  const bool parse_special = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (Vocab* v : {spm, bpe}) {
    const auto ids = v->tok.encode(text, /*add_special=*/false, parse_special);
    for (int32_t id : ids)
      if (id < 0 || size_t(id) >= v->tok.n_vocab()) std::abort();
    const std::string back = v->tok.decode(ids);
    // SentencePiece adds a leading space piece; byte-level BPE is exact. Only
    // plain valid UTF-8 without special-token text is expected to round trip.
    if (v == bpe && !parse_special && valid_utf8(text) && text.find('<') == std::string_view::npos && back != text)
      std::abort();
  }
  return 0;
}
