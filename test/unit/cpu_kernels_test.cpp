// The plan-callable CPU kernels (kernels/cpu/cpu_kernels*.cpp) bound as the
// executor binds them: every fast path against the reference kernels on random
// inputs (never zeros), odd shapes, batch 1 and more, several sequences in one
// step; and batch invariance — a token's output does not depend on which other
// tokens share its step, which continuous batching relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/kernel.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "runtime/thread_pool.h"

namespace kt::kern {
namespace {

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// An encoded tensor with random valid blocks.
struct Tensor {
  std::vector<uint8_t> bytes;
  WeightView view;
};

Tensor random_weight(GgmlType t, std::vector<int64_t> shape, uint64_t seed, const char* name) {
  Tensor w;
  const TypeTraits& tt = type_traits(t);
  int64_t rows = 1;
  for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
  w.bytes.resize(size_t(tt.row_bytes(shape[0]) * uint64_t(rows)));
  SplitMix64 rng(seed);
  fill_random_blocks(t, w.bytes.data(), w.bytes.size(), rng, 0.0f, 0.5f);
  w.view.data = w.view.host = w.bytes.data();
  w.view.type = t;
  w.view.name = name;
  for (size_t d = 0; d < 4; ++d) w.view.ne[d] = d < shape.size() ? shape[d] : 1;
  w.view.nb[0] = tt.type_size;
  w.view.nb[1] = tt.row_bytes(shape[0]);
  w.view.nb[2] = w.view.nb[1] * uint64_t(w.view.ne[1]);
  w.view.nb[3] = w.view.nb[2] * uint64_t(w.view.ne[2]);
  return w;
}

std::vector<float> random_floats(size_t n, uint64_t seed, float spread = 1.0f) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = spread * (2.0f * rng.uniform() - 1.0f);
  return v;
}

double rel_l2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// One call: its spec, buffers (poisoned outputs) and a run.
struct Call {
  CallSpec spec;
  std::vector<std::vector<float>> in, out;  // I32 buffers are stored in float-sized slots
  std::unique_ptr<Kernel> kernel;
  std::string error;

