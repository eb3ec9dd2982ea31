// Constrained decoding through the engine (runtime/engine.h with a grammar)
// on the bundled tiny model, whose random weights make it a worst case: what
// it writes is valid only because of the masks. Checks: every output is a
// complete text of its grammar (greedy and sampled, several seeds), a token
// budget that cuts the output still leaves it complete, a constrained request
// does not change the greedy output of an unconstrained one beside it,
// logprobs come with the tokens. ConstraintCost prints the decode time per
// token with and without a constraint (no wall-clock assertion).
//
// Plans come from kt-compile (KT_COMPILE_BIN, set by test/serve/CMakeLists.txt).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "runtime/grammar_matcher.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/prompt.h"

namespace {

namespace fs = std::filesystem;
using J = nlohmann::ordered_json;
using namespace std::chrono_literals;

std::string plan_path(std::string* why) {
#ifndef KT_COMPILE_BIN
  *why = "built without the compiler (no kt-compile to make plans)";
  return "";
#else
  static std::string path = [] {
    std::string tmpl = (fs::temp_directory_path() / "kt-constraint-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return std::string();
    const std::string out = tmpl + "/tiny-dsv3.ktp";
    const std::string cmd = std::string(KT_COMPILE_BIN) + " " + KT_TEST_DATA_DIR +
                            "/tiny-dsv3-F32.gguf --gpu-mem 0 --ctx 1024 -o " + out + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return out;
  }();
  if (path.empty()) *why = "kt-compile failed";
  return path;
#endif
}

std::unique_ptr<kt::Engine> start(int slots, std::string plan = "") {
  std::string why;
  if (plan.empty()) plan = plan_path(&why);
  if (plan.empty()) return nullptr;
  kt::ExecOptions xo;
  xo.n_slots = slots;
  auto ex = kt::Executor::load(plan, xo);
  EXPECT_TRUE(ex.ok()) << (ex.ok() ? "" : ex.error().message);
  if (!ex.ok()) return nullptr;
  auto e = kt::Engine::start(std::move(*ex));
  EXPECT_TRUE(e.ok());
  return e.ok() ? std::move(*e) : nullptr;
}

struct Result {
  std::string text;
  kt::EngineEvent last;
  std::vector<kt::TokenLogprobs> logprobs;
  int32_t tokens_in_events = 0;
};

// Submits requests together and waits for all of them.
std::vector<Result> run(kt::Engine& e, const std::vector<std::pair<std::vector<int32_t>, kt::GenerationParams>>& reqs) {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::vector<Result> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    kt::EngineRequest r;
    r.prompt = reqs[i].first;
    r.params = reqs[i].second;
    r.on_event = [&, i](kt::EngineEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      out[i].text += ev.text;
      out[i].tokens_in_events += ev.n_tokens;
      for (auto& lp : ev.logprobs) out[i].logprobs.push_back(lp);
      if (ev.done) {
        out[i].last = std::move(ev);
        ++done;
        cv.notify_all();
      }
    };
    EXPECT_FALSE(e.submit(std::move(r)).has_value());
  }
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, 300s, [&] { return done == reqs.size(); }));
  return out;
}

std::shared_ptr<const kt::Grammar> schema_grammar(const std::string& schema) {
  auto g = kt::json_schema_grammar(J::parse(schema));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::make_shared<const kt::Grammar>(std::move(*g)) : nullptr;
}

bool complete(const std::shared_ptr<const kt::Grammar>& g, const std::string& text) {
  kt::GrammarMatcher m(g);
  const auto s = m.walk(m.start(), text);
  return s != kt::GrammarMatcher::kDead && m.accepting(s);
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":130}},"required":["name","age"]})",
    R"({"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":5})",
    R"({"type":"object","properties":{"ok":{"type":"boolean"},"score":{"type":"number","minimum":0,"maximum":1},"tags":{"type":"array","items":{"type":"string","maxLength":8}}},"required":["ok","score","tags"]})",
    R"({"anyOf":[{"type":"null"},{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-f0-9]{8}$"}},"required":["id"]}]})",
};

