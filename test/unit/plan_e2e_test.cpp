// End to end: plans that kt-compile wrote (the ctest fixture e2e_plans runs
// test/compile_e2e_plans.sh: every reference model, CPU only, deepseek2 with
// MLA absorbed and decompressed) run by the plan executor, against llama.cpp's
// logits with llama_cpp_match.h (every prompt row, the decode rows fed one at
// a time, greedy tokens on F32 models). The models come from ../shared/models
// when it is there, from test/data's copies otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "runtime/executor.h"
#include "runtime/sequence.h"
#include "runtime/tokenizer.h"
#include "test/unit/executor_runner.h"
#include "test/unit/llama_cpp_match.h"

namespace {

namespace fs = std::filesystem;

fs::path models_dir() {
  const fs::path shared = KT_SHARED_MODELS_DIR;
  return fs::exists(shared / "index.json") ? shared : fs::path(KT_TEST_DATA_DIR);
}

using kt::test::ExecutorRunner;

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
  const nlohmann::json index = nlohmann::json::parse(in);  // a named object: a temporary's entries would dangle
  for (const auto& e : index["entries"]) {
    if (e["model"] != pc.model + ".gguf") continue;
    EXPECT_EQ(tok->encode(std::string(e["prompt_text"]), true, false), e["prompt_tokens"].get<std::vector<int32_t>>())
        << e["prompt"];
  }

  // A BF16 plan must compute something else than the plan of ggml's rounding
  // somewhere (the longest prompt gives some experts 32 rows), or it tests
  // nothing; an int8 plan computes otherwise everywhere.
  if (pc.form == "bf16" || pc.form == "int8") {
    const std::string base = pc.model.find("tiny-ds") == 0 ? "absorbed" : "plain";
    auto exact = kt::Executor::load((fs::path(KT_E2E_PLAN_DIR) / (pc.model + "-" + base + ".ktp")).string());
    ASSERT_TRUE(exact.ok()) << exact.error().message;
    ExecutorRunner a(**ex), b(**exact);
    bool differ = false;
    for (const auto& e : index["entries"])
      if (e["model"] == pc.model + ".gguf") {
        auto pa = a.prompt(e["prompt_tokens"].get<std::vector<int32_t>>());
        auto pb = b.prompt(e["prompt_tokens"].get<std::vector<int32_t>>());
        ASSERT_TRUE(pa.ok() && pb.ok());
        differ = differ || *pa != *pb;
      }
    EXPECT_TRUE(differ) << "the plan computed what ggml's rounding computes: its " << pc.form << " path never ran";
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
  // Every MoE model with its routed experts split in two calls (a random half
  // over gathered slices, the rest over the whole tensor, then added): the
  // hot-expert placement's plan shape, held to the same tolerances.
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i)
    if (cases[i].model.find("llama") == std::string::npos && cases[i].form != "decompressed")
      cases.push_back({cases[i].model, "split"});
  // The quantized MoE models with KTransformers' AMXBF16 experts
  // (rules/cpu-only-amx-bf16.yaml): the experts that the 102-token prompt gives
  // 32 or more rows compute in BF16, not as llama.cpp rounds; held to the
  // same tolerances all the same.
  for (const char* m : {"tiny-dsv2lite-Q4_K_M", "tiny-dsv3-Q4_K_M", "tiny-dsv3-Q8_0", "tiny-dsv3-IQ4_XS",
                        "tiny-qwen2moe-Q4_K_M", "tiny-mixtral-Q4_K_M"})
    cases.push_back({m, "bf16"});
  // The same with KTransformers' AMXInt8 experts (rules/cpu-only-amx-int8.yaml):
  // repacked to int8 at load, every step's expert products int8 by int8.
  for (const char* m : {"tiny-dsv2lite-Q4_K_M", "tiny-dsv3-Q4_K_M", "tiny-dsv3-Q8_0", "tiny-dsv3-IQ4_XS",
                        "tiny-qwen2moe-Q4_K_M", "tiny-mixtral-Q4_K_M"})
    cases.push_back({m, "int8"});
  return cases;
}