  Call(const char* name, Impl impl, Rounding rounding) {
    spec.kernel = name;
    spec.impl = impl;
    spec.rounding = rounding;
  }
  void add_in(GgmlType t, int64_t cols, int64_t rows, std::vector<float> data) {
    spec.in.push_back({t, cols, rows});
    in.push_back(std::move(data));
  }
  void add_out(GgmlType t, int64_t cols, int64_t rows) {
    spec.out.push_back({t, cols, rows});
    out.emplace_back(size_t(cols * rows), std::nanf(""));
  }
  bool bind() {
    kernel = find_kernel(spec.kernel)->make(spec, &error);
    return kernel != nullptr;
  }
  void run(const Step& step, int64_t rows) {
    std::vector<Act> ia, oa;
    for (size_t k = 0; k < in.size(); ++k)
      ia.push_back(Act{in[k].data(), spec.in[k].type, spec.in[k].cols, rows, spec.in[k].max_rows});
    for (size_t k = 0; k < out.size(); ++k)
      oa.push_back(Act{out[k].data(), spec.out[k].type, spec.out[k].cols, rows, spec.out[k].max_rows});
    CallArgs a;
    a.in = ia;
    a.out = oa;
    a.weights = spec.weights;
    a.kv = spec.kv;
    a.step = &step;
    a.par = &pool();
    kernel->run(a);
  }
};

struct StepData {
  std::vector<int32_t> tokens, pos, slot, outputs;
  Step step() const {
    return Step{int64_t(pos.size()), tokens.data(), pos.data(), slot.data(), int64_t(outputs.size()), outputs.data()};
  }
};

StepData one_sequence(int64_t n, int32_t pos0 = 0) {
  StepData s;
  for (int64_t t = 0; t < n; ++t) {
    s.tokens.push_back(1);
    s.pos.push_back(pos0 + int32_t(t));
    s.slot.push_back(0);
    s.outputs.push_back(int32_t(t));
  }
  return s;
}

// ---- matmul ------------------------------------------------------------------

struct MatmulCase {
  GgmlType type;
  int64_t n_in, n_out, rows;
};

class FastMatmul : public testing::TestWithParam<MatmulCase> {};

TEST_P(FastMatmul, MatchesReferenceAndIsBatchInvariant) {
  const MatmulCase c = GetParam();
  if (!cpu::matmul_q_supported(c.type)) GTEST_SKIP() << "no fast path for " << type_name(c.type);
  const Tensor w = random_weight(c.type, {c.n_in, c.n_out}, 7, "w");
  const std::vector<float> x = random_floats(size_t(c.rows * c.n_in), 11);
  auto make = [&](Impl impl, int64_t rows, const float* data) {
    auto call = std::make_unique<Call>("cpu.matmul", impl, Rounding::GgmlCpu);
    call->spec.weights = {w.view};
    call->add_in(GgmlType::F32, c.n_in, rows, std::vector<float>(data, data + rows * c.n_in));
    call->add_out(GgmlType::F32, c.n_out, rows);
    EXPECT_TRUE(call->bind()) << call->error;
    return call;
  };
  const StepData sd = one_sequence(c.rows);
  auto fast = make(Impl::Fast, c.rows, x.data());
  auto ref = make(Impl::Reference, c.rows, x.data());
  ASSERT_NE(fast->kernel->impl(), "reference");
  fast->run(sd.step(), c.rows);
  ref->run(sd.step(), c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* a = fast->out[0].data() + r * c.n_out;
    const float* b = ref->out[0].data() + r * c.n_out;
    for (int64_t o = 0; o < c.n_out; ++o) ASSERT_FALSE(std::isnan(a[o])) << "output " << r << "," << o << " unwritten";
    EXPECT_LE(rel_l2(a, b, size_t(c.n_out)), 1e-5) << "row " << r;
  }
  // Row r computed alone gives the same bits as within the batch; on a CPU
  // with AMX a batch of kAmxMinBatch rows or more takes the tiles, which sum
  // the same integer products but scale and add the sub-blocks' sums in
  // another order: then equal to float rounding, not bit for bit.
  const bool tiles = c.rows >= cpu::matmul_detail::kAmxMinBatch && cpu::matmul_q_impl(c.type) == std::string_view("amx-int8");
  for (int64_t r : {int64_t(0), c.rows - 1}) {
    const StepData one = one_sequence(1);
    auto alone = make(Impl::Fast, 1, x.data() + r * c.n_in);
    alone->run(one.step(), 1);
    const float* batch_row = fast->out[0].data() + r * c.n_out;
    if (tiles)
      EXPECT_LE(rel_l2(alone->out[0].data(), batch_row, size_t(c.n_out)), 1e-6) << "row " << r << " (AMX tiles)";
    else
      EXPECT_EQ(std::memcmp(alone->out[0].data(), batch_row, size_t(c.n_out) * 4), 0)
          << "row " << r << " differs when computed alone";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FastMatmul,
                         testing::Values(MatmulCase{GgmlType::Q4_K, 512, 300, 1}, MatmulCase{GgmlType::Q4_K, 512, 300, 17},
                                         MatmulCase{GgmlType::Q6_K, 256, 77, 3}, MatmulCase{GgmlType::Q5_K, 768, 64, 9},
                                         MatmulCase{GgmlType::Q8_0, 1408, 45, 5}, MatmulCase{GgmlType::Q5_0, 1408, 33, 2},
                                         MatmulCase{GgmlType::IQ4_XS, 256, 129, 8}, MatmulCase{GgmlType::Q4_0, 96, 31, 4},
                                         MatmulCase{GgmlType::BF16, 64, 50, 3}, MatmulCase{GgmlType::F16, 64, 50, 3},
                                         MatmulCase{GgmlType::F32, 64, 4096, 2}),
                         [](const auto& info) {
                           return std::string(type_name(info.param.type)) + "_" + std::to_string(info.param.rows);
                         });

// bf16_rows on cpu.matmul: a step of that many rows or more computes in BF16
// (fast and reference alike, with a bias), a shorter one as without the param,
// bit for bit.
TEST(FastMatmul, Bf16RowsSwitchesLongStepsToBf16) {
  if (!cpu::matmul_bf16_available(GgmlType::Q4_K)) GTEST_SKIP() << "no AVX-512 here: the reference runs";
  const int64_t n_in = 512, n_out = 150;
  const Tensor w = random_weight(GgmlType::Q4_K, {n_in, n_out}, 17, "w");
  const Tensor b = random_weight(GgmlType::F32, {n_out}, 19, "bias");
  const std::vector<float> x = random_floats(size_t(40 * n_in), 18);
  Param p;
  p.key = "bf16_rows";
  p.i = 20;
  auto run = [&](Impl impl, int64_t rows, std::vector<Param> params) {
    auto call = std::make_unique<Call>("cpu.matmul", impl, Rounding::GgmlCpu);
    call->spec.weights = {w.view, b.view};
    call->spec.params = std::move(params);
    call->add_in(GgmlType::F32, n_in, rows, std::vector<float>(x.begin(), x.begin() + rows * n_in));
    call->add_out(GgmlType::F32, n_out, rows);
    EXPECT_TRUE(call->bind()) << call->error;
    const StepData sd = one_sequence(rows);
    call->run(sd.step(), rows);
    return call;
  };
  for (int64_t rows : {int64_t(19), int64_t(40)}) {
    auto fast = run(Impl::Fast, rows, {p}), ref = run(Impl::Reference, rows, {p});
    auto ggml = run(Impl::Fast, rows, {});
    ASSERT_NE(fast->kernel->impl(), "reference");
    for (int64_t r = 0; r < rows; ++r) {
      const float* f = fast->out[0].data() + r * n_out;
      EXPECT_LE(rel_l2(f, ref->out[0].data() + r * n_out, size_t(n_out)), 1e-5) << rows << " rows, row " << r;
      if (rows < 20)
        EXPECT_EQ(std::memcmp(f, ggml->out[0].data() + r * n_out, size_t(n_out) * 4), 0) << "row " << r;
      else
        EXPECT_GT(rel_l2(f, ggml->out[0].data() + r * n_out, size_t(n_out)), 1e-4) << "row " << r << ": not BF16";
    }
  }
}

// ---- MoE experts -------------------------------------------------------------

// cpu.moe_experts over n tokens of x with their routing (ids as I32 bits in floats, weights).
std::unique_ptr<Call> moe_experts_call(Impl impl, std::vector<WeightView> w, std::vector<Param> params,
                                       const std::vector<float>& x, const std::vector<float>& ids,
                                       const std::vector<float>& wts, int64_t n_embd, int64_t n_used, int64_t n) {
  auto c = std::make_unique<Call>("cpu.moe_experts", impl, Rounding::GgmlCpu);
  c->spec.weights = std::move(w);
  c->spec.params = std::move(params);
  c->add_in(GgmlType::F32, n_embd, n, x);
  c->add_in(GgmlType::I32, n_used, n, ids);
  c->add_in(GgmlType::F32, n_used, n, wts);
  c->add_out(GgmlType::F32, n_embd, n);
  EXPECT_TRUE(c->bind()) << c->error;
  return c;
}

TEST(FastMoe, MatchesReferenceAndIsBatchInvariant) {
  const int64_t n_embd = 256, n_ff = 512, n_expert = 8, n_used = 3, n = 11;
  const Tensor g = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 1, "gate");
  const Tensor u = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 2, "up");
  const Tensor d = random_weight(GgmlType::Q6_K, {n_ff, n_embd, n_expert}, 3, "down");
  const std::vector<float> x = random_floats(size_t(n * n_embd), 4);
  // Routing: distinct experts per token, expert 7 never chosen.
  std::vector<float> ids(size_t(n * n_used)), wts = random_floats(size_t(n * n_used), 5);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < n_used; ++k) {
      const int32_t e = int32_t((t * 3 + k * 2) % 7);
      std::memcpy(&ids[size_t(t * n_used + k)], &e, 4);
    }
  auto make = [&](Impl impl, int64_t rows, int64_t t0) {
    auto c = std::make_unique<Call>("cpu.moe_experts", impl, Rounding::GgmlCpu);
    c->spec.weights = {g.view, u.view, d.view};
    c->add_in(GgmlType::F32, n_embd, rows, std::vector<float>(x.begin() + t0 * n_embd, x.begin() + (t0 + rows) * n_embd));
    c->add_in(GgmlType::I32, n_used, rows, std::vector<float>(ids.begin() + t0 * n_used, ids.begin() + (t0 + rows) * n_used));
    c->add_in(GgmlType::F32, n_used, rows, std::vector<float>(wts.begin() + t0 * n_used, wts.begin() + (t0 + rows) * n_used));
    c->add_out(GgmlType::F32, n_embd, rows);
    EXPECT_TRUE(c->bind()) << c->error;
    return c;
  };
  const StepData sd = one_sequence(n);
  auto fast = make(Impl::Fast, n, 0), ref = make(Impl::Reference, n, 0);
  if (!cpu::matmul_q_supported(GgmlType::Q4_K)) GTEST_SKIP();
  ASSERT_NE(fast->kernel->impl(), "reference");
  fast->run(sd.step(), n);
  ref->run(sd.step(), n);
  for (int64_t t = 0; t < n; ++t)
    EXPECT_LE(rel_l2(fast->out[0].data() + t * n_embd, ref->out[0].data() + t * n_embd, size_t(n_embd)), 1e-5)
        << "token " << t;
  for (int64_t t : {int64_t(0), int64_t(6), n - 1}) {
    const StepData one = one_sequence(1);
    auto alone = make(Impl::Fast, 1, t);
    alone->run(one.step(), 1);
    EXPECT_EQ(std::memcmp(alone->out[0].data(), fast->out[0].data() + t * n_embd, size_t(n_embd) * 4), 0)
        << "token " << t << " differs when computed alone";
  }
}

