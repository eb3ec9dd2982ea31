// The plan-callable CPU kernels (kernels/cpu/cpu_kernels*.cpp) bound as the
// executor binds them: every fast path against the reference kernels on random
// inputs (never zeros), odd shapes, batch 1 and more, several sequences in one
// step; and batch invariance — a token's output does not depend on which other
// tokens share its step, which continuous batching relies on.
// Matmuls and the vector helpers here; MoE in cpu_moe_kernels_test.cpp, MLA in
// cpu_mla_kernels_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/vec_f32.h"
#include "test/unit/cpu_kernel_call.h"

namespace kt::kern {
namespace {

using namespace cpu_test;

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
                                         MatmulCase{GgmlType::F32, 64, 4096, 2}, MatmulCase{GgmlType::F32, 64, 300, 13},
                                         MatmulCase{GgmlType::BF16, 64, 50, 9}),
                         [](const auto& info) {
                           return std::string(type_name(info.param.type)) + "_" + std::to_string(info.param.rows);
                         });

// A cpu.matmul param that switches steps of at least 20 rows to another
// arithmetic (bf16_rows, int8_rows): a step that long computes it, fast and
// reference alike (within `tol`, with a bias), far from ggml's rounding; a
// shorter one as without the param, bit for bit. Returns the fast impl.
std::string check_long_steps_switch(const char* key, GgmlType type, int64_t n_in, double tol) {
  const int64_t n_out = 150;  // two whole blocks of 64 rows and a partial one
  const Tensor w = random_weight(type, {n_in, n_out}, 17, "w");
  const Tensor b = random_weight(GgmlType::F32, {n_out}, 19, "bias");
  const std::vector<float> x = random_floats(size_t(40 * n_in), 18);
  Param p;
  p.key = key;
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
  std::string impl;
  for (int64_t rows : {int64_t(19), int64_t(40)}) {
    auto fast = run(Impl::Fast, rows, {p}), ref = run(Impl::Reference, rows, {p});
    auto ggml = run(Impl::Fast, rows, {});
    impl = std::string(fast->kernel->impl());
    for (int64_t r = 0; r < rows; ++r) {
      const float* f = fast->out[0].data() + r * n_out;
      EXPECT_LE(rel_l2(f, ref->out[0].data() + r * n_out, size_t(n_out)), tol)
          << key << ", " << rows << " rows, row " << r;
      if (rows < 20)
        EXPECT_EQ(std::memcmp(f, ggml->out[0].data() + r * n_out, size_t(n_out) * 4), 0) << key << ", row " << r;
      else
        EXPECT_GT(rel_l2(f, ggml->out[0].data() + r * n_out, size_t(n_out)), 1e-4)
            << key << ", row " << r << ": as ggml";
    }
  }
  return impl;
}

TEST(FastMatmul, Bf16RowsSwitchesLongStepsToBf16) {
  if (!cpu::matmul_bf16_available(GgmlType::Q4_K)) GTEST_SKIP() << "no AVX-512 here: the reference runs";
  EXPECT_NE(check_long_steps_switch("bf16_rows", GgmlType::Q4_K, 512, 1e-5), "reference");
}

// int8_rows (KTransformers' AMXInt8 on a linear layer): W requantized to int8
// per call, 64 rows at a time (n_in 1408: a short last chunk). Not together
// with bf16_rows.
TEST(FastMatmul, Int8RowsSwitchesLongStepsToInt8) {
  const std::string impl = check_long_steps_switch("int8_rows", GgmlType::Q5_0, 1408, 1e-6);
  EXPECT_NE(impl.find("int8"), std::string::npos) << impl;
  const Tensor w = random_weight(GgmlType::Q5_0, {256, 16}, 27, "w");
  Param a, b;
  a.key = "int8_rows";
  b.key = "bf16_rows";
  a.i = b.i = 20;
  Call call("cpu.matmul", Impl::Fast, Rounding::GgmlCpu);
  call.spec.weights = {w.view};
  call.spec.params = {a, b};
  call.add_in(GgmlType::F32, 256, 1, std::vector<float>(256, 0.5f));
  call.add_out(GgmlType::F32, 16, 1);
  EXPECT_FALSE(call.bind());
  EXPECT_NE(call.error.find("exclude each other"), std::string::npos) << call.error;
}

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

// The greedy pick: the index a scalar loop keeping the first x[i] > best gives,
// wherever the maximum sits (each of 16 lanes, the four running vectors, the
// tail), with ties (the lowest index wins), +0 against -0, and all -inf.
TEST(VecArgmax, FirstOfTheLargestAsTheScalarLoop) {
  auto scalar = [](const std::vector<float>& x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[size_t(i)] > x[size_t(best)]) best = i;
    return best;
  };
  for (int64_t n : {int64_t(1), int64_t(5), int64_t(16), int64_t(17), int64_t(63), int64_t(64), int64_t(65),
                    int64_t(200), int64_t(102400)}) {
    std::vector<float> x = random_floats(size_t(n), 71, 30.0f);
    ASSERT_EQ(vec::argmax(x.data(), n), scalar(x, n)) << "random, n " << n;
    for (int64_t at : {int64_t(0), n / 3, n - 1, n / 2 + 1}) {
      if (at >= n) continue;
      std::vector<float> y = x;
      y[size_t(at)] = 100.0f;
      ASSERT_EQ(vec::argmax(y.data(), n), at) << "max at " << at << " of " << n;
      if (at + 7 < n) y[size_t(at + 7)] = 100.0f;  // a tie after it: still the first
      ASSERT_EQ(vec::argmax(y.data(), n), at) << "tie after " << at << " of " << n;
    }
    std::vector<float> z(size_t(n), -0.0f);
    if (n > 2) z[size_t(n - 2)] = 0.0f;  // equal to -0: the first -0 stays
    ASSERT_EQ(vec::argmax(z.data(), n), scalar(z, n)) << "zeros, n " << n;
    std::vector<float> inf(size_t(n), -INFINITY);
    ASSERT_EQ(vec::argmax(inf.data(), n), 0) << "-inf, n " << n;
  }
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

