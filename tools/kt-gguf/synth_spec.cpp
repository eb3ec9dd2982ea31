#include "tools/kt-gguf/synth_spec.h"

namespace kt::synth {

const std::vector<ModelShape>& known_shapes() {
  static const std::vector<ModelShape> shapes = [] {
    std::vector<ModelShape> v;
    ModelShape lite;
    lite.name = "deepseek-v2-lite"; lite.arch = "deepseek2"; lite.tokenizer = "gpt2"; lite.pre = "deepseek-llm";
    lite.vocab = 102400; lite.hidden = 2048; lite.layers = 27; lite.heads = 16; lite.kv_heads = 16;
    lite.ffn = 10944; lite.leading_dense = 1; lite.experts = 64; lite.experts_used = 6; lite.expert_ffn = 1408;
    lite.shared_experts = 2; lite.kv_lora = 512; lite.qk_nope = 128; lite.qk_rope = 64; lite.v_head = 128;
    lite.gating = 1; lite.ctx = 163840;
    v.push_back(lite);

    ModelShape v3;
    v3.name = "deepseek-v3"; v3.arch = "deepseek2"; v3.tokenizer = "gpt2"; v3.pre = "deepseek-v3";
    v3.vocab = 129280; v3.hidden = 7168; v3.layers = 61; v3.heads = 128; v3.kv_heads = 128;
    v3.ffn = 18432; v3.leading_dense = 3; v3.experts = 256; v3.experts_used = 8; v3.expert_ffn = 2048;
    v3.shared_experts = 1; v3.q_lora = 1536; v3.kv_lora = 512; v3.qk_nope = 128; v3.qk_rope = 64; v3.v_head = 128;
    v3.gating = 2; v3.expert_groups = 8; v3.expert_groups_used = 4; v3.expert_scale = 2.5f; v3.expert_norm = true;
    v3.ctx = 163840;
    v.push_back(v3);

    ModelShape qwen;
    qwen.name = "qwen2-57b-a14b"; qwen.arch = "qwen2moe"; qwen.tokenizer = "gpt2"; qwen.pre = "qwen2";
    qwen.vocab = 151936; qwen.hidden = 3584; qwen.layers = 28; qwen.heads = 28; qwen.kv_heads = 4; qwen.head_dim = 128;
    qwen.ffn = 18944; qwen.experts = 64; qwen.experts_used = 8; qwen.expert_ffn = 2560; qwen.shared_ffn = 20480;
    qwen.rope_base = 1000000.0f; qwen.ctx = 32768;
    v.push_back(qwen);

    ModelShape mix;
    mix.name = "mixtral-8x7b"; mix.arch = "llama"; mix.tokenizer = "llama";
    mix.vocab = 32000; mix.hidden = 4096; mix.layers = 32; mix.heads = 32; mix.kv_heads = 8; mix.head_dim = 128;
    mix.ffn = 14336; mix.experts = 8; mix.experts_used = 2; mix.expert_ffn = 14336;
    mix.rope_base = 1000000.0f; mix.ctx = 32768;
    v.push_back(mix);
    return v;
  }();
  return shapes;
}

const ModelShape* find_shape(const std::string& name) {
  for (const auto& s : known_shapes())
    if (s.name == name) return &s;
  return nullptr;
}

uint64_t TensorSpec::bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return type_traits(type).row_bytes(n);
}