// Enough tokens per expert for the AMX tiles (from 16 rows) where the CPU has
// them: each expert's rows are tiled once and every block of its rows reads
// them (k-quant gate/up, 32-value down, a partial last tile).
TEST(FastMoe, ManyTokensPerExpertMatchReference) {
  const int64_t n_embd = 512, n_ff = 288, n_expert = 4, n_used = 2, n = 45;
  const Tensor g = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 31, "gate");
  const Tensor u = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 32, "up");
  const Tensor d = random_weight(GgmlType::Q8_0, {n_ff, n_embd, n_expert}, 33, "down");
  const std::vector<float> x = random_floats(size_t(n * n_embd), 34);
  std::vector<float> ids(size_t(n * n_used)), wts = random_floats(size_t(n * n_used), 35);
  for (int64_t t = 0; t < n; ++t)  // two distinct of experts 0..2 per token (30 rows each), 3 unused
    for (int64_t k = 0; k < n_used; ++k) {
      const int32_t e = int32_t((t + k * (1 + t % 2)) % 3);
      std::memcpy(&ids[size_t(t * n_used + k)], &e, 4);
    }
  auto make = [&](Impl impl) {
    return moe_experts_call(impl, {g.view, u.view, d.view}, {}, x, ids, wts, n_embd, n_used, n);
  };
  const StepData sd = one_sequence(n);
  auto fast = make(Impl::Fast), ref = make(Impl::Reference);
  fast->run(sd.step(), n);
  ref->run(sd.step(), n);
  for (int64_t t = 0; t < n; ++t)
    EXPECT_LE(rel_l2(fast->out[0].data() + t * n_embd, ref->out[0].data() + t * n_embd, size_t(n_embd)), 1e-5)
        << "token " << t;
  EXPECT_GT(rel_l2(fast->out[0].data(), x.data(), size_t(n * n_embd)), 0.1);  // not the input passed through
}