TEST(EngineConstraint, OutputsAreCompleteTextsOfTheGrammar) {
  auto e = start(4);
  if (!e) GTEST_SKIP() << "no plan";
  const auto prompt = kt::tokenize_prompt(e->tokenizer(), "Give me JSON:", false);
  std::vector<std::pair<std::vector<int32_t>, kt::GenerationParams>> reqs;
  std::vector<std::shared_ptr<const kt::Grammar>> grammars;
  for (const char* schema : kSchemas) {
    for (int variant = 0; variant < 4; ++variant) {
      kt::GenerationParams gp;
      gp.grammar = schema_grammar(schema);
      gp.max_tokens = 300;
      gp.sampling.temperature = variant == 0 ? 0.0f : 1.0f;
      gp.sampling.top_k = 0;
      gp.sampling.top_p = 1;
      gp.sampling.min_p = 0;
      gp.sampling.seed = 100 + uint64_t(variant);
      grammars.push_back(gp.grammar);
      reqs.push_back({prompt, gp});
    }
  }
  const auto out = run(*e, reqs);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].last.finish, kt::FinishReason::Stop) << out[i].text << " " << out[i].last.error;
    EXPECT_TRUE(complete(grammars[i], out[i].text)) << kSchemas[i / 4] << ": " << out[i].text;
    EXPECT_FALSE(J::parse(out[i].text, nullptr, false).is_discarded()) << out[i].text;
  }
  const kt::EngineMetrics m = e->metrics();
  EXPECT_GT(m.constrained_tokens, 0u);
  EXPECT_GT(m.constraint_mask_walks, 0u);
}

TEST(EngineConstraint, ABudgetThatCutsTheOutputStillLeavesItComplete) {
  auto e = start(2);
  if (!e) GTEST_SKIP() << "no plan";
  const auto prompt = kt::tokenize_prompt(e->tokenizer(), "List:", false);
  const auto g = schema_grammar(R"({"type":"object","properties":{"words":{"type":"array","items":{"type":"string"}}},"required":["words"]})");
  std::vector<std::pair<std::vector<int32_t>, kt::GenerationParams>> reqs;
  for (int64_t budget : {14, 20, 32, 48}) {
    for (uint64_t seed : {1, 2, 3}) {
      kt::GenerationParams gp;
      gp.grammar = g;
      gp.max_tokens = budget;
      gp.sampling.temperature = 1.5f;
      gp.sampling.top_k = 0;
      gp.sampling.seed = seed;
      reqs.push_back({prompt, gp});
    }
  }
  for (const Result& r : run(*e, reqs)) {
    EXPECT_TRUE(complete(g, r.text)) << r.text;
    EXPECT_LE(r.last.completion_tokens, 48);
  }
}

TEST(EngineConstraint, AConstrainedNeighbourChangesNothing) {
  auto e = start(4);
  if (!e) GTEST_SKIP() << "no plan";
  const auto prompt = kt::tokenize_prompt(e->tokenizer(), "Once upon a time", false);
  kt::GenerationParams free_gp;
  free_gp.sampling.temperature = 0;
  free_gp.max_tokens = 40;
  free_gp.ignore_eos = true;
  const std::string alone = run(*e, {{prompt, free_gp}})[0].text;
  kt::GenerationParams c_gp;
  c_gp.grammar = schema_grammar(kSchemas[0]);
  c_gp.max_tokens = 200;
  const auto out = run(*e, {{prompt, c_gp}, {prompt, free_gp}, {prompt, c_gp}});
  EXPECT_EQ(out[1].text, alone);
}

