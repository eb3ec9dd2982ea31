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

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + size_t(n) >= s.size() + (n == 0 ? 1 : 0)) return n == 0;
    for (int k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + size_t(k)]) >> 6) != 2) return false;
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
