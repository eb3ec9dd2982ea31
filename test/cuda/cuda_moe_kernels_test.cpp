// The CUDA MoE kernels against their CPU reference kernels on random inputs:
// the router (softmax and sigmoid, grouped top-k, the routing hook's host
// path) and the experts (vector, subset by slots, grouped resident and
// streamed) (cuda_compare.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_moe_grouped_gemm.cuh"
#include "test/cuda/cuda_compare.h"

namespace kt::test {
namespace {

// ---- MoE ----------------------------------------------------------------------------

// Records margins; optionally makes token `swap_token` take its runner-up.
class Hook final : public kern::RoutingHook {
 public:
  int64_t swap_token = -1;
  std::vector<float> margins;
  void on_route(kern::RouteEvent& e) override {
    margins.assign(e.margins, e.margins + e.step->n_tokens);
    if (swap_token >= 0 && swap_token < e.step->n_tokens) e.take_runner_up(swap_token, 1);
  }
};

struct GateCase {
  int64_t n_embd, n_expert, n_used;
  int gating;
  bool bias;
  int n_group, topk_group;
  bool norm;
  double scale;
  GgmlType wt;
};

Call gate_call(const GateCase& g, int64_t rows, SplitMix64& rng, uint64_t seed) {
  Call c;
  c.op = "moe_gate";
  c.in.push_back(Buf::f32(g.n_embd, rows, random_floats(size_t(g.n_embd * rows), rng)));
  c.out.push_back(Buf::i32(g.n_used, rows));
  c.out.push_back(Buf::f32(g.n_used, rows));
  c.weights.push_back(Weight::random("gate_inp", g.wt, g.n_embd, g.n_expert, 1, seed, 0.0f, 0.2f));
  if (g.bias) c.weights.push_back(Weight::f32("exp_probs_b", random_floats(size_t(g.n_expert), rng, 0, 0.1f), g.n_expert));
  c.param("n_used", g.n_used);
  c.param("gating", g.gating);
  c.param("n_group", g.n_group);
  c.param("topk_group", g.topk_group);
  c.param("norm", g.norm ? 1 : 0);
  c.paramf("scale", g.scale);
  c.step.add_run(0, 0, int32_t(rows));
  return c;
}

TEST(CudaKernels, MoeGateMatchesReferenceRouting) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(14);
  const GateCase cases[] = {
      {2048, 64, 6, 1, false, 1, 1, false, 0.0, GgmlType::F32},     // DeepSeek-V2-Lite
      {7168, 256, 8, 2, true, 8, 4, true, 2.5, GgmlType::F32},      // DeepSeek-V3
      {2048, 60, 4, 1, false, 1, 1, false, 0.0, GgmlType::F32},     // Qwen2-MoE
      {512, 8, 2, 1, false, 1, 1, true, 0.0, GgmlType::Q8_0},       // Mixtral-like, quantized router
      {256, 100, 5, 2, false, 1, 1, true, 0.0, GgmlType::F32},      // 4 experts a lane
      {256, 384, 8, 2, true, 1, 1, true, 2.827, GgmlType::F32},     // Kimi-K2-like: 16 a lane
  };
  uint64_t seed = 200;
  for (const GateCase& g : cases) {
    for (int64_t rows : {1, 7}) {
      Call c = gate_call(g, rows, rng, ++seed);
      Hook cpu_hook;
      c.hook = &cpu_hook;
      const Outcome cpu = run_cpu(c);  // with the hook: margins
      c.hook = nullptr;
      const Outcome gpu = run_gpu(c);  // the GPU's own routing
      ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
      const auto ci = cpu.out[0].ints(), gi = gpu.out[0].ints();
      const auto cw = cpu.out[1].floats(), gw = gpu.out[1].floats();
      for (int64_t t = 0; t < rows; ++t) {
        const bool tie = cpu_hook.margins[size_t(t)] < 1e-5f;
        bool same = true;
        for (int64_t k = 0; k < g.n_used; ++k) same = same && ci[size_t(t * g.n_used + k)] == gi[size_t(t * g.n_used + k)];
        if (tie) continue;  // a near tie may fall either way
        EXPECT_TRUE(same) << g.n_expert << " experts, token " << t << " (margin " << cpu_hook.margins[size_t(t)] << ")";
        std::vector<float> a(cw.begin() + t * g.n_used, cw.begin() + (t + 1) * g.n_used);
        std::vector<float> b(gw.begin() + t * g.n_used, gw.begin() + (t + 1) * g.n_used);
        const double e = rel_l2(b, a);
        note("moe_gate weights (ggml)", e);
        EXPECT_LE(e, 1e-5) << g.n_expert << " experts, token " << t;
      }
    }
  }
}

TEST(CudaKernels, MoeGateRoutingHookPath) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(15);
  const GateCase g{1024, 256, 8, 2, true, 8, 4, true, 2.5, GgmlType::F32};
  Call c = gate_call(g, 5, rng, 300);
  Hook h1, h2;
  h1.swap_token = 2;
  h2.swap_token = 2;
  c.hook = &h1;
  const Outcome cpu = run_cpu(c);
  c.hook = &h2;
  const Outcome gpu = run_gpu(c);
  ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
  EXPECT_EQ(gpu.out[0].ints(), cpu.out[0].ints());
  EXPECT_LE(rel_l2(gpu.out[1].floats(), cpu.out[1].floats()), 1e-5);
  ASSERT_EQ(h2.margins.size(), 5u);
  for (size_t t = 0; t < 5; ++t) EXPECT_NEAR(h2.margins[t], h1.margins[t], 1e-5);
}

