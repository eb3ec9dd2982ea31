// The CUDA attention kernels against their CPU reference kernels on random
// inputs: GQA split-K over several sequences, prompts and mixed steps, and MLA
// in absorbed and decompressed form (cuda_compare.h).
#include <algorithm>
#include <cstdio>

#include "kernels/cuda/cuda_attention.cuh"
#include "test/cuda/cuda_compare.h"

namespace kt::test {
namespace {

// ---- attention ---------------------------------------------------------------------

// Steps: decode of three sequences, a prompt, a mixed step.
std::vector<StepData> attention_steps() {
  std::vector<StepData> v;
  StepData d;
  d.add_run(0, 300, 1);
  d.add_run(2, 5, 1);
  d.add_run(1, 1000, 1);
  v.push_back(d);
  StepData p;
  p.add_run(1, 0, 21);
  v.push_back(p);
  StepData m;
  m.add_run(2, 40, 6);
  m.add_run(0, 511, 1);
  v.push_back(m);
  return v;
}

TEST(CudaKernels, AttentionGqaSplitK) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(9);
  struct S {
    int h, hkv, dk, dv;
  };
  for (const S s : {S{8, 2, 64, 64}, S{4, 4, 16, 16}, S{32, 8, 128, 128}, S{6, 3, 40, 24}}) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        for (const StepData& st : attention_steps()) {
          Call c;
          c.op = "attention";
          c.rounding = r;
          c.kv = std::make_unique<Kv>(
              random_kv(kern::KvView::Kind::Kv, t, 3, 1024, s.hkv, int64_t(s.hkv) * s.dk, int64_t(s.hkv) * s.dv, 10));
          c.step = st;
          const int64_t n = int64_t(st.pos.size());
          c.in.push_back(Buf::f32(int64_t(s.h) * s.dk, n, random_floats(size_t(s.h * s.dk * n), rng)));
          c.out.push_back(Buf::f32(int64_t(s.h) * s.dv, n));
          c.param("n_heads", s.h);
          c.param("n_kv_heads", s.hkv);
          c.param("head_dim_k", s.dk);
          c.param("head_dim_v", s.dv);
          c.paramf("kq_scale", 1.0 / std::sqrt(double(s.dk)) * 3.0);
          // GgmlCpu: the reference also rounds the probabilities to F16 (ggml's
          // F16 cache product); the GPU's online softmax keeps them in float.
          compare(c, r == Rounding::GgmlCpu ? 2e-3 : 1e-5,
                  "attention h" + std::to_string(s.h) + " kv" + std::to_string(s.hkv) + " " +
                      std::string(type_name(t)) + " " + rname(r) + " " + std::to_string(n) + " tokens");
        }
      }
    }
  }
}

struct MlaShape {
  int h, dn, dr, dv, r;
};

Call mla_call(const MlaShape& m, bool absorbed, bool split, GgmlType wt, GgmlType cache, Rounding rnd,
              const StepData& st, SplitMix64& rng) {
  Call c;
  c.op = absorbed ? "mla_attention_absorbed" : "mla_attention";
  c.rounding = rnd;
  c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, cache, 3, 1024, 1, m.r, m.dr, 12));
  c.step = st;
  const int64_t n = int64_t(st.pos.size());
  c.in.push_back(Buf::f32(int64_t(m.h) * (m.dn + m.dr), n, random_floats(size_t(m.h * (m.dn + m.dr) * n), rng)));
  c.out.push_back(Buf::f32(int64_t(m.h) * m.dv, n));
  if (split) {
    // k_b [d_nope, r, H] (rows of d_nope: a 32-block type), v_b [r, d_v, H].
    c.weights.push_back(Weight::random("k_b", GgmlType::Q8_0, m.dn, m.r, m.h, 21));
    c.weights.push_back(Weight::random("v_b", wt, m.r, m.dv, m.h, 22));
  } else {
    c.weights.push_back(Weight::random("kv_b", wt, m.r, int64_t(m.h) * (m.dn + m.dv), 1, 23));
  }
  c.param("n_heads", m.h);
  c.param("d_nope", m.dn);
  c.param("d_rope", m.dr);
  c.param("d_v", m.dv);
  c.param("kv_lora_rank", m.r);
  c.paramf("kq_scale", 0.7 / std::sqrt(double(m.dn + m.dr)));
  return c;
}

