// Token masks (runtime/token_mask.h) on real vocabularies: every mask equals
// the brute-force answer (each token's bytes run through the automaton, the
// budget applied), random generations under a mask always give complete,
// parseable JSON even when the token budget runs out, and the cost per token
// on 32k and 102k vocabularies is printed (MaskCost: walks of the trie vs
// cache hits; no wall-clock assertion).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/gguf.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/token_mask.h"
#include "runtime/tokenizer.h"

namespace {

using J = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct Vocab {
  std::unique_ptr<kt::GgufFile> file;
  std::unique_ptr<kt::Tokenizer> tok;
};

// The vocabulary from test/data, or the shared set when only it has the file.
Vocab load_vocab(const std::string& name) {
  Vocab v;
  for (const std::string& dir : {std::string(KT_TEST_DATA_DIR) + "/vocab", std::string(KT_SHARED_MODELS_DIR) + "/vocab"}) {
    const fs::path p = fs::path(dir) / name;
    if (!fs::exists(p)) continue;
    auto f = kt::GgufFile::open(p.string());
    if (!f.ok()) continue;
    v.file = std::make_unique<kt::GgufFile>(std::move(*f));
    auto t = kt::Tokenizer::from_gguf(*v.file);
    if (!t.ok()) continue;
    v.tok = std::make_unique<kt::Tokenizer>(std::move(*t));
    return v;
  }
  return v;
}

std::shared_ptr<const kt::Grammar> grammar(const char* schema) {
  auto g = kt::json_schema_grammar(J::parse(schema));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::make_shared<const kt::Grammar>(std::move(*g)) : nullptr;
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","bb","ccc"]},"maxItems":4}},"required":["name","age"]})",
    R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"}},"required":["city"]})",
    R"({"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"ok":{"type":"boolean"},"note":{"type":["string","null"]}},"required":["x","ok"]},"minItems":1})",
};

// Brute force: a token is allowed iff its bytes keep the state alive and the
// text can still end in the tokens left after it.
void expect_mask_is_brute_force(kt::TokenMasker& masker, kt::GrammarMatcher::State s, int64_t tokens_left) {
  const kt::TokenMask m = masker.mask(s, tokens_left);
  const kt::TokenVocab& v = masker.vocab();
  kt::GrammarMatcher& gm = masker.matcher();
  size_t allowed = 0;
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    bool want;
    if (std::find(v.end_tokens().begin(), v.end_tokens().end(), id) != v.end_tokens().end()) {
      want = gm.accepting(s);
    } else if (v.bytes(id).empty()) {
      want = false;
    } else {
      const auto t = gm.walk(s, v.bytes(id));
      want = t != kt::GrammarMatcher::kDead && int64_t(gm.min_bytes_to_end(t)) <= tokens_left - 1;
    }
    ASSERT_EQ(m.allowed(id), want) << "token " << id << " '" << v.bytes(id) << "' tokens_left " << tokens_left;
    allowed += want;
  }
  EXPECT_GT(allowed, 0u);
}

TEST(TokenMask, EqualsBruteForceOnRealVocabularies) {
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-deepseek-coder.gguf"}) {
    Vocab v = load_vocab(name);
    if (!v.tok) GTEST_SKIP() << name << " not found";
    auto vocab = kt::TokenVocab::build(*v.tok, /*render_special=*/false);
    std::mt19937 rng(5);
    for (const char* schema : kSchemas) {
      auto masker = std::make_shared<kt::TokenMasker>(grammar(schema), vocab);
      kt::TokenConstraint c(masker);
      // Along one random generation: every fifth mask checked, with a tight
      // budget now and then.
      kt::GrammarMatcher::State s = masker->matcher().start();
      for (int step = 0; step < 60; ++step) {
        const int64_t left = 200 - step;
        const int64_t tight = int64_t(masker->matcher().min_bytes_to_end(s)) + 2;
        if (step % 5 == 0) expect_mask_is_brute_force(*masker, s, step % 10 == 0 ? std::min(left, tight) : left);
        const kt::TokenMask* m = c.next_mask(left);
        ASSERT_NE(m, nullptr) << c.error();
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < m->n_vocab; ++id)
          if (m->allowed(id)) ids.push_back(id);
        const int32_t pick = ids[rng() % ids.size()];
        if (std::find(vocab->end_tokens().begin(), vocab->end_tokens().end(), pick) != vocab->end_tokens().end()) break;
        ASSERT_TRUE(c.accept(pick));
        s = masker->matcher().walk(s, vocab->bytes(pick));
      }
    }
  }
}