// A hook whose forced uniform routing the GPU draws itself
// (RoutingHook::device_uniform_seed): on_route is never called, each token's
// n_used ids are distinct experts, the weights are the router's own, the
// draws follow the token's position (new ones every decode step), repeat for
// the same step, the call stays recordable, and over many tokens every expert
// is drawn about equally often.
struct DeviceUniform final : kern::RoutingHook {
  uint64_t seed = 0;
  int calls = 0;
  void on_route(kern::RouteEvent&) override { ++calls; }
  uint64_t device_uniform_seed() const override { return seed; }
};

TEST(CudaKernels, MoeGateForcedUniformDrawnOnTheGpu) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(29);
  for (const GateCase& g : {GateCase{2048, 64, 6, 1, false, 1, 1, false, 0.0, GgmlType::F32},
                            GateCase{1024, 256, 8, 2, true, 8, 4, true, 2.5, GgmlType::F32}}) {
    const int64_t rows = 1024;
    Call c = gate_call(g, rows, rng, 310);
    const Outcome own = run_gpu(c);
    DeviceUniform h;
    h.seed = 77;
    c.hook = &h;
    const Outcome a = run_gpu(c), again = run_gpu(c), recorded = run_gpu(c, nullptr, true);
    ASSERT_TRUE(own.error.empty() && a.error.empty() && again.error.empty() && recorded.error.empty())
        << own.error << a.error << again.error << recorded.error;
    EXPECT_EQ(h.calls, 0) << "the host hook was called";
    EXPECT_EQ(a.out[0].ints(), again.out[0].ints());
    EXPECT_EQ(a.out[0].ints(), recorded.out[0].ints());
    EXPECT_EQ(a.out[1].floats(), own.out[1].floats()) << "the router's weights, not the draws', are kept";
    const auto ids = a.out[0].ints(), own_ids = own.out[0].ints();
    EXPECT_NE(ids, own_ids) << "no draw happened";
    std::vector<int> count(size_t(g.n_expert), 0);
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<int32_t> mine(ids.begin() + t * g.n_used, ids.begin() + (t + 1) * g.n_used);
      for (int32_t e : mine) {
        ASSERT_TRUE(e >= 0 && e < g.n_expert) << e;
        ++count[size_t(e)];
      }
      std::sort(mine.begin(), mine.end());
      EXPECT_EQ(std::adjacent_find(mine.begin(), mine.end()), mine.end()) << "token " << t << ": an expert twice";
    }
    const double expect = double(rows * g.n_used) / double(g.n_expert);
    for (int64_t e = 0; e < g.n_expert; ++e)
      EXPECT_NEAR(count[size_t(e)], expect, 0.6 * expect + 8) << "expert " << e << " of " << g.n_expert;
    // Other positions (a later decode step), and another seed: other draws.
    Call later = gate_call(g, rows, rng, 310);
    later.in = c.in;
    later.step = StepData();
    later.step.add_run(0, 5000, int32_t(rows));
    later.hook = &h;
    const Outcome b = run_gpu(later);
    ASSERT_TRUE(b.error.empty()) << b.error;
    EXPECT_NE(b.out[0].ints(), ids);
    h.seed = 78;
    const Outcome d = run_gpu(c);
    ASSERT_TRUE(d.error.empty()) << d.error;
    EXPECT_NE(d.out[0].ints(), ids);
  }
}

