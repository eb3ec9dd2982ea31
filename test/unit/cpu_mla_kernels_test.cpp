// The CPU MLA kernels (cpu.mla_attention_absorbed, cpu.mla_attention's
// decompressed prefill) bound as the executor binds them, against the
// reference kernels over several sequences in one step.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/cpu/matmul_q.h"
#include "test/unit/cpu_kernel_call.h"

namespace kt::kern {
namespace {

using namespace cpu_test;

// ---- MLA, absorbed ---------------------------------------------------------------

struct MlaDims {
  int64_t H, dn, dr, dv, r;
};

// A bound MLA call (kq_scale 0.125) over n query rows q and the cache kv.
std::unique_ptr<Call> mla_call(const char* kernel, Impl impl, Rounding rounding, const std::vector<WeightView>& w,
                               const KvView* kv, const MlaDims& d, const std::vector<float>& q, int64_t n) {
  auto c = std::make_unique<Call>(kernel, impl, rounding);
  c->spec.weights = w;
  c->spec.kv = kv;
  auto ip = [](const char* key, int64_t v) {
    Param p;
    p.key = key;
    p.i = v;
    return p;
  };
  Param scale;
  scale.key = "kq_scale";
  scale.f = 0.125;
  c->spec.params = {ip("n_heads", d.H), ip("d_nope", d.dn), ip("d_rope", d.dr), ip("d_v", d.dv),
                    ip("kv_lora_rank", d.r), scale};
  c->add_in(GgmlType::F32, d.H * (d.dn + d.dr), n, q);
  c->add_out(GgmlType::F32, d.H * d.dv, n);
  EXPECT_TRUE(c->bind()) << c->error;
  return c;
}

// A latent cache of two slots of n_ctx rows, random latents (r values) and
// rope keys (dr values) of `type`.
struct LatentCache {
  std::vector<uint8_t> k, v;
  KvView view;
  LatentCache(GgmlType type, int64_t n_ctx, int64_t r, int64_t dr) {
    const size_t es = type_traits(type).type_size;
    k.resize(size_t(2 * n_ctx * r) * es);
    v.resize(size_t(2 * n_ctx * dr) * es);
    SplitMix64 rng(13);
    fill_random_blocks(type, k.data(), k.size(), rng, 0.0f, 1.0f);
    fill_random_blocks(type, v.data(), v.size(), rng, 0.0f, 1.0f);
    view = KvView{KvView::Kind::MlaLatent, type, 2, n_ctx, 1, r, dr, k.data(), v.data()};
  }
  LatentCache(const LatentCache&) = delete;  // the view points into k and v
};

// The weights as files store them: kv_b, or k_b + v_b (newer conversions),
// legacy and k-quant types; the fast path decodes their rows on the fly.
// Slot 1 takes a 20-token chunk of a prompt (two blocks of the fast path's 16
// tokens a decoded weight row), slot 0 decodes one token.
TEST(FastMla, AbsorbedMatchesReferenceOverSeveralSequences) {
  struct Case {
    int64_t r;
    bool split;
    GgmlType a, b;  // kv_b (a), or k_b (a) + v_b (b)
  };
  const int64_t H = 4, dn = 64, dr = 32, dv = 64, n_ctx = 48;
  // Q5_K has no vector decoder (decoded to floats at bind), F32 is read as is.
  for (const Case k : {Case{64, false, GgmlType::Q8_0, GgmlType::F32}, Case{256, false, GgmlType::Q4_K, GgmlType::F32},
                       Case{256, false, GgmlType::IQ4_XS, GgmlType::F32}, Case{256, false, GgmlType::Q5_K, GgmlType::F32},
                       Case{64, false, GgmlType::F32, GgmlType::F32}, Case{256, true, GgmlType::Q5_0, GgmlType::Q6_K},
                       Case{256, true, GgmlType::Q8_0, GgmlType::IQ4_XS}, Case{256, true, GgmlType::F32, GgmlType::Q5_K}}) {
    const int64_t r = k.r;
    const bool split = k.split;
    std::vector<Tensor> w;
    if (split) {
      w.push_back(random_weight(k.a, {dn, r, H}, 9, "k_b"));
      w.push_back(random_weight(k.b, {r, dv, H}, 10, "v_b"));
    } else {
      w.push_back(random_weight(k.a, {r, H * (dn + dv)}, 9, "kv_b"));
    }
    const std::string what = split ? std::string(type_name(k.a)) + "+" + std::string(type_name(k.b))
                                   : std::string(type_name(k.a));
    for (GgmlType cache_type : {GgmlType::F32, GgmlType::F16}) {
      const LatentCache cache(cache_type, n_ctx, r, dr);
      const KvView& kv = cache.view;
      StepData sd;
      for (int32_t p = 7; p < 27; ++p) {
        sd.pos.push_back(p);
        sd.slot.push_back(1);
      }
      sd.pos.push_back(40);
      sd.slot.push_back(0);
      const int64_t n = int64_t(sd.pos.size());
      sd.tokens.assign(size_t(n), 1);
      for (int32_t t = 0; t < n; ++t) sd.outputs.push_back(t);
      const std::vector<float> q = random_floats(size_t(n * H * (dn + dr)), 17);
      std::vector<WeightView> views;
      for (const Tensor& t : w) views.push_back(t.view);
      auto make = [&](Impl impl) {
        return mla_call("cpu.mla_attention_absorbed", impl, Rounding::Exact, views, &kv, {H, dn, dr, dv, r}, q, n);
      };
      auto fast = make(Impl::Fast), ref = make(Impl::Reference);
      ASSERT_NE(fast->kernel->impl(), "reference");
      fast->run(sd.step(), n);
      ref->run(sd.step(), n);
      for (int64_t t = 0; t < n; ++t)
        EXPECT_LE(rel_l2(fast->out[0].data() + t * H * dv, ref->out[0].data() + t * H * dv, size_t(H * dv)), 1e-5)
            << what << " cache " << type_name(cache_type) << " token " << t;
      // One token decoding alone: its 41 positions split into chunks of whole
      // blocks over the threads, merged afterwards.
      StepData one;
      one.pos = {40};
      one.slot = {0};
      one.tokens = {1};
      one.outputs = {0};
      fast->run(one.step(), 1);
      ref->run(one.step(), 1);
      EXPECT_LE(rel_l2(fast->out[0].data(), ref->out[0].data(), size_t(H * dv)), 1e-5)
          << what << " cache " << type_name(cache_type) << " decoding alone";
    }
  }
}

// Decoding steps (up to 4 tokens: each head's rows split into items) with 20
// heads: a full group of 16 in the lanes of a vector and a group of 4, whose
// idle lanes must not leak into the output. Tokens of two sequences at 100+
// positions: several blocks a chunk, chunks merged. Then a 6-token step (the
// prompt's items) over the same heads. The bound is tighter than float noise
// needs (the kernel's worst is ~5e-7): scores summed down one lane without
// partial sums came to ~2e-6 and tipped the tiny models' near-tied routing
// choices in plan_e2e_test.
TEST(FastMla, AbsorbedDecodeStepsAcrossHeadGroups) {
  const int64_t H = 20, dn = 32, dr = 16, dv = 32, r = 256, n_ctx = 160;
  struct Case {
    bool split;
    GgmlType a, b;
  };
  for (const Case k : {Case{true, GgmlType::Q5_0, GgmlType::Q4_K}, Case{false, GgmlType::Q8_0, GgmlType::F32},
                       Case{true, GgmlType::F32, GgmlType::IQ4_XS}}) {
    std::vector<Tensor> w;
    if (k.split) {
      w.push_back(random_weight(k.a, {dn, r, H}, 21, "k_b"));
      w.push_back(random_weight(k.b, {r, dv, H}, 22, "v_b"));
    } else {
      w.push_back(random_weight(k.a, {r, H * (dn + dv)}, 21, "kv_b"));
    }
    std::vector<WeightView> views;
    for (const Tensor& t : w) views.push_back(t.view);
    const LatentCache cache(GgmlType::F16, n_ctx, r, dr);
    for (const std::vector<std::pair<int32_t, int32_t>>& toks :  // (slot, position) per token
         {std::vector<std::pair<int32_t, int32_t>>{{0, 130}},
          {{1, 100}, {1, 101}, {0, 150}},
          {{1, 3}, {0, 120}, {0, 121}, {0, 122}, {1, 4}, {1, 5}}}) {
      StepData sd;
      for (auto [slot, pos] : toks) {
        sd.slot.push_back(slot);
        sd.pos.push_back(pos);
      }
      const int64_t n = int64_t(toks.size());
      sd.tokens.assign(size_t(n), 1);
      for (int32_t t = 0; t < n; ++t) sd.outputs.push_back(t);
      const std::vector<float> q = random_floats(size_t(n * H * (dn + dr)), 23 + n);
      auto make = [&](Impl impl) {
        return mla_call("cpu.mla_attention_absorbed", impl, Rounding::Exact, views, &cache.view, {H, dn, dr, dv, r}, q, n);
      };
      auto fast = make(Impl::Fast), ref = make(Impl::Reference);
      fast->run(sd.step(), n);
      ref->run(sd.step(), n);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < H; ++h)  // per head: a wrong lane or group shows in its own row
          EXPECT_LE(rel_l2(fast->out[0].data() + (t * H + h) * dv, ref->out[0].data() + (t * H + h) * dv, size_t(dv)),
                    2e-6)
              << type_name(k.a) << (k.split ? "+" + std::string(type_name(k.b)) : "") << " step of " << n
              << " token " << t << " head " << h;
    }
  }
}

// ---- MLA, decompressed (prefill) ---------------------------------------------------

// cpu.mla_attention's fast path where the file has kv_b: K and V decompressed
// by matmul_q, then attention as llama.cpp's CPU graph rounds it (q, K, V and
// the probabilities in F16), against the reference over two sequences of 70
// and 33 tokens (a whole and a partial block of 64 queries, runs not starting
// at 0), both cache types and a k-quant and a 32-value kv_b. The bound: K and V come from
// matmul_q's float sums (the reference sums in double), so a value may round
// to the other F16 neighbour (2^-11 of it), as may a probability; such flips
// move a token's output by ~1e-4 of its norm, where a wrong block of scores or
// a missed causal mask moves it by far more than 1e-2.
TEST(FastMla, DecompressedMatchesReference) {
  const int64_t H = 4, dn = 64, dr = 32, dv = 64, n_ctx = 96;
  for (const auto& [type, r] : {std::pair<GgmlType, int64_t>{GgmlType::Q4_K, 256}, {GgmlType::Q8_0, 64}}) {
    const Tensor kv_b = random_weight(type, {r, H * (dn + dv)}, 9, "kv_b");
    for (GgmlType cache_type : {GgmlType::F32, GgmlType::F16}) {
      const LatentCache cache(cache_type, n_ctx, r, dr);
      const KvView& kv = cache.view;
      StepData sd;
      for (int32_t p = 7; p < 77; ++p) sd.pos.push_back(p), sd.slot.push_back(1);
      for (int32_t p = 20; p < 53; ++p) sd.pos.push_back(p), sd.slot.push_back(0);
      const int64_t n = int64_t(sd.pos.size());
      sd.tokens.assign(size_t(n), 1);
      for (int32_t t = 0; t < n; ++t) sd.outputs.push_back(t);
      const std::vector<float> q = random_floats(size_t(n * H * (dn + dr)), 17, 2.0f);
      auto make = [&](Impl impl) {
        return mla_call("cpu.mla_attention", impl, Rounding::GgmlCpu, {kv_b.view}, &kv, {H, dn, dr, dv, r}, q, n);
      };
      auto fast = make(Impl::Fast), ref = make(Impl::Reference);
      if (!cpu::matmul_q_supported(type)) GTEST_SKIP();
      ASSERT_NE(fast->kernel->impl().find("decompressed"), std::string_view::npos) << fast->kernel->impl();
      fast->run(sd.step(), n);
      ref->run(sd.step(), n);
      double worst = 0;
      for (int64_t t = 0; t < n; ++t) {
        const double e = rel_l2(fast->out[0].data() + t * H * dv, ref->out[0].data() + t * H * dv, size_t(H * dv));
        EXPECT_LE(e, 1e-3) << type_name(type) << " cache " << type_name(cache_type) << " token " << t;
        worst = std::max(worst, e);
      }
      std::printf("  decompressed MLA, kv_b %s, cache %s: worst rel_l2 %.2e\n", std::string(type_name(type)).c_str(),
                  std::string(type_name(cache_type)).c_str(), worst);
    }
  }
}

}  // namespace
}  // namespace kt::kern