namespace {

// The type a recipe gives a weight whose rows have n_in values. Rows that are
// not a multiple of 256 cannot hold K-quants and fall back as llama.cpp does.
struct Recipe {
  GgmlType base, more_bits, output, fallback_base, fallback_more;
};

Result<Recipe> recipe_for(const std::string& name) {
  if (name == "Q4_K_M") return Recipe{GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q5_0, GgmlType::Q8_0};
  if (name == "Q8_0") return Recipe{GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0};
  if (name == "IQ4_XS") return Recipe{GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_NL};
  if (name == "BF16") return Recipe{GgmlType::BF16, GgmlType::BF16, GgmlType::BF16, GgmlType::BF16, GgmlType::BF16};
  return err("unknown quantization recipe '", name, "' (known: Q4_K_M, Q8_0, IQ4_XS, BF16)");
}

GgmlType pick(GgmlType want, GgmlType fallback, int64_t n_in) {
  return n_in % type_traits(want).block_size == 0 ? want : fallback;
}

// llama.cpp's Q4_K_M "more bits" layers for ffn_down: the first and last eighth,
// and every third layer between.
bool more_bits_layer(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

Result<std::vector<TensorSpec>> tensor_table(const ModelShape& m, const std::string& recipe_name) {
  auto rr = recipe_for(recipe_name);
  if (!rr) return rr.error();
  const Recipe r = rr.value();
  std::vector<TensorSpec> t;
  auto weight = [&](std::string name, std::vector<int64_t> shape, bool more_bits = false) {
    const int64_t n_in = shape[0];
    const GgmlType ty = more_bits ? pick(r.more_bits, r.fallback_more, n_in) : pick(r.base, r.fallback_base, n_in);
    t.push_back({std::move(name), ty, std::move(shape)});
  };
  auto f32 = [&](std::string name, std::vector<int64_t> shape, float center, float spread) {
    t.push_back({std::move(name), GgmlType::F32, std::move(shape), center, spread});
  };
  const int64_t H = m.hidden;
  weight("token_embd.weight", {H, m.vocab});
  f32("output_norm.weight", {H}, 1.0f, 0.1f);
  t.push_back({"output.weight", pick(r.output, r.fallback_more, H), {H, m.vocab}});

  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool mb = more_bits_layer(i, m.layers);
    f32(p + "attn_norm.weight", {H}, 1.0f, 0.1f);
    f32(p + "ffn_norm.weight", {H}, 1.0f, 0.1f);
    if (m.arch == "deepseek2") {
      const int64_t qk = m.qk_nope + m.qk_rope;
      if (m.q_lora) {
        weight(p + "attn_q_a.weight", {H, m.q_lora});
        f32(p + "attn_q_a_norm.weight", {m.q_lora}, 1.0f, 0.1f);
        weight(p + "attn_q_b.weight", {m.q_lora, m.heads * qk});
      } else {
        weight(p + "attn_q.weight", {H, m.heads * qk});
      }
      weight(p + "attn_kv_a_mqa.weight", {H, m.kv_lora + m.qk_rope});
      f32(p + "attn_kv_a_norm.weight", {m.kv_lora}, 1.0f, 0.1f);
      weight(p + "attn_kv_b.weight", {m.kv_lora, m.heads * (m.qk_nope + m.v_head)});
      if (m.mla_split) {
        weight(p + "attn_k_b.weight", {m.qk_nope, m.kv_lora, m.heads});
        weight(p + "attn_v_b.weight", {m.kv_lora, m.v_head, m.heads});
      }
      weight(p + "attn_output.weight", {m.heads * m.v_head, H});
    } else {
      const int64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
      weight(p + "attn_q.weight", {H, q});
      weight(p + "attn_k.weight", {H, kv});
      weight(p + "attn_v.weight", {H, kv});
      weight(p + "attn_output.weight", {q, H});
      if (m.arch == "qwen2moe") {
        f32(p + "attn_q.bias", {q}, 0.0f, 0.05f);
        f32(p + "attn_k.bias", {kv}, 0.0f, 0.05f);
        f32(p + "attn_v.bias", {kv}, 0.0f, 0.05f);
      }
    }
    const bool dense = m.experts == 0 || i < m.leading_dense;
    if (dense) {
      weight(p + "ffn_gate.weight", {H, m.ffn});
      weight(p + "ffn_up.weight", {H, m.ffn});
      weight(p + "ffn_down.weight", {m.ffn, H}, mb);
      continue;
    }
    const int64_t E = m.experts, F = m.expert_ffn;
    f32(p + "ffn_gate_inp.weight", {H, E}, 0.0f, 0.05f);
    if (m.gating == 2) f32(p + "exp_probs_b.bias", {E}, 0.0f, 0.01f);
    weight(p + "ffn_gate_exps.weight", {H, F, E});
    weight(p + "ffn_up_exps.weight", {H, F, E});
    weight(p + "ffn_down_exps.weight", {F, H, E}, mb);
    const int64_t S = m.shared_experts ? m.shared_experts * F : m.shared_ffn;
    if (S) {
      if (m.arch == "qwen2moe") f32(p + "ffn_gate_inp_shexp.weight", {H}, 0.0f, 0.05f);
      weight(p + "ffn_gate_shexp.weight", {H, S});
      weight(p + "ffn_up_shexp.weight", {H, S});
      weight(p + "ffn_down_shexp.weight", {S, H}, mb);
    }
  }
  return t;
}

Status add_metadata(GgufWriter& w, const ModelShape& m, const std::string& recipe, const GgufFile* vocab) {
  using V = GgufOwnedValue;
  const std::string a = m.arch + ".";
  w.add("general.architecture", V::str(m.arch));
  w.add("general.name", V::str("synthetic " + m.name + " " + recipe + " (random weights)"));
  w.add(a + "context_length", V::u32(uint32_t(m.ctx)));
  w.add(a + "embedding_length", V::u32(uint32_t(m.hidden)));
  w.add(a + "block_count", V::u32(uint32_t(m.layers)));
  w.add(a + "feed_forward_length", V::u32(uint32_t(m.ffn)));
  w.add(a + "attention.head_count", V::u32(uint32_t(m.heads)));
  w.add(a + "attention.head_count_kv", V::u32(uint32_t(m.kv_heads)));
  w.add(a + "attention.layer_norm_rms_epsilon", V::f32(m.arch == "deepseek2" ? 1e-6f : 1e-5f));
  w.add(a + "rope.freq_base", V::f32(m.rope_base));
  w.add(a + "vocab_size", V::u32(uint32_t(m.vocab)));
  if (m.experts) {
    w.add(a + "expert_count", V::u32(uint32_t(m.experts)));
    w.add(a + "expert_used_count", V::u32(uint32_t(m.experts_used)));
    w.add(a + "expert_feed_forward_length", V::u32(uint32_t(m.expert_ffn)));
  }
  if (m.arch == "deepseek2") {
    w.add(a + "attention.key_length", V::u32(uint32_t(m.qk_nope + m.qk_rope)));
    w.add(a + "attention.value_length", V::u32(uint32_t(m.v_head)));
    w.add(a + "rope.dimension_count", V::u32(uint32_t(m.qk_rope)));
    w.add(a + "rope.scaling.type", V::str("yarn"));
    w.add(a + "rope.scaling.factor", V::f32(40.0f));
    w.add(a + "rope.scaling.original_context_length", V::u32(4096));
    w.add(a + "rope.scaling.yarn_log_multiplier", V::f32(0.1f));
    w.add(a + "leading_dense_block_count", V::u32(uint32_t(m.leading_dense)));
    if (m.q_lora) w.add(a + "attention.q_lora_rank", V::u32(uint32_t(m.q_lora)));
    w.add(a + "attention.kv_lora_rank", V::u32(uint32_t(m.kv_lora)));
    w.add(a + "expert_shared_count", V::u32(uint32_t(m.shared_experts)));
    w.add(a + "expert_weights_scale", V::f32(m.expert_scale));
    w.add(a + "expert_weights_norm", V::boolean(m.expert_norm));
    w.add(a + "expert_gating_func", V::u32(uint32_t(m.gating)));
    if (m.expert_groups) {
      w.add(a + "expert_group_count", V::u32(uint32_t(m.expert_groups)));
      w.add(a + "expert_group_used_count", V::u32(uint32_t(m.expert_groups_used)));
    }
  } else {
    w.add(a + "rope.dimension_count", V::u32(uint32_t(m.head_dim)));
    if (m.shared_ffn) w.add(a + "expert_shared_feed_forward_length", V::u32(uint32_t(m.shared_ffn)));
  }

  // Tokenizer: copied from a real vocabulary when given (padded or cut to the
  // model's size), else synthetic pieces. Speed does not depend on it.
  std::vector<V> tokens, types;
  tokens.reserve(size_t(m.vocab));
  const GgufValue* src = vocab ? vocab->find("tokenizer.ggml.tokens") : nullptr;
  for (int64_t i = 0; i < m.vocab; ++i) {
    std::string piece;
    int type = 1;
    if (src && uint64_t(i) < src->size()) {
      piece = std::string(src->at(uint64_t(i)).str());
      int64_t ty = 1;
      if (const GgufValue* st = vocab->find("tokenizer.ggml.token_type"); st && uint64_t(i) < st->size() && st->at(uint64_t(i)).get_i64(&ty))
        type = int(ty);
    } else if (m.tokenizer == "llama" && i < 3) {
      piece = i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>";
      type = i == 0 ? 2 : 3;
    } else if (m.tokenizer == "llama" && i < 3 + 256) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", unsigned(i - 3));
      piece = buf;
      type = 6;
    } else {
      piece = "<|synth_" + std::to_string(i) + "|>";
      type = src ? 4 : 1;
    }
    tokens.push_back(V::str(std::move(piece)));
    types.push_back(V::i32(type));
  }
  w.add("tokenizer.ggml.model", V::str(m.tokenizer));
  if (m.tokenizer == "gpt2") w.add("tokenizer.ggml.pre", V::str(m.pre));
  w.add("tokenizer.ggml.tokens", V::array(GgufType::STRING, std::move(tokens)));
  w.add("tokenizer.ggml.token_type", V::array(GgufType::INT32, std::move(types)));
  if (m.tokenizer == "llama") {
    std::vector<V> scores(size_t(m.vocab), V::f32(0.0f));
    w.add("tokenizer.ggml.scores", V::array(GgufType::FLOAT32, std::move(scores)));
  } else if (const GgufValue* merges = vocab ? vocab->find("tokenizer.ggml.merges") : nullptr) {
    w.add("tokenizer.ggml.merges", GgufOwnedValue::from(*merges));
  } else {
    w.add("tokenizer.ggml.merges", V::array(GgufType::STRING, {}));
  }
  w.add("tokenizer.ggml.bos_token_id", V::u32(m.tokenizer == "llama" ? 1 : 0));
  w.add("tokenizer.ggml.eos_token_id", V::u32(m.tokenizer == "llama" ? 2 : 1));
  w.add("general.file_type", V::u32(recipe == "Q4_K_M" ? 15 : recipe == "Q8_0" ? 7 : recipe == "IQ4_XS" ? 30 : 32));
  w.add("general.quantization_version", V::u32(2));
  return ok_status();
}

}  // namespace kt::synth
