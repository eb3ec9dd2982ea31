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
#include <filesystem>
#include <map>
#include <utility>

#include "runtime/executor.h"
#include "runtime/sequence.h"
#include "test/cuda/cuda_test_util.h"
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

// The executor as llama_cpp_match.h drives it (test/unit/plan_e2e_test.cpp's runner).
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
      const size_t at = size_t((pos - pos0_) * n_layer_ + e.layer);
      if (at < margins_.size()) margins_[at] = e.margins[t];
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

std::string case_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(DevicePlans, CudaPlanVsLlamaCpp, testing::ValuesIn(plan_names()), case_name);

}  // namespace