TEST(CudaKernels, MoeExpertsOnTheGpu) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(16);
  // Quantized gate and up with one activation rounding take one rounding and
  // the SwiGLU in up's epilogue (Q4_K with Q5_K too); Q4_K with Q8_0 (Q8_K and
  // Q8_0 roundings) and the float types the separate products.
  struct E {
    GgmlType gate, up, down;
    int64_t n_embd, n_ff, ne, nu;
  };
  uint64_t seed = 400;
  for (const E e : {E{GgmlType::F32, GgmlType::F32, GgmlType::F32, 64, 32, 8, 2},
                    E{GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, 512, 256, 8, 3},
                    E{GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, 512, 256, 8, 3},
                    E{GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, 512, 256, 8, 3},
                    E{GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q5_0, 96, 64, 6, 2},
                    E{GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::Q5_K, 256, 512, 4, 2}}) {
    for (int64_t rows : {1, 5}) {
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        Call c;
        c.op = "moe_experts";
        c.rounding = r;
        c.in.push_back(Buf::f32(e.n_embd, rows, random_floats(size_t(e.n_embd * rows), rng)));
        std::vector<int32_t> ids;
        std::vector<float> w;
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t k = 0; k < e.nu; ++k) {
            ids.push_back(int32_t((t * 3 + k * 5 + (k == 1 ? 1 : 0)) % e.ne));
            w.push_back(0.2f + 0.5f * rng.uniform());
          }
        c.in.push_back(Buf::i32(e.nu, rows, ids));
        c.in.push_back(Buf::f32(e.nu, rows, w));
        c.out.push_back(Buf::f32(e.n_embd, rows));
        c.weights.push_back(Weight::random("gate_exps", e.gate, e.n_embd, e.n_ff, e.ne, ++seed));
        c.weights.push_back(Weight::random("up_exps", e.up, e.n_embd, e.n_ff, e.ne, ++seed));
        c.weights.push_back(Weight::random("down_exps", e.down, e.n_ff, e.n_embd, e.ne, ++seed));
        // GgmlCpu: the GPU's gate/up differ from the reference by float summation
        // order, which can move an intermediate value across an 8-bit rounding step.
        compare(c, r == Rounding::GgmlCpu ? 1e-4 : 1e-5,
                std::string("moe_experts ") + std::string(type_name(e.gate)) + "/" + std::string(type_name(e.up)) +
                    "/" + std::string(type_name(e.down)) + " x " + std::to_string(rows) + " " + rname(r));
      }
    }
  }
}

// Each of `rows` tokens' n_used choices of n_expert experts (distinct where 5
// is prime to n_expert and n_used <= n_expert), with weights in [0.2, 0.7).
struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
Routing routing(int64_t rows, int64_t n_used, int64_t n_expert, SplitMix64& rng) {
  Routing r;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t k = 0; k < n_used; ++k) {
      r.ids.push_back(int32_t((t * 3 + k * 5 + 1) % n_expert));
      r.weights.push_back(0.2f + 0.5f * rng.uniform());
    }
  return r;
}

