// The tokenizer against llama.cpp's own test vectors (test-tokenizer-0: every
// string of each ggml-vocab-*.gguf.inp must give the ids of its .out line) and
// against the prompts of the tiny models in index.json (llama.cpp's tokens,
// BOS included). Plus round trips, the special-token split, and hostile
// metadata, which must give an Error and never a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "runtime/gguf.h"
#include "runtime/gguf_writer.h"
#include "runtime/pretokenize.h"
#include "runtime/tokenizer.h"
#include "test/unit/vocab_cases.h"

namespace kt {
namespace {

using test::find_data;
using test::read_cases;
using test::read_file;
using test::VocabCase;

struct Loaded {
  GgufFile file;
  Tokenizer tok;
};

// Loads each vocabulary once for the whole run.
const Loaded* load(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  if (auto it = cache.find(rel); it != cache.end()) return it->second.get();
  const auto path = find_data(rel);
  if (!path) return nullptr;
  Result<GgufFile> f = GgufFile::open(path->string());
  if (!f.ok()) {
    ADD_FAILURE() << f.error().message;
    return nullptr;
  }
  Result<Tokenizer> t = Tokenizer::from_gguf(*f);
  if (!t.ok()) {
    ADD_FAILURE() << t.error().message;
    return nullptr;
  }
  auto l = std::make_unique<Loaded>(Loaded{std::move(f).value(), std::move(t).value()});
  return (cache[rel] = std::move(l)).get();
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// ---- llama.cpp's vectors ---------------------------------------------------

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EveryStringGivesLlamaCppIds) {
  const std::string rel = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  const Loaded* v = load(rel);
  if (!v) GTEST_SKIP() << rel << " not found";
  const auto cases = read_cases(*find_data(rel));
  ASSERT_GT(cases.size(), 40u);
  size_t exact = 0;
  for (const VocabCase& c : cases) {
    const std::vector<int32_t> got = v->tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.ids) ++exact;
    else ADD_FAILURE() << GetParam() << ": \"" << c.text << "\"\n want " << show(c.ids) << "\n got  " << show(got);
  }
  std::cout << "[ vectors  ] " << GetParam() << ": " << exact << "/" << cases.size() << " exact\n";
  EXPECT_EQ(exact, cases.size());
}

// decode(encode(x)) == x where the vocabulary keeps text intact: gpt-2-style
// vocabularies clean " ," " ." ... on decode (as llama.cpp), so for them only
// strings without such spots are compared.
TEST_P(VocabVectors, DecodeInvertsEncode) {
  const std::string rel = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  const Loaded* v = load(rel);
  if (!v) GTEST_SKIP() << rel << " not found";
  const bool cleans = GetParam() == "gpt-2";
  size_t compared = 0;
  for (const VocabCase& c : read_cases(*find_data(rel))) {
    if (cleans) {
      bool touched = false;
      for (const char* spot : {" ?", " !", " .", " ,", " '"}) touched = touched || c.text.find(spot) != std::string::npos;
      if (touched) continue;
    }
    ++compared;
    EXPECT_EQ(v->tok.decode(v->tok.encode(c.text, false, false)), c.text) << GetParam();
  }
  EXPECT_GT(compared, 30u);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabVectors,
                         ::testing::Values("llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

// ---- the tiny models' prompts ----------------------------------------------

TEST(TokenizerPrompts, IndexJsonPromptsExact) {
  const auto index = find_data("index.json");
  if (!index) GTEST_SKIP() << "index.json not found";
  const auto j = nlohmann::json::parse(read_file(*index));
  size_t checked = 0;
  for (const auto& e : j.at("entries")) {
    const std::string model = e.at("model");
    const Loaded* v = load(model);
    if (!v) continue;  // a model not copied here and no shared set
    const std::string text = e.at("prompt_text");
    const std::vector<int32_t> want = e.at("prompt_tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(v->tok.encode(text, /*add_special=*/true, /*parse_special=*/true), want)
        << model << " " << e.at("prompt");
    EXPECT_EQ(v->tok.encode(text, true, false), want) << model;
    // Without the BOS the prefixed space is dropped again; after a BOS llama.cpp
    // keeps it (its detokenize strips only from the very first token). These
    // 4096-piece vocabularies have no "\u2581" piece, so a space before a piece
    // that has none is spelled in byte tokens, which decode (as in llama.cpp)
    // to the bytes of U+2581 rather than to a space.
    auto spaced = [](const std::string& s) {
      std::string out;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
          out += ' ';
          i += 2;
        } else {
          out += s[i];
        }
      }
      return out;
    };
    EXPECT_EQ(spaced(v->tok.decode(std::span(want).subspan(1))), text) << model;
    EXPECT_EQ(spaced(v->tok.decode(want)), " " + text) << model;
    EXPECT_EQ(v->tok.n_vocab(), e.at("n_vocab").get<size_t>());
    ++checked;
  }
  std::cout << "[ prompts  ] " << checked << " prompts exact\n";
  EXPECT_GT(checked, 0u);
}

// ---- special tokens, bytes, end of generation --------------------------------

TEST(TokenizerSpecial, SpmControlTokensOnlyWithParseSpecial) {
  const Loaded* v = load("vocab/ggml-vocab-llama-spm.gguf");
  if (!v) GTEST_SKIP();
  const Tokenizer& t = v->tok;
  // After a special token SentencePiece text gets the leading space again.
  std::vector<int32_t> want = {t.bos()};
  for (int32_t id : t.encode("Hello world", false, false)) want.push_back(id);
  EXPECT_EQ(t.encode("<s>Hello world", false, true), want);
  const auto plain = t.encode("<s>Hello world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), t.bos()), 0);
  EXPECT_EQ(t.decode(plain), "<s>Hello world");
  // add_special puts BOS first; the GGUF says no EOS.
  EXPECT_EQ(t.encode("Hi", true, false).front(), 1);
  EXPECT_NE(t.encode("Hi", true, false).back(), 2);
  EXPECT_TRUE(t.is_eog(t.eos()));
  EXPECT_FALSE(t.is_eog(t.bos()));
  EXPECT_EQ(t.decode_token(t.find_token("<0x0A>")), "\n");
  EXPECT_EQ(t.decode_token(t.eos()), "");
  EXPECT_EQ(t.decode_token(t.eos(), /*render_special=*/true), "</s>");
  EXPECT_EQ(t.decode_token(-1), "");
  EXPECT_EQ(t.decode_token(int32_t(t.n_vocab())), "");
}

TEST(TokenizerSpecial, BpeControlAndUserDefinedTokens) {
  if (const Loaded* v = load("vocab/ggml-vocab-gpt-2.gguf")) {
    const Tokenizer& t = v->tok;
    const int32_t eot = t.find_token("<|endoftext|>");
    ASSERT_GE(eot, 0);
    const auto parsed = t.encode("a<|endoftext|>b", false, true);
    EXPECT_EQ(parsed, (std::vector<int32_t>{t.find_token("a"), eot, t.find_token("b")}));
    const auto plain = t.encode("a<|endoftext|>b", false, false);
    EXPECT_GT(plain.size(), 3u);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
    EXPECT_TRUE(t.is_eog(eot));
    EXPECT_FALSE(t.add_bos());
    // gpt-2 decoding cleans spaces before punctuation, as llama.cpp does.
    EXPECT_EQ(t.decode(t.encode("Hello , world !", false, false)), "Hello, world!");
  }
  if (const Loaded* v = load("vocab/ggml-vocab-deepseek-coder.gguf")) {
    const Tokenizer& t = v->tok;
    // User-defined tokens are cut out even without parse_special ...
    const int32_t u_umlaut = t.find_token("\xC3\xBC");  // "ü", a user-defined token
    ASSERT_GE(u_umlaut, 0);
    const auto ids = t.encode("F\xC3\xBChrer", false, false);
    EXPECT_NE(std::find(ids.begin(), ids.end(), u_umlaut), ids.end());
    // ... but the FIM tokens llama.cpp recognises by name become control tokens.
    const int32_t fim = t.find_token("<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>");
    ASSERT_GE(fim, 0);
    EXPECT_TRUE(t.token_attr(fim) & kTokenControl);
    const std::string text = "x<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>y";
    const auto plain = t.encode(text, false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), fim), 0);
    const auto parsed = t.encode(text, false, true);
    EXPECT_EQ(std::count(parsed.begin(), parsed.end(), fim), 1);
    EXPECT_EQ(t.encode("x", true, false).front(), t.bos());
    EXPECT_TRUE(t.is_eog(t.eos()));
  }
}

// Any bytes at all: no crash anywhere and every id inside the vocabulary.
TEST(TokenizerRobustness, ArbitraryBytes) {
  std::mt19937 rng(7);
  size_t runs = 0;
  for (const char* name : {"llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"}) {
    const Loaded* v = load(std::string("vocab/ggml-vocab-") + name + ".gguf");
    if (!v) continue;
    for (int round = 0; round < 300; ++round) {
      std::string s(rng() % 40, '\0');
      for (char& c : s) c = char(rng() % 256);
      if (round % 3 == 0) s += "<s></s><unk><|endoftext|>";
      for (bool special : {false, true}) {
        const auto ids = v->tok.encode(s, special, special);
        for (int32_t id : ids) ASSERT_LT(size_t(id), v->tok.n_vocab()) << name;
        v->tok.decode(ids, special);
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0u);
}

// Valid UTF-8 from all planes comes back exactly from SentencePiece (pieces or
// byte fallback) and from byte-level BPE (every byte has a stand-in).
TEST(TokenizerRobustness, RandomUnicodeRoundTrips) {
  std::mt19937 rng(11);
  auto random_text = [&] {
    std::string s;
    const int n = int(rng() % 30);
    for (int i = 0; i < n; ++i) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = 0x20 + rng() % 0x5F; break;  // ASCII
        case 1: cp = " \n\t"[rng() % 3]; break;
        case 2: cp = 0xA0 + rng() % 0x2000; break;
        default: cp = 0x3000 + rng() % 0x1D000; break;
      }
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';  // no surrogates in UTF-8
      if (cp == 0x2581) cp = 'y';                 // SentencePiece's space stand-in
      append_utf8(cp, &s);
    }
    return s;
  };
  for (const char* name : {"llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"}) {
    const Loaded* v = load(std::string("vocab/ggml-vocab-") + name + ".gguf");
    if (!v) continue;
    for (int round = 0; round < 300; ++round) {
      const std::string s = random_text();
      if (std::string(name) == "gpt-2") {  // skip what its decoder cleans
        bool touched = false;
        for (const char* spot : {" ?", " !", " .", " ,", " '"}) touched = touched || s.find(spot) != std::string::npos;
        if (touched) continue;
      }
      EXPECT_EQ(v->tok.decode(v->tok.encode(s, false, false)), s) << name;
    }
  }
}

// Speed is kt-bench's business, not a timed test's: this prints the figure and
// checks that a long mixed text encodes and decodes back to its length.
TEST(TokenizerPerformance, EncodesAHundredKilobytes) {
  std::string text;
  const std::string para =
      "Mixture-of-experts models activate only a few experts per token; the rest sit idle. "
      "def f(x):\n    return x * 2  # 12345 \xE4\xBD\xA0\xE5\xA5\xBD \xD0\xBF\xD1\x80\xD0\xB8\n";
  while (text.size() < 100 * 1024) text += para;
  for (const char* name : {"llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"}) {
    const Loaded* v = load(std::string("vocab/ggml-vocab-") + name + ".gguf");
    if (!v) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = v->tok.encode(text, false, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ speed    ] " << name << ": " << text.size() << " bytes -> " << ids.size()
              << " tokens in " << s * 1e3 << " ms\n";
    EXPECT_EQ(v->tok.decode(ids).size(), text.size()) << name;
  }
}

// ---- hostile metadata ---------------------------------------------------------

using KVs = std::vector<std::pair<std::string, GgufOwnedValue>>;

GgufOwnedValue strings(std::vector<std::string> v) {
  std::vector<GgufOwnedValue> e;
  for (auto& s : v) e.push_back(GgufOwnedValue::str(s));
  return GgufOwnedValue::array(GgufType::STRING, std::move(e));
}
GgufOwnedValue floats(std::vector<float> v) {
  std::vector<GgufOwnedValue> e;
  for (float f : v) e.push_back(GgufOwnedValue::f32(f));
  return GgufOwnedValue::array(GgufType::FLOAT32, std::move(e));
}
GgufOwnedValue ints(std::vector<int32_t> v) {
  std::vector<GgufOwnedValue> e;
  for (int32_t i : v) e.push_back(GgufOwnedValue::i32(i));
  return GgufOwnedValue::array(GgufType::INT32, std::move(e));
}

// A small valid SentencePiece vocabulary.
KVs tiny_spm() {
  return {
      {"tokenizer.ggml.model", GgufOwnedValue::str("llama")},
      {"tokenizer.ggml.tokens", strings({"<unk>", "<s>", "</s>", "<0x0A>", "\xE2\x96\x81", "a", "b", "ab",
                                         "\xE2\x96\x81" "a"})},
      {"tokenizer.ggml.scores", floats({0, 0, 0, 0, -1, -2, -3, -0.5f, -0.2f})},
      {"tokenizer.ggml.token_type", ints({2, 3, 3, 6, 1, 1, 1, 1, 1})},
      {"tokenizer.ggml.bos_token_id", GgufOwnedValue::u32(1)},
      {"tokenizer.ggml.eos_token_id", GgufOwnedValue::u32(2)},
  };
}

Result<Tokenizer> build(const KVs& kvs, std::unique_ptr<GgufFile>* keep) {
  GgufWriter w;
  for (const auto& [k, v] : kvs) w.add(k, v);
  const auto bytes = w.to_bytes();
  Result<GgufFile> f = GgufFile::from_bytes("hostile.gguf", bytes);
  if (!f.ok()) return f.error();
  *keep = std::make_unique<GgufFile>(std::move(f).value());
  return Tokenizer::from_gguf(**keep);
}

KVs with(KVs kvs, const std::string& key, std::optional<GgufOwnedValue> v) {
  std::erase_if(kvs, [&](const auto& kv) { return kv.first == key; });
  if (v) kvs.push_back({key, *v});
  return kvs;
}

TEST(TokenizerHostile, SmallVocabularyWorks) {
  std::unique_ptr<GgufFile> keep;
  auto t = build(tiny_spm(), &keep);
  ASSERT_TRUE(t.ok()) << t.error().message;
  // "▁a" (-0.2) outscores "ab" (-0.5): the pair merged first decides.
  EXPECT_EQ(t->encode("ab", false, false), (std::vector<int32_t>{8, 6}));
  EXPECT_EQ(t->encode("b\n", true, false), (std::vector<int32_t>{1, 4, 6, 3}));
  // 'c' has no token and no byte token: <unk>, as a stand-in for llama.cpp's abort.
  EXPECT_EQ(t->encode("c", false, false), (std::vector<int32_t>{4, 0}));
}

TEST(TokenizerHostile, BadMetadataIsAnError) {
  struct Case {
    const char* name;
    KVs kvs;
    const char* needle;
  };
  const KVs base = tiny_spm();
  const std::vector<Case> cases = {
      {"no tokens", with(base, "tokenizer.ggml.tokens", std::nullopt), "tokenizer.ggml.tokens"},
      {"tokens not strings", with(base, "tokenizer.ggml.tokens", ints({1, 2, 3, 4, 5, 6, 7, 8, 9})),
       "tokenizer.ggml.tokens"},
      {"tokens not an array", with(base, "tokenizer.ggml.tokens", GgufOwnedValue::str("a")),
       "tokenizer.ggml.tokens"},
      {"empty tokens", with(base, "tokenizer.ggml.tokens", strings({})), "tokenizer.ggml.tokens"},
      {"short scores", with(base, "tokenizer.ggml.scores", floats({0, 0, 0})), "tokenizer.ggml.scores"},
      {"long scores", with(base, "tokenizer.ggml.scores", floats(std::vector<float>(20, 0.f))),
       "tokenizer.ggml.scores"},
      {"scores as strings", with(base, "tokenizer.ggml.scores", strings({"x"})), "tokenizer.ggml.scores"},
      {"short types", with(base, "tokenizer.ggml.token_type", ints({1})), "tokenizer.ggml.token_type"},
      {"bos out of range", with(base, "tokenizer.ggml.bos_token_id", GgufOwnedValue::u32(9)), "bos_token_id"},
      {"eos negative", with(base, "tokenizer.ggml.eos_token_id", GgufOwnedValue::i32(-1)), "eos_token_id"},
      {"unk huge", with(base, "tokenizer.ggml.unknown_token_id", GgufOwnedValue::u64(uint64_t(1) << 40)),
       "unknown_token_id"},
      {"pad as string", with(base, "tokenizer.ggml.padding_token_id", GgufOwnedValue::str("0")),
       "padding_token_id"},
      {"eot out of range", with(base, "tokenizer.ggml.eot_token_id", GgufOwnedValue::u32(100)), "eot_token_id"},
      {"duplicate token", with(base, "tokenizer.ggml.tokens",
                               strings({"<unk>", "<s>", "</s>", "<0x0A>", "a", "a", "b", "ab", "c"})),
       "duplicate"},
      {"bad byte token", with(base, "tokenizer.ggml.token_type", ints({2, 3, 3, 6, 6, 1, 1, 1, 1})), "byte token"},
      {"no model", with(base, "tokenizer.ggml.model", std::nullopt), "tokenizer.ggml.model"},
      {"unknown model", with(base, "tokenizer.ggml.model", GgufOwnedValue::str("bert")), "bert"},
      {"model not a string", with(base, "tokenizer.ggml.model", GgufOwnedValue::u32(1)), "tokenizer.ggml.model"},
      {"add_bos not bool", with(base, "tokenizer.ggml.add_bos_token", GgufOwnedValue::u32(1)), "add_bos_token"},
      {"gpt2 without merges", with(base, "tokenizer.ggml.model", GgufOwnedValue::str("gpt2")),
       "tokenizer.ggml.merges"},
      {"gpt2 unknown pre",
       with(with(base, "tokenizer.ggml.model", GgufOwnedValue::str("gpt2")), "tokenizer.ggml.pre",
            GgufOwnedValue::str("klingon")),
       "klingon"},
      {"gpt2 merges not strings",
       with(with(base, "tokenizer.ggml.model", GgufOwnedValue::str("gpt2")), "tokenizer.ggml.merges", ints({1})),
       "tokenizer.ggml.merges"},
  };
  for (const Case& c : cases) {
    std::unique_ptr<GgufFile> keep;
    auto t = build(c.kvs, &keep);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_NE(t.error().message.find(c.needle), std::string::npos) << c.name << ": " << t.error().message;
    EXPECT_NE(t.error().message.find("hostile.gguf"), std::string::npos) << c.name << ": " << t.error().message;
  }
}

}  // namespace
}  // namespace kt
