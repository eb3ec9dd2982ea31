// The arithmetic behind kt-place and the rule pass, without MLIR: sizes as
// --gpu-mem takes them, devices as rule files write them, roofline numbers
// (checked against hand-computed values), the KV cache, and the alias table's
// isinstance.
#include <gtest/gtest.h>

#include "passes/rules/alias_table.h"
#include "passes/rules/placement_math.h"

namespace kt::rules {
namespace {

TEST(ParseSize, SuffixesAreBinaryOrDecimalAsWritten) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"24GiB", 24ull << 30},
      {"24 GiB", 24ull << 30},
      {"512MiB", 512ull << 20},
      {"1.5KiB", 1536},
      {"2TiB", 2ull << 40},
      {"24GB", 24000000000ull},
      {"512MB", 512000000ull},
      {"3KB", 3000},
  };
  for (const Case& c : cases) {
    auto r = parse_size(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(r.value(), c.bytes) << c.text;
  }
}

TEST(ParseSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "24XB", "24gib", "-1GiB", "1e30GiB", "24 GiB x", "0x10", "nan"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("bad size"), std::string::npos) << r.error().message;
  }
}

TEST(FormatBytes, PicksTheLargestUnitBelowTheValue) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1294336), "1.2 MiB");
  EXPECT_EQ(format_bytes(24ull << 30), "24.0 GiB");
}