// x's rows already rounded by the norm that wrote them (kt-fuse-calls: a
// fourth input): the same bits as the experts rounding x themselves, for the
// gate and up of one rounding (Q4_K: Q8_K blocks; Q8_0: Q8_0 blocks); a
// buffer of the other blocks goes unread.
TEST(CudaKernels, MoeExpertsTakeTheNormsRoundedRows) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(27);
  const int64_t n_embd = 512, n_ff = 256, ne = 8, nu = 3;
  uint64_t seed = 800;
  for (const auto& [type, act] : {std::pair<GgmlType, int>{GgmlType::Q4_K, 256}, {GgmlType::Q8_0, 32},
                                  {GgmlType::Q4_K, 32}}) {
    for (int64_t rows : {1, 4}) {
      const std::string what = std::string(type_name(type)) + " reading blocks of " + std::to_string(act) + " x " +
                               std::to_string(rows);
      // The norm's outputs: its rows, and them rounded.
      Call norm = add_rms_norm_call(n_embd, rows, rng, act);
      const Outcome nr = run_gpu(norm);
      ASSERT_TRUE(nr.error.empty()) << what << ": " << nr.error;
      const Routing r = routing(rows, nu, ne, rng);
      const std::vector<int32_t>& ids = r.ids;
      const std::vector<float>& w = r.weights;
      const Weight g = Weight::random("gate_exps", type, n_embd, n_ff, ne, ++seed);
      const Weight u = Weight::random("up_exps", type, n_embd, n_ff, ne, ++seed);
      const Weight d = Weight::random("down_exps", GgmlType::Q6_K, n_ff, n_embd, ne, ++seed);
      auto experts = [&](const Buf* rounded) {
        Call c;
        c.op = "moe_experts";
        c.in = {nr.out[1], Buf::i32(nu, rows, ids), Buf::f32(nu, rows, w)};
        if (rounded) c.in.push_back(*rounded);
        c.out.push_back(Buf::f32(n_embd, rows));
        c.weights = {g, u, d};
        return run_gpu(c);
      };
      const Outcome own = experts(nullptr), given = experts(&nr.out[2]);
      ASSERT_TRUE(own.error.empty() && given.error.empty()) << what << ": " << own.error << given.error;
      const auto a = own.out[0].floats(), b = given.out[0].floats();
      ASSERT_TRUE(all_finite(a)) << what;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what << ": max abs " << max_abs(a, b);
      // Another row's rounding in its place: read where its blocks are the
      // experts' (the result moves), unread where they are not.
      norm.in[1] = Buf::f32(n_embd, rows, random_floats(size_t(n_embd * rows), rng, -1, 1));
      const Outcome other = run_gpu(norm);
      ASSERT_TRUE(other.error.empty()) << other.error;
      const Outcome wrong = experts(&other.out[2]);
      ASSERT_TRUE(wrong.error.empty()) << wrong.error;
      const bool read = (type == GgmlType::Q4_K) == (act == 256);
      EXPECT_EQ(std::memcmp(a.data(), wrong.out[0].floats().data(), a.size() * 4) != 0, read) << what;
    }
  }
}

