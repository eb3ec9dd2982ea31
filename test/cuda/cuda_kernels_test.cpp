// Every CUDA kernel against its CPU reference kernel ("cpu." bound with
// Impl::Reference) on random inputs: odd shapes, one token and several, several
// sequences in one step, both roundings. Tolerances are relative L2 over each
// output; the last lines printed are the worst error seen per kernel.
#include <algorithm>
#include <cstdio>
#include <map>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cuda/cuda_matmul.h"
#include "test/cuda/cuda_test_util.h"

namespace kt::test {
namespace {

using kern::Rounding;

// Worst relative L2 per kernel (and rounding), printed at the end.
std::map<std::string, double>& worst() {
  static std::map<std::string, double> w;
  return w;
}

class WorstErrors : public testing::Environment {
 public:
  void TearDown() override {
    if (worst().empty()) return;
    std::printf("\n== worst relative L2 (GPU vs CPU reference) per kernel ==\n");
    for (const auto& [k, v] : worst()) std::printf("  %-44s %.3e\n", k.c_str(), v);
  }
};
const auto* const g_env = testing::AddGlobalTestEnvironment(new WorstErrors);

std::string rname(Rounding r) { return r == Rounding::GgmlCpu ? "ggml" : "exact"; }

void note(const std::string& key, double e) {
  double& w = worst()[key];
  w = std::max(w, e);
}

// Runs both, checks every output (finite, rel L2 <= tol), records the error.
void compare(const Call& c, double tol, const std::string& what, const std::string& key = "") {
  const Outcome cpu = run_cpu(c);
  ASSERT_TRUE(cpu.error.empty()) << what << ": cpu: " << cpu.error;
  const Outcome gpu = run_gpu(c);
  ASSERT_TRUE(gpu.error.empty()) << what << ": gpu: " << gpu.error;
  for (size_t i = 0; i < c.out.size(); ++i) {
    if (c.out[i].type == GgmlType::I32) {
      EXPECT_EQ(gpu.out[i].ints(), cpu.out[i].ints()) << what << ": output " << i;
      continue;
    }
    const auto g = gpu.out[i].floats(), w = cpu.out[i].floats();
    ASSERT_TRUE(all_finite(w)) << what << ": the reference wrote non-finite values";
    ASSERT_TRUE(all_finite(g)) << what << ": output " << i << " has unwritten (NaN) or non-finite values";
    const double e = rel_l2(g, w);
    note((key.empty() ? c.op : key) + " (" + rname(c.rounding) + ")", e);
    EXPECT_LE(e, tol) << what << ": output " << i << " rel L2 " << e << ", max abs " << max_abs(g, w);
  }
}

// ---- elementwise ---------------------------------------------------------------

TEST(CudaKernels, EmbedBitExactForEveryType) {
  KT_REQUIRE_GPU();
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    const int64_t n_embd = type_traits(t).block_size * 3, n_vocab = 37;
    Call c;
    c.op = "embed";
    c.weights.push_back(Weight::random("tok_embd", t, n_embd, n_vocab, 1, 11));
    c.step.tokens = {5, 0, 36, 5, 17};
    c.step.add_run(0, 0, 5);
    c.out.push_back(Buf::f32(n_embd, 5, {}, 8));
    const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
    ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
    const auto g = gpu.out[0].floats(), w = cpu.out[0].floats();
    EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size() * 4), 0) << type_name(t) << ": max abs " << max_abs(g, w);
    note("embed (bits)", max_abs(g, w));
  }
}

TEST(CudaKernels, RmsNormRowsAndGroups) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(3);
  struct Shape {
    int64_t cols, group, rows;
  };
  // 7168: the registers path (896 threads); 10000: more than 1024 threads' registers hold (a loop).
  for (const Shape s : {Shape{7168, 7168, 1}, Shape{10000, 10000, 2}, Shape{64, 64, 5}, Shape{1536, 128, 3},
                        Shape{100, 20, 7}}) {
    Call c;
    c.op = "rms_norm";
    c.in.push_back(Buf::f32(s.cols, s.rows, random_floats(size_t(s.cols * s.rows), rng, -3, 3)));
    c.out.push_back(Buf::f32(s.cols, s.rows));
    c.weights.push_back(Weight::f32("norm", random_floats(size_t(s.group), rng, 0.5f, 1.5f), s.group));
    c.paramf("eps", 1e-6);
    if (s.group != s.cols) c.param("group", s.group);
    compare(c, 1e-6, "rms_norm " + std::to_string(s.cols) + "/" + std::to_string(s.group));
  }
}