// Random generations with a token budget: whenever the budget runs out the
// text is complete JSON.
TEST(TokenMask, TheBudgetAlwaysLeavesACompleteText) {
  Vocab v = load_vocab("ggml-vocab-llama-spm.gguf");
  if (!v.tok) GTEST_SKIP() << "no vocabulary";
  auto vocab = kt::TokenVocab::build(*v.tok, false);
  std::mt19937 rng(9);
  for (const char* schema : kSchemas) {
    auto masker = std::make_shared<kt::TokenMasker>(grammar(schema), vocab);
    for (int64_t budget : {24, 40, 80}) {
      for (int run = 0; run < 10; ++run) {
        kt::TokenConstraint c(masker);
        std::string text;
        bool ended = false;
        for (int64_t used = 0; used < budget; ++used) {
          const kt::TokenMask* m = c.next_mask(budget - used);
          ASSERT_NE(m, nullptr) << c.error() << " after " << text;
          std::vector<int32_t> ids;
          for (int32_t id = 0; id < m->n_vocab; ++id)
            if (m->allowed(id)) ids.push_back(id);
          // Prefer text over ending, as an untrained model would at random.
          int32_t pick = ids[rng() % ids.size()];
          if (v.tok->is_eog(pick) && ids.size() > 1 && rng() % 4) pick = ids[(rng() % (ids.size() - 1) + 1) % ids.size()];
          if (v.tok->is_eog(pick)) {
            ended = true;
            break;
          }
          ASSERT_TRUE(c.accept(pick));
          text += vocab->bytes(pick);
        }
        EXPECT_TRUE(ended || c.accepting()) << schema << " budget " << budget << ": " << text;
        EXPECT_FALSE(J::parse(text, nullptr, false).is_discarded()) << text;
      }
    }
  }
}

// Cost per token of the mask on real vocabularies, along random generations
// (a walk of the trie the first time a state is seen, a cache hit after).
TEST(TokenMask, MaskCost) {
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-llm.gguf"}) {
    Vocab v = load_vocab(name);
    if (!v.tok) {
      std::printf("MaskCost: %s not found, skipped\n", name);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto vocab = kt::TokenVocab::build(*v.tok, false);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::mt19937 rng(1);
    for (const char* schema : {kSchemas[0], kSchemas[2]}) {
      auto masker = std::make_shared<kt::TokenMasker>(grammar(schema), vocab);
      int64_t tokens = 0, first_request_tokens = 0;
      double first_request_s = 0;
      for (int run = 0; run < 20; ++run) {
        kt::TokenConstraint c(masker);
        const double before = masker->stats().seconds;
        for (int64_t used = 0; used < 300; ++used) {
          const kt::TokenMask* m = c.next_mask(300 - used);
          ASSERT_NE(m, nullptr) << c.error();
          ++tokens;
          std::vector<int32_t> ids;
          for (size_t w = 0; w < m->bits.size(); ++w)
            for (uint64_t bits = m->bits[w]; bits; bits &= bits - 1) ids.push_back(int32_t(w * 64 + size_t(__builtin_ctzll(bits))));
          const int32_t pick = ids[rng() % ids.size()];
          if (v.tok->is_eog(pick)) break;
          ASSERT_TRUE(c.accept(pick));
        }
        if (run == 0) first_request_s = masker->stats().seconds - before, first_request_tokens = tokens;
      }
      const kt::TokenMaskStats& st = masker->stats();
      std::printf(
          "MaskCost: %-32s n_vocab %6lld, trie %7zu nodes (built in %.0f ms) | %lld tokens in 20 requests: %.3f ms/token "
          "mean, walks %llu (%.2f ms each, %.0f nodes), cache hits %llu | first request %.3f ms/token\n",
          name, (long long)vocab->n_vocab(), vocab->n_nodes(), build_ms, (long long)tokens, 1e3 * st.seconds / double(tokens),
          (unsigned long long)st.walks, st.walks ? 1e3 * st.seconds / double(st.walks) : 0.0,
          st.walks ? double(st.nodes) / double(st.walks) : 0.0, (unsigned long long)(st.masks - st.walks),
          1e3 * first_request_s / double(std::max<int64_t>(1, first_request_tokens)));
    }
  }
}

}  // namespace