TEST(EngineConstraint, LogprobsComeWithTheTokens) {
  auto e = start(1);
  if (!e) GTEST_SKIP() << "no plan";
  const auto prompt = kt::tokenize_prompt(e->tokenizer(), "Hello", false);
  kt::GenerationParams gp;
  gp.sampling.temperature = 0;
  gp.max_tokens = 12;
  gp.ignore_eos = true;
  gp.logprobs = 3;
  const Result r = run(*e, {{prompt, gp}})[0];
  ASSERT_EQ(int64_t(r.logprobs.size()), r.last.completion_tokens);
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    const kt::TokenLogprobs& lp = r.logprobs[i];
    EXPECT_EQ(lp.token, r.last.output_tokens[i]);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].id, lp.token) << "greedy picks the most likely token";
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.logprob);
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
    EXPECT_GE(lp.top[1].logprob, lp.top[2].logprob);
  }
}

// Decode time per token with and without a constraint, and the mask's share.
// Runs alternate (free, constrained, ...) and the fastest of each kind is
// kept: the machine may be shared, and the minimum is what the code costs.
// KT_CONSTRAINT_BENCH_PLAN=plan.ktp measures another model (e.g. one made by
// kt-gguf synth with a real 102k vocabulary); KT_CONSTRAINT_BENCH_SCHEMA=
// '{...}' a schema instead of json_object.
TEST(EngineConstraint, ConstraintCost) {
  const char* bench_plan = std::getenv("KT_CONSTRAINT_BENCH_PLAN");
  auto e = start(1, bench_plan ? bench_plan : "");
  if (!e) GTEST_SKIP() << "no plan";
  const auto prompt = kt::tokenize_prompt(e->tokenizer(), "JSON:", false);
  const char* schema = std::getenv("KT_CONSTRAINT_BENCH_SCHEMA");
  auto grammar = schema ? kt::json_schema_grammar(J::parse(schema)) : kt::json_object_grammar();
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  const auto g = std::make_shared<const kt::Grammar>(std::move(*grammar));
  struct Cost {
    double step_ms = 1e9, mask_ms = 1e9;
  } free_cost, c_cost;
  uint64_t walks = 0, constrained = 0;
  double mask_s = 0;  // all constrained rounds, the first (cold: every state walked) included
  for (int round = 0; round < 12; ++round) {
    const bool constrained_round = round % 2 == 1;
    const kt::EngineMetrics m0 = e->metrics();
    kt::GenerationParams gp;
    gp.grammar = constrained_round ? g : nullptr;
    gp.sampling.temperature = 1.0f;
    gp.sampling.seed = uint64_t(round / 2);
    gp.max_tokens = 200;
    gp.ignore_eos = !constrained_round;
    run(*e, {{prompt, gp}});
    const kt::EngineMetrics m1 = e->metrics();
    const double steps = double(m1.decode_step_tokens - m0.decode_step_tokens);
    if (steps < 20) continue;  // too short to time
    Cost& c = constrained_round ? c_cost : free_cost;
    c.step_ms = std::min(c.step_ms, 1e3 * (m1.decode_seconds - m0.decode_seconds) / steps);
    if (constrained_round) {
      const double n = double(m1.constrained_tokens - m0.constrained_tokens);
      c.mask_ms = std::min(c.mask_ms, 1e3 * (m1.constraint_seconds - m0.constraint_seconds) / n);
      walks += m1.constraint_mask_walks - m0.constraint_mask_walks;
      mask_s += m1.constraint_seconds - m0.constraint_seconds;
      constrained += m1.constrained_tokens - m0.constrained_tokens;
    }
  }
  std::printf("ConstraintCost: %s (n_vocab %lld): decode step %.3f ms/token free, %.3f ms/token under %s "
              "(%+.1f%%); mask %.4f ms/token in the fastest run, %.4f ms/token over all (%llu walks of the trie in "
              "%llu constrained tokens)\n",
              bench_plan ? bench_plan : "tiny model", (long long)e->n_vocab(), free_cost.step_ms, c_cost.step_ms,
              schema ? "a schema" : "json_object", 100.0 * (c_cost.step_ms / free_cost.step_ms - 1.0), c_cost.mask_ms,
              constrained ? 1e3 * mask_s / double(constrained) : 0.0, (unsigned long long)walks, (unsigned long long)constrained);
}

}  // namespace
