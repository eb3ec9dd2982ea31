// End to end on the GPU: plans that put work on cuda:0 (scripts/device-pack.sh
// compiles them into out/device/plans as <model>@<rules>.ktp: hybrid rules,
// where attention, dense layers, routers and shared experts run on the GPU and
// routed experts on the CPU with copies and events in between, and all-gpu
// rules, MLA absorbed and decompressed), run by kt::Executor against
// llama.cpp's logits with test/unit/llama_cpp_match.h, as plan_e2e_test does for
// CPU plans. The models and references come from test/data, or from
// out/device/models for the quantized ones device-pack.sh copies there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "runtime/executor.h"
#include "runtime/sequence.h"
#include "test/cuda/cuda_test_util.h"
#include "test/unit/executor_runner.h"
#include "test/unit/llama_cpp_match.h"

namespace {

namespace fs = std::filesystem;

fs::path plans_dir() {
  const char* e = std::getenv("KT_CUDA_PLANS");
  return e && *e ? fs::path(e) : fs::path("out/device/plans");
}

std::vector<std::string> plan_names() {
  std::vector<std::string> v;
  std::error_code ec;
  if (fs::is_directory(plans_dir(), ec))
    for (const auto& e : fs::directory_iterator(plans_dir(), ec))
      if (e.path().extension() == ".ktp") v.push_back(e.path().stem().string());
  std::sort(v.begin(), v.end());
  if (v.empty()) v.push_back("none");
  return v;
}

// Where the model's GGUF, index entry and reference logits are.
fs::path models_dir_for(const std::string& model) {
  for (const fs::path& d : {fs::path(KT_TEST_DATA_DIR), fs::path("out/device/models")})
    if (fs::exists(d / (model + ".gguf")) && fs::exists(d / "index.json")) return d;
  return {};
}

std::map<std::string, std::string>& summary() {
  static std::map<std::string, std::string> s;
  return s;
}

class Summary : public testing::Environment {
 public:
  void TearDown() override {
    if (summary().empty()) return;
    std::printf("\n== GPU plans vs llama.cpp logits ==\n");
    for (const auto& [plan, line] : summary()) std::printf("  %-40s %s\n", plan.c_str(), line.c_str());
  }
};
const auto* const g_env = testing::AddGlobalTestEnvironment(new Summary);

using kt::test::ExecutorRunner;

class CudaPlanVsLlamaCpp : public testing::TestWithParam<std::string> {};

TEST_P(CudaPlanVsLlamaCpp, MatchesLogits) {
  KT_REQUIRE_GPU();
  const std::string name = GetParam();
  if (name == "none") GTEST_SKIP() << "no plans in " << plans_dir() << " (scripts/device-pack.sh compiles them)";
  const std::string model = name.substr(0, name.find('@'));
  const fs::path models = models_dir_for(model);
  if (models.empty()) GTEST_SKIP() << model << ".gguf and its references are not here";
  auto ex = kt::Executor::load((plans_dir() / (name + ".ktp")).string());
  ASSERT_TRUE(ex.ok()) << ex.error().message;
  const std::string kernels = (*ex)->kernel_summary();
  EXPECT_NE(kernels.find("cuda."), std::string::npos) << "the plan runs nothing on the GPU";
  if (std::getenv("KT_VERBOSE")) std::printf("%s", kernels.c_str());

  ExecutorRunner runner(**ex);
  const kt::test::MatchSummary s = kt::test::match_llama_cpp(runner, models, model);
  char line[256];
  std::snprintf(line, sizeof line, "worst rel L2 %.3e, argmax %d/%d rows, %d across a near tie", s.worst_rel,
                s.argmax_same, s.rows, s.tipped);
  summary()[name] = line;
  std::printf("[ plan      ] %-40s %s (%s)\n", name.c_str(), line, s.worst_where.c_str());
}

// Decode's recorded GPU work (CUDA graphs) replays exactly what launching
// each kernel computes, step after step: positions move on (past several
// splits of the cache, so attention's recordings are redone), and the gates
// are recorded too (no routing hook here).
TEST_P(CudaPlanVsLlamaCpp, GraphsReplayExactly) {
  KT_REQUIRE_GPU();
  const std::string name = GetParam();
  if (name == "none") GTEST_SKIP() << "no plans in " << plans_dir();
  const std::string model = name.substr(0, name.find('@'));
  if (models_dir_for(model).empty()) GTEST_SKIP() << model << ".gguf is not here";
  kt::ExecOptions opts;
  opts.cuda_graph_min_calls = 2;  // hybrid plans' short runs between CPU calls too
  auto ex = kt::Executor::load((plans_dir() / (name + ".ktp")).string(), opts);
  ASSERT_TRUE(ex.ok()) << ex.error().message;
  const int64_t n_vocab = (*ex)->n_vocab();
  const int64_t n_steps = std::min<int64_t>(150, (*ex)->n_ctx() - 8);
  auto run = [&](bool graphs) {
    (*ex)->set_cuda_graphs(graphs);
    kt::Sequence seq(**ex, 0);
    std::vector<int32_t> prompt = {1, 17, 333, 4242 % int32_t(n_vocab)};
    std::vector<float> logits;
    auto first = seq.feed(prompt);
    EXPECT_TRUE(first.ok()) << first.error().message;
    for (int64_t i = 0; i < n_steps && first.ok(); ++i) {
      const int32_t t = int32_t((i * 7919 + 11) % n_vocab);
      auto l = seq.feed(std::span<const int32_t>(&t, 1));
      EXPECT_TRUE(l.ok()) << l.error().message;
      if (!l.ok()) break;
      logits.insert(logits.end(), l->begin(), l->end());
    }
    return logits;
  };
  const std::vector<float> launched = run(false);
  const size_t before = (*ex)->cuda_graphs();
  const std::vector<float> replayed = run(true);
  EXPECT_GT((*ex)->cuda_graphs(), before) << "decode recorded nothing";
  ASSERT_EQ(launched.size(), replayed.size());
  size_t differ = 0, first_diff = launched.size();
  for (size_t i = 0; i < launched.size(); ++i)
    if (std::memcmp(&launched[i], &replayed[i], sizeof(float)) != 0) {
      ++differ;
      first_diff = std::min(first_diff, i);
    }
  EXPECT_EQ(differ, 0u) << "first at decode step " << first_diff / size_t(n_vocab) << " of " << n_steps;
}

std::string case_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(DevicePlans, CudaPlanVsLlamaCpp, testing::ValuesIn(plan_names()), case_name);

}  // namespace