TEST(CudaKernels, AddSiluMulSigmoidGateAddSelectRows) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(4);
  for (int64_t rows : {1, 6}) {
    const int64_t cols = 1001;
    for (const char* op : {"add", "silu_mul"}) {
      Call c;
      c.op = op;
      c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -4, 4)));
      c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -4, 4)));
      c.out.push_back(Buf::f32(cols, rows));
      compare(c, 1e-7, op);
    }
    Call g;
    g.op = "sigmoid_gate_add";
    g.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng)));
    g.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng)));
    g.in.push_back(Buf::f32(1, rows, random_floats(size_t(rows), rng, -3, 3)));
    g.out.push_back(Buf::f32(cols, rows));
    compare(g, 1e-7, "sigmoid_gate_add");
  }
  Call s;
  s.op = "select_rows";
  s.step.add_run(0, 0, 9);
  s.step.outputs = {0, 4, 8};
  s.in.push_back(Buf::f32(333, 9, random_floats(333 * 9, rng)));
  s.out.push_back(Buf::f32(333, 3));
  compare(s, 0.0, "select_rows");
}

// ---- matmul ----------------------------------------------------------------------

struct MatmulCase {
  GgmlType type;
  int64_t n_in, n_out;
};

bool takes_tiles(GgmlType t, Rounding r, int64_t rows) {
  return rows > cuda::MatmulOp::kVectorRows && t != GgmlType::F32 && r == Rounding::GgmlCpu;
}

double matmul_tol(GgmlType t, Rounding r, int64_t rows) {
  const bool tiles = takes_tiles(t, r, rows);
  if (!tiles) return 1e-5;
  // fp16 tensor cores: 11 bits per operand. F16/BF16 weights meet activations
  // rounded to their own type (exact products).
  return (t == GgmlType::F16 || t == GgmlType::BF16) ? 1e-5 : 2e-3;
}

TEST(CudaKernels, MatmulEveryTypeBothRoundingsAndBatches) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(5);
  std::vector<MatmulCase> cases;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (auto s : {std::pair<int64_t, int64_t>{70, 37}, {1024, 129}}) cases.push_back({t, s.first, s.second});
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0})
    for (auto s : {std::pair<int64_t, int64_t>{96, 37}, {1024, 300}}) cases.push_back({t, s.first, s.second});
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS})
    for (auto s : {std::pair<int64_t, int64_t>{256, 37}, {2304, 300}}) cases.push_back({t, s.first, s.second});
  uint64_t seed = 100;
  for (const MatmulCase& mc : cases) {
    for (int64_t rows : {1, 3, 8, 13, 40, 60}) {
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        if (r == Rounding::Exact && rows >= 40 && mc.n_in > 1024) continue;  // the CPU reference is slow
        Call c;
        c.op = "matmul";
        c.rounding = r;
        c.weights.push_back(Weight::random("w", mc.type, mc.n_in, mc.n_out, 1, ++seed));
        const bool bias = rows == 3;
        if (bias) c.weights.push_back(Weight::f32("b", random_floats(size_t(mc.n_out), rng), mc.n_out));
        c.in.push_back(Buf::f32(mc.n_in, rows, random_floats(size_t(mc.n_in * rows), rng, -2, 2), 64));
        c.out.push_back(Buf::f32(mc.n_out, rows, {}, 64));
        const std::string what = std::string(type_name(mc.type)) + " [" + std::to_string(mc.n_in) + ", " +
                                 std::to_string(mc.n_out) + "] x " + std::to_string(rows) + " rows " + rname(r);
        const bool tiles = takes_tiles(mc.type, r, rows);
        compare(c, matmul_tol(mc.type, r, rows), what,
                std::string("matmul ") + std::string(type_name(mc.type)) + (tiles ? " tiles" : " vector"));
      }
    }
  }
}

// ---- rope and caches ---------------------------------------------------------------

void rope_params(Call& c, int n_dims, int mode, bool yarn, int n_heads, int head_dim, int offset) {
  c.param("n_dims", n_dims);
  c.param("mode", mode);
  c.paramf("freq_base", 10000.0);
  c.param("n_heads", n_heads);
  c.param("head_dim", head_dim);
  c.param("offset", offset);
  if (yarn) {
    c.paramf("freq_scale", 0.025);
    c.param("n_ctx_orig", 4096);
    c.paramf("ext_factor", 1.0);
    c.paramf("attn_factor", 0.7305);
    c.paramf("beta_fast", 32.0);
    c.paramf("beta_slow", 1.0);
  }
}

