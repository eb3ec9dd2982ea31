// libFuzzer target: schema text -> JSON Schema compiler -> grammar -> a few
// steps of its automaton and of token masks over a real 32k vocabulary.
// Input: the schema, optionally followed by a NUL byte and a text to feed the
// automaton byte by byte. The compiler, the matcher and the masker must bound
// themselves (depth, subschemas, states, frames): an error is a value, never
// a crash, a stack overflow or memory without bound.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/gguf.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/token_mask.h"
#include "runtime/tokenizer.h"

namespace {

using J = nlohmann::ordered_json;

// Deeper than any request kt-serve reads (kMaxJsonDepth is 64), so the
// compiler's own depth limit is what stops a deep schema.
constexpr int kParseDepth = 2000;

struct Depth {};

std::shared_ptr<const kt::TokenVocab> vocab() {
  static std::shared_ptr<const kt::TokenVocab> v = [] {
    auto g = kt::GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf");
    if (!g) std::abort();
    auto t = kt::Tokenizer::from_gguf(g.value());
    if (!t) std::abort();
    return kt::TokenVocab::build(t.value(), false);
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view schema_text = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);

  J schema;
  try {
    J::parser_callback_t limit = [](int depth, J::parse_event_t, J&) {
      if (depth > kParseDepth) throw Depth{};
      return true;
    };
    schema = J::parse(schema_text, limit);
  } catch (...) {
    return 0;
  }
  kt::JsonSchemaOptions o;
  o.whitespace = size % 2 == 0;
  auto g = kt::json_schema_grammar(schema, "fuzz", o);
  if (!g.ok()) {
    if (g.error().message.empty()) std::abort();
    return 0;
  }
  auto grammar = std::make_shared<const kt::Grammar>(std::move(*g));
  kt::GrammarMatcherLimits limits;
  limits.max_states = 1 << 12;
  limits.max_frames = 1 << 16;

  // The given text, byte by byte.
  {
    kt::GrammarMatcher m(grammar, limits);
    kt::GrammarMatcher::State s = m.walk(m.start(), text.substr(0, 4096));
    if (s != kt::GrammarMatcher::kDead) (void)m.min_bytes_to_end(s);
  }
  // The shortest way forward from the start: the first byte that keeps the
  // text alive, 64 times (the closure and interning of fresh states).
  {
    kt::GrammarMatcher m(grammar, limits);
    kt::GrammarMatcher::State s = m.start();
    for (int step = 0; step < 64 && !m.finished(s); ++step) {
      kt::GrammarMatcher::State t = kt::GrammarMatcher::kDead;
      for (unsigned b = 0; b < 256 && t == kt::GrammarMatcher::kDead; ++b) t = m.next(s, uint8_t(b));
      if (t == kt::GrammarMatcher::kDead) break;
      s = t;
    }
  }
  // Token masks along a greedy generation (the lowest allowed id each time).
  auto masker = std::make_shared<kt::TokenMasker>(grammar, vocab(), size_t(1) << 20, limits);
  kt::TokenConstraint c(masker);
  for (int64_t step = 0; step < 4; ++step) {
    const kt::TokenMask* mask = c.next_mask(16 - step);
    if (!mask) break;
    int32_t pick = -1;
    for (size_t w = 0; w < mask->bits.size() && pick < 0; ++w)
      if (mask->bits[w]) pick = int32_t(w * 64 + size_t(__builtin_ctzll(mask->bits[w])));
    if (pick < 0) std::abort();  // a mask is never empty: null says so instead
    if (masker->vocab().bytes(pick).empty()) break;  // an end-of-generation token
    if (!c.accept(pick)) std::abort();  // an allowed token always fits
  }
  return 0;
}