// bf16_rows (KTransformers' AMXBF16 experts): experts with at least that many of
// the step's rows compute in BF16 (matmul_bf16.h), the rest as before; the
// reference rounds the same experts the same way. Experts 0..2 get 30 rows,
// expert 3 five (below 20: ggml's rounding); a Q5_0 down as V2-Lite's.
// The bound is wider than ggml rounding's 1e-5: SiLU's output is computed in
// float here and in double by the reference, and where it sits on a BF16
// rounding boundary the two round apart by one BF16 step (2^-8 of the value,
// where a Q8 step is 1/127 of a block's largest): one such value moved a
// token by 3.2e-5.
constexpr double kBf16Tol = 1e-4;
TEST(FastMoe, Bf16ExpertsMatchReference) {
  const int64_t n_embd = 512, n_ff = 288, n_expert = 4, n_used = 2, n = 50;
  const Tensor g = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 61, "gate");
  const Tensor u = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 62, "up");
  const Tensor d = random_weight(GgmlType::Q5_0, {n_ff, n_embd, n_expert}, 63, "down");
  const std::vector<float> x = random_floats(size_t(n * n_embd), 64);
  std::vector<float> ids(size_t(n * n_used)), wts = random_floats(size_t(n * n_used), 65);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < n_used; ++k) {
      int32_t e = int32_t((t + k * (1 + t % 2)) % 3);
      if (t % 10 == 0 && k == 1) e = 3;  // 5 rows of expert 3
      std::memcpy(&ids[size_t(t * n_used + k)], &e, 4);
    }
  Param rows;
  rows.key = "bf16_rows";
  rows.i = 20;
  auto make = [&](Impl impl, std::vector<Param> params) {
    return moe_experts_call(impl, {g.view, u.view, d.view}, std::move(params), x, ids, wts, n_embd, n_used, n);
  };
  const StepData sd = one_sequence(n);
  auto fast = make(Impl::Fast, {rows}), ref = make(Impl::Reference, {rows}), ggml = make(Impl::Reference, {});
  if (!cpu::matmul_bf16_available(GgmlType::Q4_K)) GTEST_SKIP() << "no AVX-512 here: the reference runs";
  ASSERT_NE(fast->kernel->impl(), "reference");
  fast->run(sd.step(), n);
  ref->run(sd.step(), n);
  ggml->run(sd.step(), n);
  double worst = 0, least_apart = 1;
  for (int64_t t = 0; t < n; ++t) {
    const float* f = fast->out[0].data() + t * n_embd;
    const double e = rel_l2(f, ref->out[0].data() + t * n_embd, size_t(n_embd));
    EXPECT_LE(e, kBf16Tol) << "token " << t;
    worst = std::max(worst, e);
    // BF16 rounding is not ggml's: the two differ by far more than the bound
    // above for tokens whose experts all had 20 rows or more.
    if (t % 10 != 0) {
      const double apart = rel_l2(f, ggml->out[0].data() + t * n_embd, size_t(n_embd));
      EXPECT_GT(apart, 10 * kBf16Tol) << "token " << t;
      least_apart = std::min(least_apart, apart);
    }
  }
  std::printf("  worst rel_l2 to the reference %.2e (bound %.0e); BF16 and ggml's rounding at least %.2e apart\n",
              worst, kBf16Tol, least_apart);
}