TEST(CudaKernels, MlaAbsorbedAndDecompressed) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(13);
  const MlaShape tiny{4, 32, 16, 32, 64}, v2{16, 128, 64, 128, 512}, v3{128, 128, 64, 128, 512};
  std::vector<StepData> steps = attention_steps();
  // One decode token (the one-token variants of q_abs and W_V): far into a
  // slot, at position 0, and within the first tile.
  for (const auto& [slot, pos] : {std::pair{1, 700}, {2, 0}, {0, 13}}) {
    StepData d;
    d.add_run(slot, pos, 1);
    steps.push_back(d);
  }
  struct Case {
    MlaShape m;
    GgmlType wt;
    bool split;
  };
  // V3's 128 heads: the one-token kernels take four rows a lane group there
  // (cuda_mla.cu group_rows; one at 16 heads), typed (Q4_K) and generic (IQ4_XS)
  // weights; one-token steps only (the reference is slow at 128 heads).
  for (const Case k : {Case{tiny, GgmlType::F32, false}, Case{tiny, GgmlType::Q8_0, false},
                       Case{v2, GgmlType::Q4_K, false}, Case{v2, GgmlType::Q6_K, true},
                       Case{v2, GgmlType::IQ4_XS, false}, Case{v3, GgmlType::Q4_K, true},
                       Case{v3, GgmlType::IQ4_XS, false}}) {
    const bool big = k.m.h == 128;
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16}) {
      if (k.m.h == 16 && cache == GgmlType::F32 && k.wt != GgmlType::Q4_K) continue;  // keep the run short
      if (big && cache == GgmlType::F32) continue;
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        if (big && r == Rounding::Exact) continue;
        for (bool absorbed : {true, false}) {
          if (big && !absorbed) continue;
          for (const StepData& st : steps) {
            if (big && st.pos.size() != 1) continue;
            if (!absorbed && k.m.h == 16 && st.pos.size() > 10) continue;  // CPU decompression is slow
            const Call c = mla_call(k.m, absorbed, k.split, k.wt, cache, r, st, rng);
            // Decompressed + GgmlCpu: the reference rounds its decompressed K, V,
            // queries and probabilities to F16; the GPU computes absorbed.
            const double tol = (!absorbed && r == Rounding::GgmlCpu) ? 5e-3 : 2e-5;
            compare(c, tol,
                    c.op + " h" + std::to_string(k.m.h) + " " + std::string(type_name(k.wt)) +
                        (k.split ? " k_b/v_b" : " kv_b") + " cache " + std::string(type_name(cache)) + " " +
                        rname(r) + " " + std::to_string(st.pos.size()) + " tokens");
          }
        }
      }
    }
  }
}