TEST(CudaKernels, RopePlainNeoxYarn) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(6);
  struct R {
    int n_dims, mode;
    bool yarn;
    int heads, head_dim, offset;
  };
  for (const R r : {R{64, 0, false, 3, 64, 0}, R{32, 2, false, 5, 48, 8}, R{64, 0, true, 4, 192, 128},
                    R{16, 0, true, 2, 48, 32}}) {
    Call c;
    c.op = "rope";
    rope_params(c, r.n_dims, r.mode, r.yarn, r.heads, r.head_dim, r.offset);
    c.step.add_run(0, 4000, 3);
    c.step.add_run(2, 0, 2);
    c.step.add_run(1, 77, 1);
    const int64_t cols = int64_t(r.heads) * r.head_dim + 3;
    c.in.push_back(Buf::f32(cols, 6, random_floats(size_t(cols * 6), rng)));
    c.out.push_back(Buf::f32(cols, 6));
    compare(c, 2e-6, "rope");
  }
}

TEST(CudaKernels, KvStoreEveryCacheType) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(7);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    Call c;
    c.op = "kv_store";
    c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::Kv, t, 3, 64, 2, 2 * 48, 2 * 40, 8));
    c.step.add_run(1, 10, 4);
    c.step.add_run(0, 63, 1);
    c.in.push_back(Buf::f32(96, 5, random_floats(96 * 5, rng)));
    c.in.push_back(Buf::f32(80, 5, random_floats(80 * 5, rng)));
    const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
    ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
    EXPECT_EQ(cpu.k, gpu.k) << type_name(t);
    EXPECT_EQ(cpu.v, gpu.v) << type_name(t);
  }
}

