// The CPU MoE kernels (cpu.moe_experts, cpu.moe_gate) bound as the executor
// binds them, against the reference kernels on random inputs: batch 1 and
// more, many tokens per expert, BF16 experts, experts split between holders,
// and the router's split over threads.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_i8.h"
#include "kernels/cpu/matmul_q.h"
#include "test/unit/cpu_kernel_call.h"

namespace kt::kern {
namespace {

using namespace cpu_test;

// ---- MoE experts -------------------------------------------------------------

// cpu.moe_experts over n tokens of x with their routing (ids as I32 bits in floats, weights).
std::unique_ptr<Call> moe_experts_call(Impl impl, std::vector<WeightView> w, std::vector<Param> params,
                                       const std::vector<float>& x, const std::vector<float>& ids,
                                       const std::vector<float>& wts, int64_t n_embd, int64_t n_used, int64_t n,
                                       std::string* error = nullptr) {
  auto c = std::make_unique<Call>("cpu.moe_experts", impl, Rounding::GgmlCpu);
  c->spec.weights = std::move(w);
  c->spec.params = std::move(params);
  c->add_in(GgmlType::F32, n_embd, n, x);
  c->add_in(GgmlType::I32, n_used, n, ids);
  c->add_in(GgmlType::F32, n_used, n, wts);
  c->add_out(GgmlType::F32, n_embd, n);
  if (error) {  // a bind expected to fail
    if (c->bind()) return c;
    *error = c->error;
    return nullptr;
  }
  EXPECT_TRUE(c->bind()) << c->error;
  return c;
}

// A layer's routed experts: Q4_K gate and up, `down` as given, random blocks
// from seeds seed, seed + 1, seed + 2.
struct Experts {
  Tensor g, u, d;
};
Experts random_experts(GgmlType down, int64_t n_embd, int64_t n_ff, int64_t n_expert, uint64_t seed) {
  return {random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, seed, "gate"),
          random_weight(GgmlType::Q4_K, {n_embd, n_ff, n_expert}, seed + 1, "up"),
          random_weight(down, {n_ff, n_embd, n_expert}, seed + 2, "down")};
}

TEST(FastMoe, MatchesReferenceAndIsBatchInvariant) {
  const int64_t n_embd = 256, n_ff = 512, n_expert = 8, n_used = 3, n = 11;
  const auto [g, u, d] = random_experts(GgmlType::Q6_K, n_embd, n_ff, n_expert, 1);
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
  const auto [g, u, d] = random_experts(GgmlType::Q8_0, n_embd, n_ff, n_expert, 31);
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
  const auto [g, u, d] = random_experts(GgmlType::Q5_0, n_embd, n_ff, n_expert, 61);
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

// A 3-D weight repacked to int8 or int4 as the runtime repacks it for a plan
// whose layout says "int8" or "int4": the repacked bytes at data, the file's
// still at host.
struct Repacked {
  std::vector<uint8_t> buf;
  WeightView view;
};
Repacked repack(const Tensor& t, cpu::WeightBits bits = cpu::WeightBits::Int8) {
  Repacked r;
  const WeightView& v = t.view;
  const size_t mb = cpu::i8_matrix_bytes(v.ne[0], v.ne[1], bits);
  r.buf.resize(mb * size_t(v.ne[2]) + 64);
  uint8_t* p = r.buf.data() + (64 - reinterpret_cast<uintptr_t>(r.buf.data()) % 64) % 64;
  cpu::repack_i8_matrices(v.type, v.data, v.nb[1], v.nb[2], v.ne[0], v.ne[1], v.ne[2], p, 2, bits);
  r.view = v;
  r.view.data = p;
  r.view.layout = bits == cpu::WeightBits::Int4 ? WeightLayout::Int4 : WeightLayout::Int8;
  return r;
}

// KTransformers' AMXInt8 / AMXInt4: experts repacked to int8 / int4 at load.
// The fast operator (VNNI, AMX tiles from 8 rows of an expert, scalar) against
// the reference with Int8 / Int4 rounding (from the file's bytes), at decode
// (1 token) and for a step whose experts take 1 to 30 rows, with a down matrix
// whose rows (288) end in a short chunk. Neither is ggml's rounding: the two
// differ by far more than the bound. The 200- and 40-token steps take gate,
// up, the SwiGLU and its rounding in one item per (block of an expert's rows,
// chunk of 256 n_ff outputs) (glu_rounded; the 200-token step's expert 0 has
// 187 rows, two blocks of 96 and 91), decode the items of 64 outputs through h: both
// forms are held here. Int4 is held to int8's bound: the
// reference rounds each chunk with the same quantize_chunk_i4 the repacking
// calls, so both sum the same integers and differ by float order alone.
void check_repacked_experts(cpu::WeightBits bits) {
  const char* name = bits == cpu::WeightBits::Int4 ? "int4" : "int8";
  const int64_t n_embd = 512, n_ff = 288, n_expert = 4, n_used = 2, n = 200;
  const auto [g, u, d] = random_experts(GgmlType::Q5_0, n_embd, n_ff, n_expert, 71);
  const Repacked gi = repack(g, bits), ui = repack(u, bits), di = repack(d, bits);
  const std::vector<float> x = random_floats(size_t(n * n_embd), 74);
  std::vector<float> ids(size_t(n * n_used)), wts = random_floats(size_t(n * n_used), 75);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < n_used; ++k) {
      int32_t e = int32_t((t + k * (1 + t % 2)) % 3);
      if (t == 7 && k == 1) e = 3;                // one row of expert 3
      if (t >= 40) e = k == 0 ? 0 : 1 + t % 2;    // expert 0: 187 rows of 200 tokens
      std::memcpy(&ids[size_t(t * n_used + k)], &e, 4);
    }
  for (int64_t steps : {n, int64_t(40), int64_t(1)}) {
    auto make = [&](Impl impl, bool repacked) {
      return moe_experts_call(impl, repacked ? std::vector<WeightView>{gi.view, ui.view, di.view}
                                             : std::vector<WeightView>{g.view, u.view, d.view},
                              {}, x, ids, wts, n_embd, n_used, steps);
    };
    const StepData sd = one_sequence(steps);
    auto fast = make(Impl::Fast, true), ref = make(Impl::Reference, true), ggml = make(Impl::Reference, false);
    ASSERT_NE(fast->kernel->impl().find(name), std::string_view::npos) << fast->kernel->impl();
    fast->run(sd.step(), steps);
    ref->run(sd.step(), steps);
    ggml->run(sd.step(), steps);
    double worst = 0, least_apart = 1;
    for (int64_t t = 0; t < steps; ++t) {
      const float* f = fast->out[0].data() + t * n_embd;
      const double e = rel_l2(f, ref->out[0].data() + t * n_embd, size_t(n_embd));
      EXPECT_LE(e, 1e-6) << "token " << t << " of " << steps;
      worst = std::max(worst, e);
      const double apart = rel_l2(f, ggml->out[0].data() + t * n_embd, size_t(n_embd));
      EXPECT_GT(apart, 1e-5) << "token " << t;
      least_apart = std::min(least_apart, apart);
    }
    std::printf("  %lld tokens (%s): worst rel_l2 to the reference %.2e (bound 1e-6); %s and ggml's rounding at "
                "least %.2e apart\n",
                (long long)steps, std::string(fast->kernel->impl()).c_str(), worst, name, least_apart);
  }
}

TEST(FastMoe, Int8ExpertsMatchReference) { check_repacked_experts(cpu::WeightBits::Int8); }
TEST(FastMoe, Int4ExpertsMatchReference) { check_repacked_experts(cpu::WeightBits::Int4); }

// A repacked expert weight (its first matrix) given to cpu.matmul, which
// reads only the file's layout: the bind fails with `want` in its message.
void expect_matmul_refuses(WeightView w, const std::vector<float>& x, const std::string& want) {
  Call mm("cpu.matmul", Impl::Fast, Rounding::GgmlCpu);
  w.ne[2] = 1;
  mm.spec.weights = {w};
  mm.add_in(GgmlType::F32, w.ne[0], 1, x);
  mm.add_out(GgmlType::F32, w.ne[1], 1);
  EXPECT_FALSE(mm.bind());
  EXPECT_NE(mm.error.find(want), std::string::npos) << mm.error;
}

// Only some of the three repacked, or repacked with bf16_rows, fails the bind
// with a message; so does a repacked weight given to a kernel that does not
// read the layout.
TEST(FastMoe, Int8LayoutChecked) {
  const auto [g, u, d] = random_experts(GgmlType::Q4_K, 256, 256, 2, 3);
  const Repacked gi = repack(g), ui = repack(u), di = repack(d);
  const std::vector<float> x = random_floats(256, 4), ids(2, 0.0f), wts(2, 0.5f);
  Param rows;
  rows.key = "bf16_rows";
  rows.i = 32;
  std::string error;
  EXPECT_FALSE(moe_experts_call(Impl::Fast, {gi.view, u.view, di.view}, {}, x, ids, wts, 256, 2, 1, &error));
  EXPECT_NE(error.find("one and not the other"), std::string::npos) << error;
  EXPECT_FALSE(moe_experts_call(Impl::Fast, {gi.view, ui.view, di.view}, {rows}, x, ids, wts, 256, 2, 1, &error));
  EXPECT_NE(error.find("take no bf16_rows"), std::string::npos) << error;
  expect_matmul_refuses(gi.view, x, "is repacked to int8, which cpu.matmul does not read");
}

// The same for int4, and int8 and int4 mixed in one call (one operator reads
// all three one way); each message names the layout it saw.
TEST(FastMoe, Int4LayoutChecked) {
  const auto [g, u, d] = random_experts(GgmlType::Q4_K, 256, 256, 2, 3);
  const Repacked gi = repack(g, cpu::WeightBits::Int4), ui = repack(u, cpu::WeightBits::Int4),
                 di = repack(d, cpu::WeightBits::Int4), u8 = repack(u);
  const std::vector<float> x = random_floats(256, 4), ids(2, 0.0f), wts(2, 0.5f);
  Param rows;
  rows.key = "bf16_rows";
  rows.i = 32;
  std::string error;
  EXPECT_FALSE(moe_experts_call(Impl::Fast, {g.view, ui.view, d.view}, {}, x, ids, wts, 256, 2, 1, &error));
  EXPECT_NE(error.find("repacked to int4 one and not the other"), std::string::npos) << error;
  EXPECT_FALSE(moe_experts_call(Impl::Fast, {gi.view, u8.view, di.view}, {}, x, ids, wts, 256, 2, 1, &error));
  EXPECT_NE(error.find("repacked to int4 one and to int8 the other"), std::string::npos) << error;
  EXPECT_FALSE(moe_experts_call(Impl::Reference, {gi.view, ui.view, di.view}, {rows}, x, ids, wts, 256, 2, 1, &error));
  EXPECT_NE(error.find("repacked to int4 take no bf16_rows"), std::string::npos) << error;
  expect_matmul_refuses(gi.view, x, "is repacked to int4, which cpu.matmul does not read");
}

// cpu.silu_mul's fast path (float, AVX-512 where the CPU has it) against the
// reference's double, over ordinary values, tiny and huge ones (past exp's
// float range silu is -0 and g; the reference's tiny values there, ~1e-37,
// count as 0) and row lengths that leave a tail; an
// element's bits do not depend on its position in the row.

TEST(FastMoe, ExpertSlotsAndChoicesSplitSumsToWhole) {
  const int64_t n_embd = 256, n_ff = 256, n_expert = 8, n_used = 3, n = 7;
  const auto [g, u, d] = random_experts(GgmlType::Q8_0, n_embd, n_ff, n_expert, 21);
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

// ---- MoE router --------------------------------------------------------------------

// A decoding token's router product is split by blocks of experts over the
// threads; a batch splits by tokens, a prompt by runs of up to 8 tokens (here
// 19 tokens on the test pool's threads). All give every token the same
// logits, hence the same choices and weights, bit for bit.
TEST(MoeGate, ExpertBlocksGiveWhatTokensGive) {
  const int64_t n_embd = 256, ne = 64, nu = 6, n = 19;
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
  const auto batch = run(n, x.data());
  for (int64_t t = 0; t < n; ++t) {
    const auto alone = run(1, x.data() + t * n_embd);  // one token: experts split in two blocks
    EXPECT_EQ(std::memcmp(alone.first.data(), batch.first.data() + t * nu, size_t(nu) * 4), 0) << "ids, token " << t;
    EXPECT_EQ(std::memcmp(alone.second.data(), batch.second.data() + t * nu, size_t(nu) * 4), 0) << "weights, token " << t;
  }
}

}  // namespace
}  // namespace kt::kern