// cuda.moe_ffn (kt-fuse-calls: the shared experts beside the routed ones)
// against the three calls it replaces (matmul_glu and matmul of the shared
// experts, moe_experts): the same bits in both outputs. One row runs the
// shared experts on a second queue, forked and joined with events: run once,
// and recorded as a step is (the fork and join in the graph, launched twice);
// five rows run them first on the call's queue. With the norm's rounded rows
// and without; shared experts of float weights take their three kernels.
TEST(CudaKernels, MoeFfnMatchesItsThreeCalls) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(28);
  const int64_t n_embd = 512, n_ff = 256, n_shared = 512, ne = 8, nu = 3;
  uint64_t seed = 900;
  for (const GgmlType shared_type : {GgmlType::Q4_K, GgmlType::F16}) {
    for (int64_t rows : {1, 5}) {
      for (const bool rounded : {false, true}) {
        for (const bool recorded : {false, true}) {
          if (recorded && rows > 1) continue;
          const std::string what = std::string("shared ") + std::string(type_name(shared_type)) + " x " +
                                   std::to_string(rows) + (rounded ? ", rounded rows" : "") +
                                   (recorded ? ", recorded" : "");
          const Outcome nr = run_gpu(add_rms_norm_call(n_embd, rows, rng, 256));
          ASSERT_TRUE(nr.error.empty()) << what << ": " << nr.error;
          const Routing r = routing(rows, nu, ne, rng);
          const std::vector<int32_t>& ids = r.ids;
          const std::vector<float>& w = r.weights;
          const Weight g = Weight::random("gate_exps", GgmlType::Q4_K, n_embd, n_ff, ne, ++seed);
          const Weight u = Weight::random("up_exps", GgmlType::Q4_K, n_embd, n_ff, ne, ++seed);
          const Weight d = Weight::random("down_exps", GgmlType::Q6_K, n_ff, n_embd, ne, ++seed);
          const Weight sg = Weight::random("gate_shexp", shared_type, n_embd, n_shared, 1, ++seed);
          const Weight su = Weight::random("up_shexp", shared_type, n_embd, n_shared, 1, ++seed);
          const Weight sd = Weight::random("down_shexp", GgmlType::Q6_K, n_shared, n_embd, 1, ++seed);
          std::vector<Buf> in = {nr.out[1], Buf::i32(nu, rows, ids), Buf::f32(nu, rows, w)};
          if (rounded) in.push_back(nr.out[2]);
          // The three calls.
          Call glu;
          glu.op = "matmul_glu";
          glu.in = {nr.out[1]};
          if (rounded) glu.in.push_back(nr.out[2]);
          glu.weights = {sg, su};
          glu.out.push_back(Buf::f32(n_shared, rows));
          const Outcome ga = run_gpu(glu);
          ASSERT_TRUE(ga.error.empty()) << what << ": " << ga.error;
          Call down;
          down.op = "matmul";
          down.in = {ga.out[0]};
          down.weights = {sd};
          down.out.push_back(Buf::f32(n_embd, rows));
          Call experts;
          experts.op = "moe_experts";
          experts.in = in;
          experts.weights = {g, u, d};
          experts.out.push_back(Buf::f32(n_embd, rows));
          const Outcome want_s = run_gpu(down), want_e = run_gpu(experts);
          ASSERT_TRUE(want_s.error.empty() && want_e.error.empty()) << what << ": " << want_s.error << want_e.error;
          // The one call.
          Call ffn;
          ffn.op = "moe_ffn";
          ffn.in = in;
          ffn.weights = {g, u, d, sg, su, sd};
          ffn.out = {Buf::f32(n_embd, rows), Buf::f32(n_embd, rows)};
          const Outcome got = run_gpu(ffn, nullptr, recorded);
          ASSERT_TRUE(got.error.empty()) << what << ": " << got.error;
          const auto e0 = got.out[0].floats(), e1 = want_e.out[0].floats();
          const auto s0 = got.out[1].floats(), s1 = want_s.out[0].floats();
          ASSERT_TRUE(all_finite(e0) && all_finite(s0)) << what << ": unwritten (NaN) or non-finite values";
          EXPECT_EQ(std::memcmp(e0.data(), e1.data(), e0.size() * 4), 0) << what << ": routed, max abs "
                                                                          << max_abs(e0, e1);
          EXPECT_EQ(std::memcmp(s0.data(), s1.data(), s0.size() * 4), 0) << what << ": shared, max abs "
                                                                          << max_abs(s0, s1);
        }
      }
    }
  }
}