TEST(ParseDevice, CpuCudaAndIndexedCuda) {
  auto cpu = parse_device("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_FALSE(cpu->gpu);
  EXPECT_EQ(cpu->str(), "cpu");
  auto cuda = parse_device("cuda");
  ASSERT_TRUE(cuda);
  EXPECT_TRUE(cuda->gpu);
  EXPECT_FALSE(cuda->index_given);
  EXPECT_EQ(cuda->str(), "cuda:0");
  auto one = parse_device("cuda:1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->index, 1);
  EXPECT_TRUE(one->index_given);
  for (const char* bad : {"", "CPU", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "xpu:0", "cuda:99999"})
    EXPECT_FALSE(parse_device(bad)) << bad;
}

TEST(OpCost, DenseIsTwoFlopsPerElementTimesThePrefillLength) {
  // A Q4_K linear [256, 192]: 192 rows of one 144-byte block.
  OpCost c = op_cost({CostKind::Dense, 256 * 192, 192 * 144, 512});
  EXPECT_EQ(c.weight_bytes, 27648u);
  EXPECT_EQ(c.flops_per_token, 98304u);
  EXPECT_NEAR(c.intensity_decode, 98304.0 / 27648, 1e-12);
  EXPECT_NEAR(c.intensity_prefill, 512 * 98304.0 / 27648, 1e-9);
}

TEST(OpCost, RoutedExpertsSeeTopKOverNOfTheTokens) {
  // F32 experts 3 x [64, 64, 8], 2 of 8 per token.
  const uint64_t elements = 3 * 64 * 64 * 8;
  OpCost c = op_cost({CostKind::RoutedExperts, elements, elements * 4, 512, 2, 8});
  EXPECT_EQ(c.flops_per_token, 2 * elements * 2 / 8);
  EXPECT_DOUBLE_EQ(c.intensity_decode, 0.5);          // only the chosen experts move
  EXPECT_DOUBLE_EQ(c.intensity_prefill, 512 * 0.5 * 2 / 8);  // 64: a quarter of a dense op's
  const OpCost dense = op_cost({CostKind::Dense, elements, elements * 4, 512});
  EXPECT_LT(c.intensity_prefill, dense.intensity_prefill);
  // A prompt too short to touch every expert moves only the touched ones.
  OpCost short_prompt = op_cost({CostKind::RoutedExperts, elements, elements * 4, 1, 2, 8});
  EXPECT_DOUBLE_EQ(short_prompt.intensity_prefill, short_prompt.intensity_decode);
}

TEST(OpCost, NormsAndLookups) {
  OpCost norm = op_cost({CostKind::Norm, 64, 256, 512});
  EXPECT_EQ(norm.flops_per_token, 256u);
  EXPECT_DOUBLE_EQ(norm.intensity_decode, 1.0);
  OpCost lookup = op_cost({CostKind::Lookup, 64 * 4096, 64 * 4096 * 4, 512});
  EXPECT_EQ(lookup.flops_per_token, 0u);
  EXPECT_EQ(lookup.intensity_prefill, 0.0);
  EXPECT_EQ(lookup.weight_bytes, uint64_t(64 * 4096 * 4));
}

TEST(KvCache, MlaKeepsTheLatentGqaKeepsKAndV) {
  ModelDims mla;
  mla.layers = 61, mla.kv_lora_rank = 512, mla.qk_rope_head_dim = 64;
  // DeepSeek-V3: (512 + 64) x 2 bytes x 61 layers = 70272 bytes per token.
  EXPECT_EQ(kv_cache_bytes(mla, 1), 70272u);
  EXPECT_EQ(kv_cache_bytes(mla, 4096), 70272u * 4096);
  ModelDims gqa;
  gqa.layers = 3, gqa.kv_heads = 2, gqa.head_dim = 16;
  EXPECT_EQ(kv_cache_bytes(gqa, 100), 2u * 2 * 16 * 2 * 3 * 100);
}

TEST(Activations, GrowWithThePromptAndTheScores) {
  ModelDims d;
  d.hidden = 64, d.heads = 4, d.vocab = 4096, d.intermediate = 128, d.moe_intermediate = 64, d.top_k = 2;
  // 4 bytes x (512 x (4*64 + 3*128) + 512*512*4 + 4096), by hand.
  EXPECT_EQ(activation_bytes(d, 512), 4u * (512 * 640 + 512 * 512 * 4 + 4096));
  EXPECT_LT(activation_bytes(d, 128), activation_bytes(d, 512));
}

TEST(AliasTable, IsInstanceFollowsTheBases) {
  const AliasTable& t = AliasTable::builtin();
  const std::string v3 = "ktransformers.models.modeling_deepseek_v3.";
  EXPECT_TRUE(t.is_instance(v3 + "DeepseekV3YarnRotaryEmbedding", v3 + "DeepseekV3RotaryEmbedding"));
  EXPECT_TRUE(t.is_instance(v3 + "DeepseekV3YarnRotaryEmbedding", v3 + "DeepseekV3YarnRotaryEmbedding"));
  // Not the other way round, and not across families.
  EXPECT_FALSE(t.is_instance(v3 + "DeepseekV3RotaryEmbedding", v3 + "DeepseekV3YarnRotaryEmbedding"));
  EXPECT_FALSE(t.is_instance(v3 + "DeepseekV3YarnRotaryEmbedding",
                             "ktransformers.models.modeling_deepseek.DeepseekV2RotaryEmbedding"));
  EXPECT_TRUE(t.is_instance("torch.nn.Linear", "torch.nn.Module"));
  EXPECT_TRUE(t.is_instance(v3 + "DeepseekV3ForCausalLM", "torch.nn.Module"));
  EXPECT_FALSE(t.is_instance("torch.nn.Linear", "torch.nn.Embedding"));
  EXPECT_NE(t.model_class("torch.nn.Module"), nullptr);
}

TEST(AliasTable, BasesMustBeClassesRulesCanName) {
  const char* text =
      "model_classes: {a.A: linear}\n"
      "bases: {a.B: [a.Missing]}\n"
      "classes: {default: {kt: default}}\n"
      "ops: {None: {kt: same_as_generate}}\n";
  auto t = AliasTable::parse(text, "t.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("'a.Missing' is not in model_classes"), std::string::npos) << t.error().message;
  // A cycle in a (broken) table still ends.
  auto cyclic = AliasTable::parse(
      "model_classes: {a.A: linear, a.B: linear}\nbases: {a.A: [a.B], a.B: [a.A]}\n"
      "classes: {default: {kt: default}}\nops: {None: {kt: same_as_generate}}\n",
      "c.yaml");
  ASSERT_TRUE(cyclic.ok()) << cyclic.error().message;
  EXPECT_TRUE(cyclic->is_instance("a.A", "a.B"));
  EXPECT_FALSE(cyclic->is_instance("a.A", "a.C"));
}

}  // namespace
}  // namespace kt::rules