std::string case_name(const testing::TestParamInfo<PlanCase>& info) {
  std::string s = info.param.model + "_" + info.param.form;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, PlanVsLlamaCpp, testing::ValuesIn(all_cases()), case_name);

// Expert deferral (kt-compile --defer-experts 1): each decode token's weakest
// routed choice joins the residual one layer late. It changes results, so it
// is measured against the exact plan rather than llama.cpp: on every prompt,
// the prompt's rows (prefill is not deferred) must be identical, and the
// decode rows (the exact plan's greedy continuation fed to both) are reported
// as relative L2 and argmax agreement.
class DeferredExperts : public testing::TestWithParam<PlanCase> {};

TEST_P(DeferredExperts, ChangesOnlyDecodeAndReportsTheError) {
  const PlanCase& pc = GetParam();
  const fs::path models = models_dir();
  if (!fs::exists(models / (pc.model + ".gguf"))) GTEST_SKIP() << pc.model << ".gguf is not in " << models;
  const fs::path dir = KT_E2E_PLAN_DIR;
  auto exact = kt::Executor::load((dir / (pc.model + "-" + pc.form + ".ktp")).string());
  auto defer = kt::Executor::load((dir / (pc.model + "-defer1.ktp")).string());
  ASSERT_TRUE(exact.ok()) << exact.error().message;
  ASSERT_TRUE(defer.ok()) << defer.error().message;
  ExecutorRunner a(**exact), b(**defer);
  const int64_t nv = a.n_vocab();
  std::ifstream in(models / "index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  double sum_rel = 0, worst = 0;
  int rows = 0, same = 0;
  for (const auto& e : index["entries"]) {
    if (e["model"] != pc.model + ".gguf") continue;
    const std::vector<int32_t> prompt = e["prompt_tokens"].get<std::vector<int32_t>>();
    auto pa = a.prompt(prompt);
    auto pb = b.prompt(prompt);
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_EQ(*pa, *pb) << "prefill is not deferred: the prompt's logits must not change";
    std::vector<float> la(pa->end() - nv, pa->end()), lb(pb->end() - nv, pb->end());
    for (int step = 0; step < 8; ++step) {
      const int32_t tok = int32_t(std::max_element(la.begin(), la.end()) - la.begin());
      auto sa = a.step(tok);
      auto sb = b.step(tok);
      ASSERT_TRUE(sa.ok() && sb.ok());
      la = *sa;
      lb = *sb;
      double num = 0, den = 0;
      for (int64_t i = 0; i < nv; ++i) {
        num += (double(la[size_t(i)]) - double(lb[size_t(i)])) * (double(la[size_t(i)]) - double(lb[size_t(i)]));
        den += double(la[size_t(i)]) * double(la[size_t(i)]);
      }
      const double rel = std::sqrt(num / std::max(den, 1e-30));
      sum_rel += rel;
      worst = std::max(worst, rel);
      same += std::max_element(la.begin(), la.end()) - la.begin() == std::max_element(lb.begin(), lb.end()) - lb.begin();
      ++rows;
    }
  }
  ASSERT_GT(rows, 0) << "no prompts for " << pc.model;
  std::printf("[ defer     ] %-22s K=1: decode rows %d, rel L2 mean %.3e worst %.3e, argmax same %d/%d\n",
              pc.model.c_str(), rows, sum_rel / rows, worst, same, rows);
  EXPECT_GT(worst, 0.0) << "the deferred plan computed exactly the exact plan's logits: nothing was deferred";
  EXPECT_LT(sum_rel / rows, 1.0) << "deferral should shift the logits, not replace them";
}

std::vector<PlanCase> defer_cases() {
  std::vector<PlanCase> cases;
  for (const PlanCase& c : all_cases())
    if (c.model.find("llama") == std::string::npos && c.form != "decompressed" && c.form != "split" && c.form != "bf16" &&
        c.form != "int8")
      cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, DeferredExperts, testing::ValuesIn(defer_cases()), case_name);

}  // namespace