// Hot experts placed on the GPU (kt-place-experts): the call holds a subset of
// the slices and expert_slots maps the router's ids to them (-1: held by the
// CPU). The GPU must skip the others exactly as the reference does; the result
// is a real share of the whole (neither zeros nor everything).
TEST(CudaKernels, MoeExpertsOfASubsetBySlots) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(26);
  const int64_t n_embd = 512, n_ff = 256, n_expert = 8, held = 3, nu = 3;
  for (int64_t rows : {1, 6}) {
    Call c;
    c.op = "moe_experts";
    c.in.push_back(Buf::f32(n_embd, rows, random_floats(size_t(n_embd * rows), rng)));
    std::vector<int32_t> ids;
    std::vector<float> w;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t k = 0; k < nu; ++k) {
        ids.push_back(int32_t((t * 3 + k * 5 + 1) % n_expert));
        w.push_back(0.2f + 0.5f * rng.uniform());
      }
    c.in.push_back(Buf::i32(nu, rows, ids));
    c.in.push_back(Buf::f32(nu, rows, w));
    c.out.push_back(Buf::f32(n_embd, rows));
    c.weights.push_back(Weight::random("gate_exps", GgmlType::Q4_K, n_embd, n_ff, held, 700 + uint64_t(rows)));
    c.weights.push_back(Weight::random("up_exps", GgmlType::Q4_K, n_embd, n_ff, held, 710 + uint64_t(rows)));
    c.weights.push_back(Weight::random("down_exps", GgmlType::Q6_K, n_ff, n_embd, held, 720 + uint64_t(rows)));
    kern::Param slots;
    slots.key = "expert_slots";
    slots.ints = {-1, 2, -1, -1, 0, -1, 1, -1};  // experts 4, 6, 1 are held, in that order
    c.params.push_back(slots);
    compare(c, 1e-4, "moe_experts with expert_slots x " + std::to_string(rows));
    const Outcome cpu = run_cpu(c);
    ASSERT_TRUE(cpu.error.empty()) << cpu.error;
    double norm = 0;
    for (float v : cpu.out[0].floats()) norm += double(v) * double(v);
    EXPECT_GT(norm, 0.0) << "no chosen expert was held";
  }
}

