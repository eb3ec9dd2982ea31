// End to end: plans that kt-compile wrote (the ctest fixture e2e_plans runs
// test/compile_e2e_plans.sh: every reference model, CPU only, deepseek2 with
// MLA absorbed and decompressed) run by the plan executor, against llama.cpp's
// logits with llama_cpp_match.h (every prompt row, the decode rows fed one at
// a time, greedy tokens on F32 models). The models come from ../shared/models
// when it is there, from test/data's copies otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "runtime/executor.h"
#include "runtime/sequence.h"
#include "runtime/tokenizer.h"
#include "test/unit/llama_cpp_match.h"

namespace {

namespace fs = std::filesystem;

fs::path models_dir() {
  const fs::path shared = KT_SHARED_MODELS_DIR;
  return fs::exists(shared / "index.json") ? shared : fs::path(KT_TEST_DATA_DIR);
}

// The executor as llama_cpp_match.h drives it: one sequence in slot 0, every
// prompt row's logits, routing margins and runner-up swaps through the
// routing hook.
class ExecutorRunner final : public kt::test::LogitsRunner, public kt::kern::RoutingHook {
 public:
  explicit ExecutorRunner(kt::Executor& ex) : ex_(ex), seq_(ex, 0), n_layer_(ex.plan().model()->n_layer()) {
    ex_.set_routing_hook(this);
  }
  ~ExecutorRunner() override { ex_.set_routing_hook(nullptr); }

  int64_t n_vocab() const override { return ex_.n_vocab(); }
  int64_t n_layer() const override { return n_layer_; }

  kt::Result<std::vector<float>> prompt(std::span<const int32_t> tokens) override {
    seq_.truncate(0);
    begin(0, int64_t(tokens.size()));
    std::vector<float> rows(tokens.size() * size_t(n_vocab()));
    auto last = seq_.feed(tokens, [&](int64_t i, std::span<const float> row) {
      std::copy(row.begin(), row.end(), rows.begin() + i * n_vocab());
    });
    if (!last.ok()) return last.error();
    return rows;
  }
  kt::Result<std::vector<float>> step(int32_t token) override {
    begin(seq_.n_past(), 1);
    auto l = seq_.feed(std::span<const int32_t>(&token, 1));
    if (!l.ok()) return l.error();
    return std::vector<float>(l->begin(), l->end());
  }
  std::vector<float> margins() const override { return margins_; }
  void add_routing_swap(int64_t il, int64_t pos) override { swaps_.emplace_back(il, pos); }
  void clear_routing_swaps() override { swaps_.clear(); }

  void on_route(kt::kern::RouteEvent& e) override {
    for (int64_t t = 0; t < e.step->n_tokens; ++t) {
      const int64_t pos = e.step->pos[t];
      margins_[size_t((pos - pos0_) * n_layer_ + e.layer)] = e.margins[t];
      for (const auto& [il, p] : swaps_)
        if (il == e.layer && p == pos) e.take_runner_up(t);
    }
  }

 private:
  void begin(int64_t pos0, int64_t n) {
    pos0_ = pos0;
    margins_.assign(size_t(n * n_layer_), INFINITY);
  }

  kt::Executor& ex_;
  kt::Sequence seq_;
  int64_t n_layer_;
  int64_t pos0_ = 0;
  std::vector<float> margins_;
  std::vector<std::pair<int64_t, int64_t>> swaps_;
};

struct PlanCase {
  std::string model;  // file stem
  std::string form;   // "absorbed", "decompressed" (deepseek2) or "plain"
};

void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.model << " " << c.form; }

class PlanVsLlamaCpp : public testing::TestWithParam<PlanCase> {};

TEST_P(PlanVsLlamaCpp, MatchesLogits) {
  const PlanCase& pc = GetParam();
  const fs::path models = models_dir();
  if (!fs::exists(models / (pc.model + ".gguf"))) GTEST_SKIP() << pc.model << ".gguf is not in " << models;
  const fs::path plan = fs::path(KT_E2E_PLAN_DIR) / (pc.model + "-" + pc.form + ".ktp");
  ASSERT_TRUE(fs::exists(plan)) << plan << " is missing: the e2e_plans fixture compiles it";
  auto ex = kt::Executor::load(plan.string());
  ASSERT_TRUE(ex.ok()) << ex.error().message;

  // The prompts' tokens come from index.json; the model's own tokenizer must agree.
  auto tok = kt::Tokenizer::from_gguf((*ex)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  std::ifstream in(models / "index.json");
  for (const auto& e : nlohmann::json::parse(in)["entries"]) {
    if (e["model"] != pc.model + ".gguf") continue;
    EXPECT_EQ(tok->encode(std::string(e["prompt_text"]), true, false), e["prompt_tokens"].get<std::vector<int32_t>>())
        << e["prompt"];
  }

  ExecutorRunner runner(**ex);
  const kt::test::MatchSummary s = kt::test::match_llama_cpp(runner, models, pc.model);
  std::printf("[ plan      ] %-22s %-12s: worst rel L2 %.3e (%s), argmax %d/%d rows, %d rows across a near tie\n",
              pc.model.c_str(), pc.form.c_str(), s.worst_rel, s.worst_where.c_str(), s.argmax_same, s.rows, s.tipped);
}

std::vector<PlanCase> all_cases() {
  std::vector<PlanCase> cases;
  for (const char* m : {"tiny-dsv2lite-F32", "tiny-dsv2lite-Q4_K_M", "tiny-dsv3-F32", "tiny-dsv3-Q8_0",
                        "tiny-dsv3-Q4_K_M", "tiny-dsv3-IQ4_XS"})
    for (const char* form : {"absorbed", "decompressed"}) cases.push_back({m, form});
  for (const char* m : {"tiny-qwen2moe-F32", "tiny-qwen2moe-Q4_K_M", "tiny-mixtral-F32", "tiny-mixtral-Q4_K_M",
                        "tiny-llama-F32"})
    cases.push_back({m, "plain"});
  return cases;
}

std::string case_name(const testing::TestParamInfo<PlanCase>& info) {
  std::string s = info.param.model + "_" + info.param.form;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, PlanVsLlamaCpp, testing::ValuesIn(all_cases()), case_name);

}  // namespace
