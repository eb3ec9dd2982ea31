// The reference model runner against llama.cpp's logits (llama_cpp_match.h:
// every index.json entry, deepseek2 models with MLA absorbed and not). Skips
// when the shared models are absent; the self-consistency tests at the end run
// on test/data's tiny-dsv3-F32. KT_REF_VERBOSE=1 prints every compared row.
#include "runtime/reference_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/gguf_writer.h"
#include "test/unit/llama_cpp_match.h"
#include "test/unit/npy.h"

namespace {

namespace fs = std::filesystem;
using kt::ReferenceModel;
using kt::ReferenceModelOptions;

// The full reference set beside the checkout, else test/data's copies (four models).
const fs::path kModels = fs::exists(fs::path(KT_SHARED_MODELS_DIR) / "index.json") ? fs::path(KT_SHARED_MODELS_DIR)
                                                                                   : fs::path(KT_TEST_DATA_DIR);

using kt::test::rel_l2;

struct ModelCase {
  std::string model;  // file stem, e.g. "tiny-dsv3-F32"
  bool absorb_mla;
  bool ggml_rounding;
};

std::string case_name(const testing::TestParamInfo<ModelCase>& info) {
  std::string s = info.param.model + (info.param.absorb_mla ? "_absorbed" : "") +
                  (info.param.ggml_rounding ? "_ggml_rounding" : "_exact");
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// The reference model as llama_cpp_match.h runs it.
class ReferenceRunner final : public kt::test::LogitsRunner {
 public:
  explicit ReferenceRunner(ReferenceModel& m) : m_(m) {}
  int64_t n_vocab() const override { return m_.hparams().n_vocab; }
  int64_t n_layer() const override { return m_.hparams().n_layer; }
  kt::Result<std::vector<float>> prompt(std::span<const int32_t> tokens) override { return m_.forward(tokens, 0); }
  kt::Result<std::vector<float>> step(int32_t token) override {
    return m_.forward(std::span<const int32_t>(&token, 1), int(m_.n_cached()));
  }
  std::vector<float> margins() const override { return m_.routing_margins(); }
  void add_routing_swap(int64_t il, int64_t pos, int k) override { m_.add_routing_swap(il, pos, k); }
  void clear_routing_swaps() override { m_.clear_routing_swaps(); }

 private:
  ReferenceModel& m_;
};

class ReferenceModelVsLlamaCpp : public testing::TestWithParam<ModelCase> {};

TEST_P(ReferenceModelVsLlamaCpp, MatchesLogits) {
  const ModelCase& mc = GetParam();
  const fs::path model_path = kModels / (mc.model + ".gguf");
  if (!fs::exists(kModels / "index.json") || !fs::exists(model_path))
    GTEST_SKIP() << "shared models not found at " << kModels;
  auto model = ReferenceModel::open(model_path.string(), ReferenceModelOptions{mc.absorb_mla, mc.ggml_rounding});
  ASSERT_TRUE(model.ok()) << model.error().message;
  ReferenceRunner runner(**model);
  const kt::test::MatchSummary s = kt::test::match_llama_cpp(runner, kModels, mc.model);
  std::printf(
      "[ reference ] %-22s absorb_mla=%d ggml_rounding=%d: worst rel L2 %.3e (%s), "
      "argmax %d/%d rows, %d rows matched across a near-tied expert choice\n",
      mc.model.c_str(), int(mc.absorb_mla), int(mc.ggml_rounding), s.worst_rel, s.worst_where.c_str(),
      s.argmax_same, s.rows, s.tipped);
}

// Every model as llama.cpp rounds (ggml_rounding), deepseek2 with MLA absorbed
// and not. Exact float math is compared on the F32 models only: there it is
// llama.cpp's computation but for its F16 KV cache, while on quantized models
// it lacks llama.cpp's 8-bit activations, which move logits by 1-5% and tip
// several near-tied expert choices at once (a dozen rows over 0.2).
std::vector<ModelCase> all_cases() {
  const std::vector<std::string> mla = {"tiny-dsv2lite-F32", "tiny-dsv2lite-Q4_K_M",
                                        "tiny-dsv3-F32",     "tiny-dsv3-Q8_0",
                                        "tiny-dsv3-Q4_K_M",  "tiny-dsv3-IQ4_XS"};
  const std::vector<std::string> gqa = {"tiny-qwen2moe-F32", "tiny-qwen2moe-Q4_K_M",
                                        "tiny-mixtral-F32", "tiny-mixtral-Q4_K_M",
                                        "tiny-llama-F32"};
  std::vector<ModelCase> cases;
  for (bool ggml : {true, false}) {
    for (const auto& m : mla)
      for (bool absorb : {false, true})
        if (ggml || m.ends_with("-F32")) cases.push_back({m, absorb, ggml});
    for (const auto& m : gqa)
      if (ggml || m.ends_with("-F32")) cases.push_back({m, false, ggml});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceModelVsLlamaCpp, testing::ValuesIn(all_cases()),
                         case_name);

// ---- self-consistency on the bundled model (runs on a plain clone) ----------

const fs::path kBundled = fs::path(KT_TEST_DATA_DIR) / "tiny-dsv3-F32.gguf";

// Tokens with no meaning, inside the 4096-piece vocabulary.
const std::vector<int32_t> kTokens = {1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567};

TEST(ReferenceModelBundled, HyperParametersFromMetadata) {
  auto m = ReferenceModel::open(kBundled.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  const kt::ModelHParams& hp = (*m)->hparams();
  EXPECT_EQ(hp.arch, kt::ModelArch::Deepseek2);
  EXPECT_EQ(hp.n_layer, 4);
  EXPECT_EQ(hp.n_vocab, 4096);
  EXPECT_EQ(hp.q_lora_rank, 64);
  EXPECT_EQ(hp.d_rope, 16);
  EXPECT_EQ(hp.d_nope, 32);
  EXPECT_EQ(hp.gating, kt::cpu::ref::MoeGating::Sigmoid);
  EXPECT_FLOAT_EQ(hp.expert_weights_scale, 2.5f);
  // YaRN factor 40, mscale_all_dim 0.707: kq_scale = (1 + 0.0707 ln 40)^2 / sqrt(48).
  const double mscale = 1.0 + 0.0707 * std::log(40.0);
  EXPECT_NEAR(hp.kq_scale, mscale * mscale / std::sqrt(48.0), 1e-6);
  EXPECT_NEAR(hp.rope.attn_factor, 1.0 / (1.0 + 0.1 * std::log(40.0)), 1e-6);
}

TEST(ReferenceModelBundled, AbsorbedMlaEqualsDecompressed) {
  auto plain = ReferenceModel::open(kBundled.string(), ReferenceModelOptions{false});
  auto absorbed = ReferenceModel::open(kBundled.string(), ReferenceModelOptions{true});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(absorbed.ok()) << absorbed.error().message;
  auto a = (*plain)->forward(kTokens, 0);
  auto b = (*absorbed)->forward(kTokens, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t v = (*plain)->hparams().n_vocab;
  for (size_t r = 0; r < kTokens.size(); ++r)
    EXPECT_LE(rel_l2(b->data() + r * v, a->data() + r * v, v), 1e-5) << "row " << r;
}

TEST(ReferenceModelBundled, OneTokenAtATimeEqualsOneBatch) {
  for (bool absorb : {false, true}) {
    auto m = ReferenceModel::open(kBundled.string(), ReferenceModelOptions{absorb});
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto batch = (*m)->forward(kTokens, 0);
    ASSERT_TRUE(batch.ok());
    const int64_t v = (*m)->hparams().n_vocab;
    for (size_t i = 0; i < kTokens.size(); ++i) {
      auto step = (*m)->forward(std::span<const int32_t>(&kTokens[i], 1), int(i));
      ASSERT_TRUE(step.ok()) << step.error().message;
      EXPECT_LE(rel_l2(step->data(), batch->data() + i * v, v), 1e-5)
          << "absorb " << absorb << " token " << i;
    }
    EXPECT_EQ((*m)->n_cached(), int64_t(kTokens.size()));
  }
}

TEST(ReferenceModelBundled, RewindingReplaysTheSameLogits) {
  auto m = ReferenceModel::open(kBundled.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto first = (*m)->forward(kTokens, 0);
  ASSERT_TRUE(first.ok());
  const std::vector<int32_t> other = {1, 77, 78, 79};
  ASSERT_TRUE((*m)->forward(other, 0).ok());  // overwrite the cache
  auto again = (*m)->forward(std::span<const int32_t>(kTokens).subspan(0, 5), 0);
  auto rest = (*m)->forward(std::span<const int32_t>(kTokens).subspan(5), 5);
  ASSERT_TRUE(again.ok() && rest.ok());
  const int64_t v = (*m)->hparams().n_vocab;
  EXPECT_LE(rel_l2(rest->data() + (rest->size() / size_t(v) - 1) * v,
                   first->data() + (kTokens.size() - 1) * v, v),
            1e-5);
}

TEST(ReferenceModelBundled, ErrorsNameTheProblem) {
  auto m = ReferenceModel::open(kBundled.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto past = (*m)->forward(kTokens, 3);  // nothing cached yet
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().message.find("past the 0 cached tokens"), std::string::npos)
      << past.error().message;
  const std::vector<int32_t> bad = {1, 4096};
  auto oov = (*m)->forward(bad, 0);
  ASSERT_FALSE(oov.ok());
  EXPECT_NE(oov.error().message.find("token 4096"), std::string::npos) << oov.error().message;

  auto missing = ReferenceModel::open((fs::path(KT_TEST_DATA_DIR) / "quant-vectors.gguf").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("quant-vectors.gguf"), std::string::npos)
      << missing.error().message;
}

// The bundled model rewritten without one metadata key or tensor.
kt::Result<std::unique_ptr<ReferenceModel>> load_without(const std::string& dropped) {
  auto src = kt::GgufFile::open(kBundled.string());
  if (!src.ok()) return src.error();
  kt::GgufWriter w;
  for (const auto& kv : src->metadata())
    if (kv.key != dropped && kv.key != "general.alignment")
      w.add(kv.key, kt::GgufOwnedValue::from(kv.value));
  for (const auto& t : src->tensors()) {
    if (t.name == dropped) continue;
    std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
    w.add_tensor(t.name, t.type, shape, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  auto file = kt::GgufFile::from_bytes("dropped.gguf", w.to_bytes());
  if (!file.ok()) return file.error();
  return ReferenceModel::load(std::move(*file));
}

TEST(ReferenceModelBundled, MissingKeysAndTensorsAreNamed) {
  auto whole = load_without("");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  for (const std::string name : {"deepseek2.attention.kv_lora_rank", "blk.2.ffn_up_exps.weight",
                                 "blk.0.attn_q_a_norm.weight", "output_norm.weight"}) {
    auto m = load_without(name);
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_NE(m.error().message.find("'" + name + "'"), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("dropped.gguf"), std::string::npos) << m.error().message;
  }
}

}  // namespace