// cpu.silu_mul's fast path (float, AVX-512 where the CPU has it) against the
// reference's double, over ordinary values, tiny and huge ones (past exp's
// float range silu is -0 and g; the reference's tiny values there, ~1e-37,
// count as 0) and row lengths that leave a tail; an
// element's bits do not depend on its position in the row.
TEST(FastSiluMul, WithinFourUlpsOfReferenceWhereverTheValueSits) {
  std::vector<float> g = random_floats(1000, 41, 8.0f), u = random_floats(1000, 42);
  const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.7f, -88.7f, 89.0f, -89.0f, 104.0f, -104.0f,
                        1e30f, -1e30f, 0.6931f, -0.6931f, 20.0f, -20.0f};
  for (size_t i = 0; i < std::size(edge); ++i) g[i * 7] = edge[i];
  for (int64_t n : {int64_t(1000), int64_t(17), int64_t(5)}) {
    auto make = [&](Impl impl) {
      auto c = std::make_unique<Call>("cpu.silu_mul", impl, Rounding::GgmlCpu);
      c->add_in(GgmlType::F32, n, 1, std::vector<float>(g.begin(), g.begin() + n));
      c->add_in(GgmlType::F32, n, 1, std::vector<float>(u.begin(), u.begin() + n));
      c->add_out(GgmlType::F32, n, 1);
      EXPECT_TRUE(c->bind()) << c->error;
      return c;
    };
    const StepData sd = one_sequence(1);
    auto fast = make(Impl::Fast), ref = make(Impl::Reference);
    fast->run(sd.step(), 1);
    ref->run(sd.step(), 1);
    for (int64_t i = 0; i < n; ++i) {
      const float got = fast->out[0][size_t(i)], want = ref->out[0][size_t(i)];
      ASSERT_LE(std::fabs(double(got) - double(want)), 4.0 * std::fabs(double(want)) * 0x1p-24 + 1e-30)
          << "silu(" << g[size_t(i)] << ") * " << u[size_t(i)] << " at " << i << " of " << n;
    }
  }
  // Position: one value at each of 16 lanes and in the tail.
  std::vector<float> row(35, 0.37f), one(35, 1.5f), y1(35), y2(35);
  auto fast_call = [&](int64_t n, std::vector<float>& y) {
    auto c = std::make_unique<Call>("cpu.silu_mul", Impl::Fast, Rounding::GgmlCpu);
    c->add_in(GgmlType::F32, n, 1, std::vector<float>(row.begin(), row.begin() + n));
    c->add_in(GgmlType::F32, n, 1, std::vector<float>(one.begin(), one.begin() + n));
    c->add_out(GgmlType::F32, n, 1);
    EXPECT_TRUE(c->bind()) << c->error;
    const StepData sd = one_sequence(1);
    c->run(sd.step(), 1);
    y.assign(c->out[0].begin(), c->out[0].end());
  };
  fast_call(35, y1);
  for (size_t i = 1; i < y1.size(); ++i) EXPECT_EQ(std::memcmp(&y1[i], &y1[0], 4), 0) << "lane " << i;
}

// Softmax weights: exp(x - m) within 4 ulp of exp in double wherever the value
// sits in the row (16 lanes and a tail), including arguments near 0 and far
// below (where exp underflows), and the returned sum matches.
TEST(VecExpShift, WithinFourUlpsOfExpAndSumsThem) {
  for (int64_t n : {int64_t(1000), int64_t(37), int64_t(3)}) {
    std::vector<float> x = random_floats(size_t(n), 51, 60.0f);
    for (float& v : x) v -= 50.0f;  // [-110, 10]
    const float edge[] = {0.0f, -1e-7f, -0.6931f, -87.0f, -103.9f, -104.0f, -120.0f};
    for (size_t i = 0; i < std::size(edge) && i < size_t(n); ++i) x[i] = edge[i] + 10.0f;
    std::vector<float> y = x;
    const float sum = vec::exp_shift(y.data(), n, 10.0f);
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(x[size_t(i)] - 10.0f));  // the difference taken in float, as defined
      want_sum += want;
      ASSERT_LE(std::fabs(double(y[size_t(i)]) - want), 4.0 * want * 0x1p-24 + 2e-45)
          << "exp(" << x[size_t(i)] << " - 10) at " << i << " of " << n;
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << n;
  }
}