// The grouped path (cuda_moe_grouped.cu): streamed experts (streamed=1, the
// plan's prefill.long: weights in host memory, copied expert by expert into
// the GPU's ring of slots) and resident ones (cuda.moe_experts from 64 rows).
// Against the reference on random routings: rows at the vector path (<= 48
// per expert) and at the tile path (more), more experts than the ring holds
// (so slots are reused while copies run ahead), experts nobody chose, and a
// subset by expert_slots (hot experts elsewhere). Tile-path rows go through
// two fp16 GEMMs in a row (gate/up, then down; cuda.matmul's tiles alone are
// held to 2e-3), hence the looser tolerance there. Resident experts both with
// the host's grouping (KT_CUDA_GROUPED_DEVICE=0) and with the default, the
// grouping on the GPU (cuda_moe_grouped_gemm.cu: pairs sorted by a kernel,
// every expert's products in one launch, all rows in f16 tiles): 64-row tiles
// where the held experts average 48 pairs or fewer (100 rows: 27 an expert,
// some experts over several tiles), 256-row ones from 160 (600 rows: 200),
// 128 between (200 and 300 rows).
TEST(CudaKernels, MoeExpertsGroupedStreamedAndResident) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(36);
  struct E {
    GgmlType gu, down;
    int64_t n_embd, n_ff, ne, nu, rows;
    bool subset;
  };
  uint64_t seed = 900;
  for (const E e : {E{GgmlType::Q4_K, GgmlType::Q6_K, 512, 256, 11, 3, 1, false},
                    E{GgmlType::Q4_K, GgmlType::Q6_K, 512, 256, 11, 3, 37, false},
                    E{GgmlType::Q4_K, GgmlType::Q6_K, 512, 256, 11, 3, 100, false},
                    E{GgmlType::Q8_0, GgmlType::Q5_0, 96, 64, 6, 2, 200, false},
                    E{GgmlType::Q8_0, GgmlType::Q5_0, 96, 64, 6, 2, 600, false},
                    E{GgmlType::IQ4_XS, GgmlType::Q5_K, 256, 512, 9, 2, 300, true},
                    E{GgmlType::F32, GgmlType::F32, 64, 32, 5, 2, 20, false}}) {
    // Resident: the host's grouping (KT_CUDA_GROUPED_DEVICE=0, read when the
    // kernel is bound), then the GPU's own (the default).
    for (int how_run : {0, 1, 2}) {
      const bool streamed = how_run == 0, on_device = how_run == 2;
      if (!streamed && e.rows < 64) continue;  // the resident kernel's vector path: MoeExpertsOnTheGpu
      if (on_device && e.gu == GgmlType::F32) continue;  // 8-bit-block types only
      if (how_run == 1) setenv("KT_CUDA_GROUPED_DEVICE", "0", 1);
      Call c;
      c.op = "moe_experts";
      c.weights_on_host = streamed;
      if (streamed) c.param("streamed", 1);
      c.in.push_back(Buf::f32(e.n_embd, e.rows, random_floats(size_t(e.n_embd * e.rows), rng)));
      std::vector<int32_t> ids;
      std::vector<float> w;
      // Expert 2 is never chosen; the others by a skewed random draw.
      for (int64_t t = 0; t < e.rows; ++t) {
        std::vector<int32_t> taken;
        while (int64_t(taken.size()) < e.nu) {
          int32_t x = int32_t(double(e.ne) * rng.uniform() * rng.uniform());
          if (x == 2 || x >= e.ne || std::find(taken.begin(), taken.end(), x) != taken.end()) continue;
          taken.push_back(x);
        }
        for (int32_t x : taken) {
          ids.push_back(x);
          w.push_back(0.2f + 0.5f * rng.uniform());
        }
      }
      int64_t held = e.ne;
      kern::Param slots;  // router id -> held slice; all held unless a subset
      slots.key = "expert_slots";
      for (int64_t x = 0; x < e.ne; ++x) slots.ints.push_back(x);
      if (e.subset) {
        // Slices 0..3 hold experts 7, 1, 4, 0; the rest are elsewhere.
        held = 4;
        slots.ints.assign(size_t(e.ne), -1);
        slots.ints[7] = 0, slots.ints[1] = 1, slots.ints[4] = 2, slots.ints[0] = 3;
        c.params.push_back(slots);
      }
      c.in.push_back(Buf::i32(e.nu, e.rows, ids));
      c.in.push_back(Buf::f32(e.nu, e.rows, w));
      c.out.push_back(Buf::f32(e.n_embd, e.rows));
      c.weights.push_back(Weight::random("gate_exps", e.gu, e.n_embd, e.n_ff, held, ++seed));
      c.weights.push_back(Weight::random("up_exps", e.gu, e.n_embd, e.n_ff, held, ++seed));
      c.weights.push_back(Weight::random("down_exps", e.down, e.n_ff, e.n_embd, held, ++seed));
      // The host's grouping takes an expert's rows to fp16 tiles past kVectorRows
      // of them: the looser tolerance where any held expert has that many.
      std::vector<int64_t> per(size_t(e.ne), 0);
      for (int32_t x : ids) ++per[size_t(x)];
      int64_t most = 0;
      for (int64_t x = 0; x < e.ne; ++x)
        if (slots.ints[size_t(x)] >= 0) most = std::max(most, per[size_t(x)]);
      const bool tiles = e.gu != GgmlType::F32 && most > cuda::MatmulOp::kVectorRows;
      const std::string how = streamed ? "streamed" : on_device ? "grouped on the GPU" : "grouped";
      const uint64_t runs = cuda::resident_experts_runs();
      compare(c, tiles || on_device ? 5e-3 : 1e-4,
              how + " moe_experts " + std::string(type_name(e.gu)) + "/" + std::string(type_name(e.down)) + " x " +
                  std::to_string(e.rows) + (e.subset ? " (subset)" : ""),
              "moe_experts " + how);
      unsetenv("KT_CUDA_GROUPED_DEVICE");
      if (on_device) {
        EXPECT_GT(cuda::resident_experts_runs(), runs) << how << " " << type_name(e.gu) << ": not on the GPU";
      } else {
        EXPECT_EQ(cuda::resident_experts_runs(), runs) << how << " " << type_name(e.gu) << ": on the GPU";
      }
      const Outcome cpu = run_cpu(c);
      ASSERT_TRUE(cpu.error.empty()) << cpu.error;
      double norm = 0;
      for (float v : cpu.out[0].floats()) norm += double(v) * double(v);
      EXPECT_GT(norm, 0.0);
    }
  }
}

}  // namespace
}  // namespace kt::test