// add_rms_norm (kt-fuse-calls' join of a residual sum and the norm after it)
// writes what cpu.add then cpu.rms_norm write, bit for bit, both outputs.
TEST(AddRmsNorm, EqualsAddThenRmsNorm) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 2048}, {7, 2048}, {3, 100}, {1, 7168}}) {
    const std::vector<float> x = random_floats(size_t(rows * cols), 41, 3.0f), r = random_floats(size_t(rows * cols), 42);
    Tensor w = random_weight(GgmlType::F32, {cols}, 43, "norm");
    Param eps;
    eps.key = "eps";
    eps.f = 1e-6;
    const StepData sd = one_sequence(rows);
    Call fused("cpu.add_rms_norm", Impl::Fast, Rounding::GgmlCpu);
    fused.add_in(GgmlType::F32, cols, rows, x);
    fused.add_in(GgmlType::F32, cols, rows, r);
    fused.add_out(GgmlType::F32, cols, rows);
    fused.add_out(GgmlType::F32, cols, rows);
    fused.spec.weights = {w.view};
    fused.spec.params = {eps};
    ASSERT_TRUE(fused.bind()) << fused.error;
    fused.run(sd.step(), rows);
    Call add("cpu.add", Impl::Fast, Rounding::GgmlCpu);
    add.add_in(GgmlType::F32, cols, rows, x);
    add.add_in(GgmlType::F32, cols, rows, r);
    add.add_out(GgmlType::F32, cols, rows);
    ASSERT_TRUE(add.bind()) << add.error;
    add.run(sd.step(), rows);
    Call norm("cpu.rms_norm", Impl::Fast, Rounding::GgmlCpu);
    norm.add_in(GgmlType::F32, cols, rows, add.out[0]);
    norm.add_out(GgmlType::F32, cols, rows);
    norm.spec.weights = {w.view};
    norm.spec.params = {eps};
    ASSERT_TRUE(norm.bind()) << norm.error;
    norm.run(sd.step(), rows);
    const size_t bytes = size_t(rows * cols) * sizeof(float);
    EXPECT_EQ(std::memcmp(fused.out[0].data(), add.out[0].data(), bytes), 0) << rows << "x" << cols << ": the sum";
    EXPECT_EQ(std::memcmp(fused.out[1].data(), norm.out[0].data(), bytes), 0) << rows << "x" << cols << ": the norm";
    EXPECT_GT(rel_l2(fused.out[1].data(), x.data(), size_t(rows * cols)), 0.1) << "the norm is not its input";
  }
}

// cpu.rms_norm runs eight rows' sums side by side: each output is ref::rms_norm's,
// bit for bit, for whole runs of eight rows, the rows past them and groups of a
// row (Qwen3's per-head norms).
TEST(RmsNorm, EightRowsAtATimeAreTheReference) {
  for (const auto& [rows, cols, group] : {std::tuple<int64_t, int64_t, int64_t>{19, 2048, 2048}, {16, 100, 100},
                                         {5, 512, 128}, {3, 7168, 7168}}) {
    const std::vector<float> x = random_floats(size_t(rows * cols), 44, 3.0f);
    Tensor w = random_weight(GgmlType::F32, {group}, 45, "norm");
    Param eps, grp;
    eps.key = "eps";
    eps.f = 1e-6;
    grp.key = "group";
    grp.i = group;
    Call norm("cpu.rms_norm", Impl::Fast, Rounding::GgmlCpu);
    norm.add_in(GgmlType::F32, cols, rows, x);
    norm.add_out(GgmlType::F32, cols, rows);
    norm.spec.weights = {w.view};
    norm.spec.params = {eps, grp};
    ASSERT_TRUE(norm.bind()) << norm.error;
    norm.run(one_sequence(rows).step(), rows);
    std::vector<float> want(size_t(rows * cols));
    kt::cpu::ref::rms_norm(x.data(), w.view.f32(), group, rows * cols / group, float(eps.f), want.data());
    EXPECT_EQ(std::memcmp(norm.out[0].data(), want.data(), want.size() * sizeof(float)), 0)
        << rows << "x" << cols << ", groups of " << group;
    EXPECT_GT(rel_l2(norm.out[0].data(), x.data(), size_t(rows * cols)), 0.1) << "the norm is not its input";
  }
}

// A weight of the wrong width is refused at bind, naming it.
TEST(AddRmsNorm, RefusesAWeightOfAnotherWidth) {
  Tensor w = random_weight(GgmlType::F32, {64}, 44, "blk.0.ffn_norm.weight");
  Param eps;
  eps.key = "eps";
  eps.f = 1e-6;
  Call c("cpu.add_rms_norm", Impl::Fast, Rounding::GgmlCpu);
  c.add_in(GgmlType::F32, 128, 1, random_floats(128, 45));
  c.add_in(GgmlType::F32, 128, 1, random_floats(128, 46));
  c.add_out(GgmlType::F32, 128, 1);
  c.add_out(GgmlType::F32, 128, 1);
  c.spec.weights = {w.view};
  c.spec.params = {eps};
  EXPECT_FALSE(c.bind());
  EXPECT_NE(c.error.find("blk.0.ffn_norm.weight"), std::string::npos) << c.error;
}

}  // namespace
}  // namespace kt::kern