// The small GEMMs of the MLA kernel against sums in double, on shapes that
// leave every remainder (rows past the 4- and 8-row blocks, an odd column of B,
// a k and an n past the 16-lane steps) and leading dimensions wider than the rows.
TEST(VecGemm, SmallProductsMatchDoubleSums) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{11, 21, 37}, {16, 16, 512}, {1, 3, 5}, {9, 1, 16}}) {
    const int64_t lda = k + 3, ldb = k + 5, ldc = n + 2;
    const std::vector<float> a = random_floats(size_t(m * lda), 61), b = random_floats(size_t(n * ldb), 62);
    const std::vector<float> c0 = random_floats(size_t(m * ldc), 63), scale = random_floats(size_t(m), 64);
    for (bool acc : {false, true}) {
      std::vector<float> c = c0;
      vec::gemm_nt(a.data(), lda, b.data(), ldb, c.data(), ldc, m, n, k, acc);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          double want = j < n && acc ? c0[size_t(i * ldc + j)] : (j < n ? 0.0 : c0[size_t(i * ldc + j)]);
          for (int64_t l = 0; j < n && l < k; ++l) want += double(a[size_t(i * lda + l)]) * b[size_t(j * ldb + l)];
          ASSERT_NEAR(c[size_t(i * ldc + j)], want, 1e-5 * (1 + std::sqrt(double(k))))
              << "gemm_nt " << m << "x" << n << "x" << k << " acc " << acc << " at " << i << "," << j;
        }
    }
    // gemm_nn: A [m][k] (lda), B [k][n] (ldb = n + 5), C [m][n] scaled per row.
    const int64_t ldb2 = n + 5;
    const std::vector<float> b2 = random_floats(size_t(k * ldb2), 65);
    for (const float* sc : {static_cast<const float*>(nullptr), scale.data()}) {
      std::vector<float> c = c0;
      vec::gemm_nn(a.data(), lda, b2.data(), ldb2, c.data(), ldc, m, n, k, sc);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          double want = c0[size_t(i * ldc + j)];
          if (j < n) {
            if (sc) want *= sc[i];
            for (int64_t l = 0; l < k; ++l) want += double(a[size_t(i * lda + l)]) * b2[size_t(l * ldb2 + j)];
          }
          ASSERT_NEAR(c[size_t(i * ldc + j)], want, 1e-5 * (1 + std::sqrt(double(k))))
              << "gemm_nn " << m << "x" << n << "x" << k << " scaled " << (sc != nullptr) << " at " << i << "," << j;
        }
    }
  }
}

// vec::dequant's vector decoders give the reference decoder's floats bit for
// bit, every type (those without a vector decoder fall back), over rows of
// several blocks of random bits (every nibble, sign and scale pattern shows up).
TEST(VecDequant, BitEqualToReferenceDecoderForEveryType) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::IQ4_XS, GgmlType::Q5_K, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const TypeTraits& tt = type_traits(t);
    const int64_t n = 7 * 256;  // 7 super-blocks, 56 legacy blocks
    std::vector<uint8_t> row(size_t(tt.row_bytes(n)));
    SplitMix64 rng(uint64_t(t) + 5);
    fill_random_blocks(t, row.data(), row.size(), rng, 0.0f, 2.0f);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
    tt.dequant_row(row.data(), want.data(), n);
    vec::dequant(t, row.data(), got.data(), n);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&got[size_t(i)], &want[size_t(i)], 4), 0)
          << type_name(t) << " value " << i << ": " << got[size_t(i)] << " vs " << want[size_t(i)];
      nonzero += want[size_t(i)] != 0.0f;
    }
    EXPECT_GT(nonzero, n / 2) << type_name(t);
  }
}