// A step of one slot has its latents rounded once for all its blocks
// (cuda::launch_round_latents: Q8_0 and Q8_K blocks); a step of several slots
// has each tile rounded where it is read. The same token (same cache, q and
// split of the keys) gets the same bits either way: latents in Q8_0 blocks
// (v_b or kv_b Q8_0) and Q8_K blocks (Q4_K), a position in the first tile and
// one far into the cache, and a prompt's chunk (5 tokens).
TEST(CudaKernels, MlaLatentsRoundedOnceMatchTheTilesOwnRounding) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(19);
  // 32 heads: 8 groups of 4 heads a block or more, so even one token's step
  // rounds once (CudaMla::lat_rounded asks for 8 blocks a tile).
  const MlaShape v2{32, 128, 64, 128, 512};
  struct Case {
    GgmlType wt;
    bool split;
  };
  int checked = 0;
  for (const Case k : {Case{GgmlType::Q4_K, true}, Case{GgmlType::Q8_0, true}, Case{GgmlType::Q8_0, false},
                       Case{GgmlType::Q4_K, false}}) {
    for (GgmlType cache : {GgmlType::F16, GgmlType::F32}) {
      for (const auto& [pos, n] : {std::pair{700, 1}, {13, 1}, {600, 5}}) {
        // Several slots: slot 1's n tokens, then one of slot 0 (tiles rounded in place).
        StepData both;
        both.add_run(1, pos, n);
        both.add_run(0, 300, 1);
        const Call many = mla_call(v2, true, k.split, k.wt, cache, Rounding::GgmlCpu, both, rng);
        // One slot: slot 1's tokens and one more of it (as many tokens: the
        // same heads a block and split of the keys), the same q rows (latents
        // rounded once).
        StepData alone;
        alone.add_run(1, pos, n + 1);
        Call one = mla_call(v2, true, k.split, k.wt, cache, Rounding::GgmlCpu, alone, rng);
        one.in[0] = many.in[0];
        const Outcome a = run_gpu(many), b = run_gpu(one);
        const std::string what = std::string(type_name(k.wt)) + (k.split ? " k_b/v_b" : " kv_b") + " cache " +
                                 std::string(type_name(cache)) + ", " + std::to_string(n) + " tokens at " +
                                 std::to_string(pos);
        ASSERT_TRUE(a.error.empty() && b.error.empty()) << what << ": " << a.error << b.error;
        std::vector<float> x = a.out[0].floats(), y = b.out[0].floats();
        x.resize(size_t(n * v2.h * v2.dv));  // slot 1's first n rows
        y.resize(x.size());
        ASSERT_TRUE(all_finite(y) && max_abs(y, std::vector<float>(y.size(), 0.0f)) > 0) << what;
        EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << what << ": max abs " << max_abs(x, y);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 24);
}

// A prompt's chunk of one slot takes the attention on tensor cores
// (cuda_mla_mma.cu): f16 products made exact by splitting the float operand
// into two halves, float32 sums. Against the CPU reference at the absorbed
// form's tolerance: Q8_K and Q8_0 latents, kv_b and k_b/v_b, F16, F32 and BF16
// caches, V2-Lite's 16 heads (blocks of two tokens' rows), V3's 128 (a token's
// heads over four blocks) and the tiny models' r = 256, d_rope = 32 (a last
// block part empty); chunks from position 0 and far into the cache; queries
// scaled by 300 and by 1/300 (the rows' power-of-two scaling into f16's range).
TEST(CudaKernels, MlaPromptChunksOnTensorCores) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(23);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // Enough tokens x head groups for one split of the keys (plan_splits: twice the SMs).
  const int32_t n16 = 2 * sms + 36;
  struct Case {
    MlaShape m;
    GgmlType wt;
    bool split;
    GgmlType cache;
    int32_t pos, n;
    float q_scale;
  };
  const MlaShape v2{16, 128, 64, 128, 512}, v3{128, 128, 64, 128, 512}, tiny{4, 64, 32, 64, 256};
  for (const Case k : {Case{v2, GgmlType::Q4_K, false, GgmlType::F16, 0, n16, 1.0f},
                       Case{v2, GgmlType::Q8_0, true, GgmlType::F32, 1023 - n16, n16, 1.0f},
                       Case{v3, GgmlType::Q4_K, true, GgmlType::BF16, 500, 40, 1.0f},
                       Case{tiny, GgmlType::Q4_K, false, GgmlType::F16, 100, n16 + 1, 300.0f},
                       Case{tiny, GgmlType::Q8_0, false, GgmlType::F32, 7, n16 + 3, 1.0f / 300}}) {
    StepData st;
    st.add_run(1, k.pos, k.n);
    Call c = mla_call(k.m, true, k.split, k.wt, k.cache, Rounding::GgmlCpu, st, rng);
    std::vector<float> q = c.in[0].floats();
    for (float& x : q) x *= k.q_scale;
    c.in[0] = Buf::f32(c.in[0].cols, c.in[0].rows, q);
    const std::string what = std::string(type_name(k.wt)) + (k.split ? " k_b/v_b" : " kv_b") + " h" +
                             std::to_string(k.m.h) + " r" + std::to_string(k.m.r) + " cache " +
                             std::string(type_name(k.cache)) + ", " + std::to_string(k.n) + " tokens at " +
                             std::to_string(k.pos) + ", q x " + std::to_string(k.q_scale);
    const uint64_t before = cuda::mla_mma_launches();
    compare(c, 2e-5, what, "mla_attention_absorbed, tensor cores");
    EXPECT_GT(cuda::mla_mma_launches(), before) << what << ": the tensor-core path did not run";
  }
}