TEST(CudaKernels, MlaCacheStore) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(8);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    for (auto [r, dr] : {std::pair<int64_t, int64_t>{64, 16}, {512, 64}}) {
      Call c;
      c.op = "mla_cache_store";
      c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, t, 2, 300, 1, r, dr, 9));
      c.step.add_run(1, 3, 3);
      c.step.add_run(0, 299, 1);
      c.in.push_back(Buf::f32(r + dr, 4, random_floats(size_t((r + dr) * 4), rng, -3, 3)));
      c.weights.push_back(Weight::f32("kv_a_norm", random_floats(size_t(r), rng, 0.5f, 1.5f), r));
      c.paramf("eps", 1e-6);
      rope_params(c, int(dr), 0, true, 1, int(dr), 0);
      c.params.erase(std::remove_if(c.params.begin(), c.params.end(),
                                    [](const kern::Param& p) {
                                      return p.key == "n_heads" || p.key == "head_dim" || p.key == "offset";
                                    }),
                     c.params.end());
      const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
      ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
      const double ek = rel_l2(cache_floats(t, gpu.k), cache_floats(t, cpu.k));
      const double ev = rel_l2(cache_floats(t, gpu.v), cache_floats(t, cpu.v));
      note("mla_cache_store (ggml)", std::max(ek, ev));
      EXPECT_LE(ek, 1e-6) << type_name(t);
      EXPECT_LE(ev, 1e-6) << type_name(t);
    }
  }
}

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
  const MlaShape tiny{4, 32, 16, 32, 64}, v2{16, 128, 64, 128, 512};
  struct Case {
    MlaShape m;
    GgmlType wt;
    bool split;
  };
  for (const Case k : {Case{tiny, GgmlType::F32, false}, Case{tiny, GgmlType::Q8_0, false},
                       Case{v2, GgmlType::Q4_K, false}, Case{v2, GgmlType::Q6_K, true},
                       Case{v2, GgmlType::IQ4_XS, false}}) {
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16}) {
      if (k.m.h == 16 && cache == GgmlType::F32 && k.wt != GgmlType::Q4_K) continue;  // keep the run short
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        for (bool absorbed : {true, false}) {
          for (const StepData& st : attention_steps()) {
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
// held to 2e-3), hence the looser tolerance there.
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
                    E{GgmlType::Q8_0, GgmlType::Q5_0, 96, 64, 6, 2, 200, false},
                    E{GgmlType::IQ4_XS, GgmlType::Q5_K, 256, 512, 9, 2, 300, true},
                    E{GgmlType::F32, GgmlType::F32, 64, 32, 5, 2, 20, false}}) {
    for (bool streamed : {true, false}) {
      if (!streamed && e.rows < 64) continue;  // the resident kernel's vector path: MoeExpertsOnTheGpu
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
      if (e.subset) {
        // Slices 0..3 hold experts 7, 1, 4, 0; the rest are elsewhere.
        held = 4;
        kern::Param slots;
        slots.key = "expert_slots";
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
      const bool tiles = e.gu != GgmlType::F32 && e.rows * e.nu / held > cuda::MatmulOp::kVectorRows;
      const std::string how = streamed ? "streamed" : "grouped";
      compare(c, tiles ? 5e-3 : 1e-4,
              how + " moe_experts " + std::string(type_name(e.gu)) + "/" + std::string(type_name(e.down)) + " x " +
                  std::to_string(e.rows) + (e.subset ? " (subset)" : ""),
              "moe_experts " + how);
      const Outcome cpu = run_cpu(c);
      ASSERT_TRUE(cpu.error.empty()) << cpu.error;
      double norm = 0;
      for (float v : cpu.out[0].floats()) norm += double(v) * double(v);
      EXPECT_GT(norm, 0.0);
    }
  }
}

// ---- copies ---------------------------------------------------------------------------

TEST(CudaKernels, UploadDownloadCopyTheStepsRows) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(17);
  const std::vector<float> v = random_floats(50 * 8, rng);
  // Pinned host memory: the SMs copy through the mapping; pageable: the copy engine.
  for (const bool pinned : {true, false}) {
    for (const char* k : {"cuda.upload", "cuda.download"}) {
      SCOPED_TRACE(pinned ? "pinned" : "pageable");
      const kern::KernelEntry* e = kern::find_kernel(k);
      ASSERT_NE(e, nullptr) << k;
      kern::CallSpec s;
      s.kernel = k;
      s.device = 0;
      s.in.push_back({GgmlType::F32, 50, 8});
      s.out.push_back({GgmlType::F32, 50, 8});
      std::string err;
      auto kern = e->make(s, &err);
      ASSERT_TRUE(kern) << err;
      EXPECT_EQ(kern->transfer(), std::string(k) == "cuda.upload" ? kern::Kernel::Transfer::Upload
                                                                   : kern::Kernel::Transfer::Download);
      // Host side pinned or not, device side device memory; 5 of 8 rows move.
      float* host = nullptr;
      std::vector<float> pageable(v.size());
      void* dev = nullptr;
      if (pinned)
        KT_CUDA_OK(cudaMallocHost(&host, v.size() * 4));
      else
        host = pageable.data();
      KT_CUDA_OK(cudaMalloc(&dev, v.size() * 4));
      std::vector<float> back(v.size(), -7.0f);
      if (std::string(k) == "cuda.upload") {
        std::memcpy(host, v.data(), v.size() * 4);
        KT_CUDA_OK(cudaMemcpy(dev, back.data(), back.size() * 4, cudaMemcpyHostToDevice));
      } else {
        KT_CUDA_OK(cudaMemcpy(dev, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
        std::memcpy(host, back.data(), back.size() * 4);
      }
      const bool up = std::string(k) == "cuda.upload";
      const kern::Act src{up ? static_cast<void*>(host) : dev, GgmlType::F32, 50, 5, 8};
      const kern::Act dst{up ? dev : static_cast<void*>(host), GgmlType::F32, 50, 5, 8};
      const kern::Step st;
      kern::CallArgs a;
      a.in = std::span<const kern::Act>(&src, 1);
      a.out = std::span<const kern::Act>(&dst, 1);
      a.step = &st;
      kern->run(a);
      KT_CUDA_OK(cudaDeviceSynchronize());
      if (up)
        KT_CUDA_OK(cudaMemcpy(back.data(), dev, back.size() * 4, cudaMemcpyDeviceToHost));
      else
        std::memcpy(back.data(), host, back.size() * 4);
      for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(back[i], i < 250 ? v[i] : -7.0f) << k << " at " << i;
      if (pinned) cudaFreeHost(host);
      cudaFree(dev);
    }
  }
}

TEST(CudaKernels, EveryKernelTheLoweringEmitsIsRegistered) {
  for (const char* n : {"embed", "rms_norm", "add", "silu_mul", "sigmoid_gate_add", "select_rows", "matmul", "rope",
                        "kv_store", "attention", "mla_cache_store", "mla_attention", "mla_attention_absorbed",
                        "moe_gate", "moe_experts", "upload", "download", "peer_copy"})
    EXPECT_NE(kern::find_kernel(std::string("cuda.") + n), nullptr) << n;
}

}  // namespace
}  // namespace kt::test