// Experts split between two holders (profile-guided placement: hot experts on
// the GPU, the rest on the CPU): one call holds a gathered subset of the
// slices, the other the whole tensor with the subset's slots -1. The two
// partial sums add up to the whole, in every implementation.
TEST(FastMoe, ExpertSlotsAndChoicesSplitSumsToWhole) {
  const int64_t n_embd = 256, n_ff = 256, n_expert = 8, n_used = 3, n = 7;
  const Tensor g = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 21, "gate");
  const Tensor u = random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, 22, "up");
  const Tensor d = random_weight(GgmlType::Q8_0, {n_ff, n_embd, n_expert}, 23, "down");
  const std::vector<int32_t> hot = {5, 1, 6};  // the subset, in the order its holder stores it
  auto gather = [&](const Tensor& t) {
    Tensor s = t;
    s.bytes.clear();
    for (int32_t e : hot) s.bytes.insert(s.bytes.end(), t.bytes.begin() + e * t.view.nb[2], t.bytes.begin() + (e + 1) * t.view.nb[2]);
    s.view.data = s.view.host = s.bytes.data();
    s.view.ne[2] = int64_t(hot.size());
    s.view.nb[3] = s.view.nb[2] * hot.size();
    return s;
  };
  const Tensor gs = gather(g), us = gather(u), ds = gather(d);
  const std::vector<float> x = random_floats(size_t(n * n_embd), 24);
  std::vector<float> ids(size_t(n * n_used)), wts = random_floats(size_t(n * n_used), 25);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < n_used; ++k) {
      const int32_t e = int32_t((t * 5 + k * 3) % n_expert);
      std::memcpy(&ids[size_t(t * n_used + k)], &e, 4);
    }
  Param hot_slots, cold_slots;
  hot_slots.key = cold_slots.key = "expert_slots";
  for (int32_t e = 0; e < n_expert; ++e) {
    const auto it = std::find(hot.begin(), hot.end(), e);
    hot_slots.ints.push_back(it == hot.end() ? -1 : int64_t(it - hot.begin()));
    cold_slots.ints.push_back(it == hot.end() ? e : -1);
  }
  auto make = [&](Impl impl, std::vector<WeightView> w, std::vector<Param> params) {
    return moe_experts_call(impl, std::move(w), std::move(params), x, ids, wts, n_embd, n_used, n);
  };
  const StepData sd = one_sequence(n);
  auto whole = make(Impl::Reference, {g.view, u.view, d.view}, {});
  whole->run(sd.step(), n);
  for (Impl impl : {Impl::Reference, Impl::Fast}) {
    auto a = make(impl, {gs.view, us.view, ds.view}, {hot_slots});
    auto b = make(impl, {g.view, u.view, d.view}, {cold_slots});
    a->run(sd.step(), n);
    b->run(sd.step(), n);
    std::vector<float> sum(size_t(n * n_embd));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = a->out[0][i] + b->out[0][i];
    for (int64_t t = 0; t < n; ++t)
      EXPECT_LE(rel_l2(sum.data() + t * n_embd, whole->out[0].data() + t * n_embd, size_t(n_embd)), 1e-5)
          << (impl == Impl::Fast ? "fast" : "reference") << ", token " << t;
    // Each part alone is a real share of the whole, not zeros or all of it.
    EXPECT_GT(rel_l2(a->out[0].data(), whole->out[0].data(), size_t(n * n_embd)), 0.05);
    EXPECT_GT(rel_l2(b->out[0].data(), whole->out[0].data(), size_t(n * n_embd)), 0.05);
  }
  // Deferral's split of each token's choices: the first two now, the third
  // later; the parts add up to the whole, and a bad range is refused.
  for (Impl impl : {Impl::Reference, Impl::Fast}) {
    Param now, later;
    now.key = later.key = "choices";
    now.ints = {0, 2};
    later.ints = {2, 3};
    auto a = make(impl, {g.view, u.view, d.view}, {now});
    auto b = make(impl, {g.view, u.view, d.view}, {later});
    a->run(sd.step(), n);
    b->run(sd.step(), n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> sum(size_t(n_embd), 0.0f);
      for (int64_t i = 0; i < n_embd; ++i) sum[size_t(i)] = a->out[0][size_t(t * n_embd + i)] + b->out[0][size_t(t * n_embd + i)];
      EXPECT_LE(rel_l2(sum.data(), whole->out[0].data() + t * n_embd, size_t(n_embd)), 1e-5)
          << (impl == Impl::Fast ? "fast" : "reference") << " choices, token " << t;
    }
    EXPECT_GT(rel_l2(b->out[0].data(), whole->out[0].data(), size_t(n * n_embd)), 0.05);
  }
  // Parts outside the call's weights or choices are refused at bind, by name.
  auto refused = [&](std::vector<WeightView> w, Param p) {
    auto c = std::make_unique<Call>("cpu.moe_experts", Impl::Fast, Rounding::GgmlCpu);
    c->spec.weights = std::move(w);
    c->spec.params = {p};
    c->add_in(GgmlType::F32, n_embd, n, x);
    c->add_in(GgmlType::I32, n_used, n, ids);
    c->add_in(GgmlType::F32, n_used, n, wts);
    c->add_out(GgmlType::F32, n_embd, n);
    EXPECT_FALSE(c->bind());
    EXPECT_NE(c->error.find(p.key), std::string::npos) << c->error;
  };
  Param bad_choices;
  bad_choices.key = "choices";
  bad_choices.ints = {2, 4};  // past n_used
  refused({g.view, u.view, d.view}, bad_choices);
  Param bad_slot = hot_slots;
  bad_slot.ints[0] = 3;  // the subset holds 3 slices: 0..2
  refused({gs.view, us.view, ds.view}, bad_slot);
}