// cuda.mla_attention_store (kt-fuse-calls' cuda.rope_mla_store and
// cuda.mla_attention_absorbed in one call) against the two calls on the GPU:
// the output and both caches bit for bit. One decoding token with k_b takes the
// one-launch preparation (rope, store and q_abs side by side, and the latents
// rounded once: Q8_K blocks for Q4_K / Q6_K v_b, Q8_0 blocks for Q8_0, where
// the two calls' single token rounds each tile in place); several tokens, and
// kv_b, take the two kernels.
TEST(CudaKernels, MlaAttentionStoreMatchesItsTwoCalls) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(17);
  const MlaShape tiny{4, 32, 16, 32, 64}, v2{16, 128, 64, 128, 512}, v3{128, 128, 64, 128, 512};
  std::vector<StepData> steps;
  for (const auto& [slot, pos] : {std::pair{1, 700}, {2, 0}, {0, 13}}) {
    StepData d;
    d.add_run(slot, pos, 1);
    steps.push_back(d);
  }
  StepData mixed;
  mixed.add_run(2, 40, 3);
  mixed.add_run(0, 511, 1);
  steps.push_back(mixed);
  struct Case {
    MlaShape m;
    GgmlType wt;
    bool split;
  };
  for (const Case k : {Case{tiny, GgmlType::F32, false}, Case{v2, GgmlType::Q4_K, true}, Case{v2, GgmlType::Q6_K, true},
                       Case{v2, GgmlType::Q8_0, true}, Case{v2, GgmlType::Q4_K, false},
                       Case{v3, GgmlType::Q4_K, true}}) {  // v3: q_abs four rows a lane group
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16}) {
      for (const StepData& st : steps) {
        const MlaShape& m = k.m;
        const int64_t n = int64_t(st.pos.size()), qcols = int64_t(m.h) * (m.dn + m.dr);
        const Buf kv_a = Buf::f32(m.r + m.dr, n, random_floats(size_t((m.r + m.dr) * n), rng, -3, 3));
        const Weight norm = Weight::f32("kv_a_norm", random_floats(size_t(m.r), rng, 0.5f, 1.5f), m.r);
        // The attention's call (its weights, params, cache, and q) on its own.
        Call attn = mla_call(m, true, k.split, k.wt, cache, Rounding::GgmlCpu, st, rng);
        auto rope = [&](Call& c) {
          rope_params(c, m.dr, 0, true, -1, m.dn + m.dr, m.dn);  // n_heads: the attention's, or added below
          c.paramf("eps", 1e-6);
        };
        Call store;
        store.op = "rope_mla_store";
        store.kv = std::make_unique<Kv>(*attn.kv);
        store.step = st;
        store.in = {attn.in[0], kv_a};
        store.out.push_back(Buf::f32(qcols, n));
        store.weights.push_back(norm);
        store.param("n_heads", m.h);
        rope(store);
        const Outcome s1 = run_gpu(store);
        ASSERT_TRUE(s1.error.empty()) << s1.error;
        Call after = mla_call(m, true, k.split, k.wt, cache, Rounding::GgmlCpu, st, rng);
        after.weights = attn.weights;
        after.params = attn.params;
        after.in = {s1.out[0]};
        after.kv->k = s1.k;
        after.kv->v = s1.v;
        const Outcome two = run_gpu(after);
        Call fused = mla_call(m, true, k.split, k.wt, cache, Rounding::GgmlCpu, st, rng);
        fused.op = "mla_attention_store";
        fused.weights = attn.weights;
        fused.weights.push_back(norm);
        fused.params = attn.params;
        rope(fused);
        fused.in = {attn.in[0], kv_a};
        fused.kv = std::make_unique<Kv>(*attn.kv);
        const Outcome one = run_gpu(fused);
        const std::string what = std::string(type_name(k.wt)) + (k.split ? " k_b/v_b" : " kv_b") + " h" +
                                 std::to_string(m.h) + " cache " + std::string(type_name(cache)) + ", " +
                                 std::to_string(n) + " tokens at " + std::to_string(st.pos[0]);
        ASSERT_TRUE(two.error.empty() && one.error.empty()) << what << ": " << two.error << one.error;
        const auto a = two.out[0].floats(), b = one.out[0].floats();
        ASSERT_TRUE(all_finite(b)) << what;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what << ": max abs " << max_abs(a, b);
        EXPECT_EQ(s1.k, one.k) << what << ": latent cache";
        EXPECT_EQ(s1.v, one.v) << what << ": rope-key cache";
      }
    }
  }
}

}  // namespace
}  // namespace kt::test
