// Synthetic models: the layout must be the real model's, checked against figures
// measured on the peer's files (../shared/PEERS.md), and every block valid.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kernels/random_blocks.h"
#include "runtime/gguf.h"
#include "tools/kt-gguf/synth_spec.h"

namespace kt::synth {
namespace {

struct Totals {
  double gib = 0;
  double routed_mb_per_token = 0;
};

Totals totals(ModelShape m, const std::string& recipe) {
  auto t = tensor_table(m, recipe);
  EXPECT_TRUE(t.ok());
  Totals r;
  for (const auto& x : t.value()) {
    r.gib += double(x.bytes()) / double(1ull << 30);
    if (x.name.find("_exps.") != std::string::npos)
      r.routed_mb_per_token += double(x.bytes()) / double(m.experts) * double(m.experts_used) / 1e6;
  }
  return r;
}

// PEERS.md: DeepSeek-V2-Lite Q4_K_M is 9.69 GiB with 893 MB of routed experts read
// per token; DeepSeek-V3 with 5 layers (vocabulary of 102400) 14.93 GiB and 427 MB.
// The files also hold ~4 MB of tokenizer, hence the margins; V3 comes out 10 MB
// (0.07%) lighter than the peer's file, for a reason not found yet.
TEST(Synth, MatchesThePeersFiles) {
  ModelShape lite = *find_shape("deepseek-v2-lite");
  lite.mla_split = true;
  const Totals a = totals(lite, "Q4_K_M");
  EXPECT_NEAR(a.gib, 9.69 - 0.004, 0.006);
  EXPECT_NEAR(a.routed_mb_per_token, 893, 1.0);

  ModelShape v3 = *find_shape("deepseek-v3");
  v3.layers = 5;
  v3.vocab = 102400;
  v3.mla_split = true;
  const Totals b = totals(v3, "Q4_K_M");
  EXPECT_NEAR(b.gib, 14.93 - 0.004, 0.015);
  EXPECT_NEAR(b.routed_mb_per_token, 427, 1.0);
}

TEST(Synth, Q4KMRecipeFallsBackOnRowsThatAreNotSuperBlocks) {
  auto t = tensor_table(*find_shape("deepseek-v2-lite"), "Q4_K_M");
  ASSERT_TRUE(t.ok());
  auto type_of = [&](const std::string& name) {
    for (const auto& x : t.value())
      if (x.name == name) return x.type;
    ADD_FAILURE() << "no " << name;
    return GgmlType::F32;
  };
  EXPECT_EQ(type_of("blk.1.ffn_down_exps.weight"), GgmlType::Q8_0);  // more bits, 1408-value rows
  EXPECT_EQ(type_of("blk.3.ffn_down_exps.weight"), GgmlType::Q5_0);
  EXPECT_EQ(type_of("blk.3.ffn_gate_exps.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("blk.3.ffn_gate_inp.weight"), GgmlType::F32);
  EXPECT_FALSE(tensor_table(*find_shape("mixtral-8x7b"), "Q3_K_XL").ok());
}

// A small shape through the same writer: every tensor present, every value finite.
TEST(Synth, WritesValidBlocks) {
  ModelShape m = *find_shape("deepseek-v3");
  m.hidden = 256; m.layers = 2; m.leading_dense = 1; m.heads = 2; m.kv_heads = 2; m.vocab = 600;
  m.ffn = 512; m.experts = 4; m.experts_used = 2; m.expert_ffn = 256; m.q_lora = 256; m.kv_lora = 256;
  m.qk_nope = 32; m.qk_rope = 32; m.v_head = 32; m.expert_groups = 2; m.expert_groups_used = 1;
  auto table = tensor_table(m, "Q4_K_M");
  ASSERT_TRUE(table.ok());
  GgufWriter w;
  ASSERT_TRUE(add_metadata(w, m, "Q4_K_M", nullptr).ok());
  uint64_t seed = 5;
  for (const auto& t : table.value()) {
    auto rng = std::make_shared<SplitMix64>(seed++);
    w.add_tensor_fill(t.name, t.type, t.shape, [rng, t](uint8_t* d, uint64_t n) {
      fill_random_blocks(t.type, d, n, *rng, t.center, t.spread);
    });
  }
  const auto path = (std::filesystem::temp_directory_path() / "kt_synth_test.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tensors().size(), table->size());
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->size(), 600u);
  uint64_t n_in_range = 0, n = 0;
  for (const auto& t : f->tensors()) {
    const TypeTraits& tt = type_traits(t.type);
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    for (int64_t r = 0; r < t.nrows(); ++r) {
      tt.dequant_row(t.row(r), row.data(), t.ne[0]);
      for (float v : row) {
        ASSERT_TRUE(std::isfinite(v)) << t.name;
        n_in_range += std::fabs(v) < 2.0f;
        ++n;
      }
    }
  }
  EXPECT_EQ(n_in_range, n) << "weights stay small, like trained ones";
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kt::synth