// ---- elementwise ------------------------------------------------------------------

// silu_mul splits one row's values over threads: each value computed once, as
// the one-piece vector loop computes it (its bits do not depend on where a
// value sits), whatever the rows and the split.
TEST(SiluMul, SplitsValuesExactly) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 10944}, {1, 2816}, {3, 1409}, {1, 100}, {5, 7}}) {
    const std::vector<float> g = random_floats(size_t(rows * cols), 31, 6.0f), u = random_floats(size_t(rows * cols), 32);
    Call c("cpu.silu_mul", Impl::Fast, Rounding::GgmlCpu);
    c.add_in(GgmlType::F32, cols, rows, g);
    c.add_in(GgmlType::F32, cols, rows, u);
    c.add_out(GgmlType::F32, cols, rows);
    ASSERT_TRUE(c.bind()) << c.error;
    const StepData sd = one_sequence(rows);
    c.run(sd.step(), rows);
    std::vector<float> want(size_t(rows * cols));
    vec::silu_mul(g.data(), u.data(), rows * cols, want.data());
    EXPECT_EQ(std::memcmp(c.out[0].data(), want.data(), want.size() * sizeof(float)), 0) << rows << "x" << cols;
  }
}

// ---- MoE router --------------------------------------------------------------------

// A decoding token's router product is split by blocks of experts over the
// threads; a batch splits by tokens. Both give every token the same logits,
// hence the same choices and weights, bit for bit.
TEST(MoeGate, ExpertBlocksGiveWhatTokensGive) {
  const int64_t n_embd = 256, ne = 64, nu = 6, n = 2;
  const Tensor gate = random_weight(GgmlType::F32, {n_embd, ne}, 41, "gate");
  const std::vector<float> x = random_floats(size_t(n * n_embd), 42);
  auto run = [&](int64_t rows, const float* data) {
    Call c("cpu.moe_gate", Impl::Fast, Rounding::GgmlCpu);
    c.spec.weights = {gate.view};
    auto ip = [](const char* k, int64_t v) {
      Param p;
      p.key = k;
      p.i = v;
      return p;
    };
    c.spec.params = {ip("n_used", nu), ip("gating", 1), ip("norm", 1)};
    c.add_in(GgmlType::F32, n_embd, rows, std::vector<float>(data, data + rows * n_embd));
    c.add_out(GgmlType::I32, nu, rows);
    c.add_out(GgmlType::F32, nu, rows);
    EXPECT_TRUE(c.bind()) << c.error;
    const StepData sd = one_sequence(rows);
    c.run(sd.step(), rows);
    return std::make_pair(c.out[0], c.out[1]);
  };
  const auto batch = run(n, x.data());  // two tokens on two threads: one each
  for (int64_t t = 0; t < n; ++t) {
    const auto alone = run(1, x.data() + t * n_embd);  // one token: experts split in two blocks
    EXPECT_EQ(std::memcmp(alone.first.data(), batch.first.data() + t * nu, size_t(nu) * 4), 0) << "ids, token " << t;
    EXPECT_EQ(std::memcmp(alone.second.data(), batch.second.data() + t * nu, size_t(nu) * 4), 0) << "weights, token " << t;
  }
}

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
      // A cache of two slots filled with random latents and rope keys.
      const size_t es = type_traits(cache_type).type_size;
      std::vector<uint8_t> kc(size_t(2 * n_ctx * r) * es), vc(size_t(2 * n_ctx * dr) * es);
      SplitMix64 rng(13);
      fill_random_blocks(cache_type, kc.data(), kc.size(), rng, 0.0f, 1.0f);
      fill_random_blocks(cache_type, vc.data(), vc.size(), rng, 0.0f, 1.0f);
      KvView kv{KvView::Kind::MlaLatent, cache_type, 2, n_ctx, 1, r, dr, kc.data(), vc.data()};
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
      const size_t es = type_traits(cache_type).type_size;
      std::vector<uint8_t> kc(size_t(2 * n_ctx * r) * es), vc(size_t(2 * n_ctx * dr) * es);
      SplitMix64 rng(13);
      fill_random_blocks(cache_type, kc.data(), kc.size(), rng, 0.0f, 1.0f);
      fill_random_blocks(cache_type, vc.data(), vc.size(), rng, 0.0f, 1.0f);
      KvView kv{KvView::Kind::MlaLatent, cache_type, 2, n_ctx, 1, r, dr, kc.data(), vc.data()};
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
