// matmul_q (kernels/cpu/matmul_q.h) against the reference matmul with llama.cpp's
// CPU activation rounding, at every ISA level this CPU has (lowered through
// set_isa_limit; a level the CPU lacks is skipped, saying so).
//
// The bound. The reference sums exact products of the decoded weights and the
// rounded activations in double. The fast kernels compute each block's (or
// sub-block's) integer dot product exactly, then scale and add in float: every
// float operation rounds with relative error <= u = 2^-24, so a sum that went
// through m float additions is off by at most m * u times the magnitudes it
// added, sum_i |w_i x_i| (the min and offset terms of Q4_K/Q5_K/Q6_K, split off
// from the weights, add terms of the same order). The integer kernels' longest
// chains are a 16-lane accumulator over n_in / 256 (k-quants) or n_in / 64
// (32-value types) blocks plus the 16-lane sum: under 100 roundings at n_in = 4096,
// 6e-6 < 1e-5. The float kernels (F32/F16/BF16 beside several activation rows)
// add n_in / 16 products per lane (n_in / 8 with AVX2), 256 at 4096: a worst case
// of 1.5e-5 that needs every rounding to fall the same way; random ones reach
// about sqrt(256) * u = 1e-6.
// Measured worst over all types and levels: 1.4e-7, so 1e-5 leaves room while any
// real error (one wrong block moves a sum by ~1e-2 of it) fails by far.
#include "kernels/cpu/matmul_q.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/random_blocks.h"
#include "kernels/type_traits.h"
#include "test/unit/quant_test_inputs.h"

namespace {

using kt::GgmlType;
using kt::SplitMix64;
using namespace kt::cpu;
namespace ref = kt::cpu::ref;
using kt::test::random_acts;
using kt::test::random_weights;

// sum_i |w_i x_i| per output, with x rounded as the kernels see it.
std::vector<double> magnitudes(GgmlType t, const std::vector<uint8_t>& w, int64_t n_out, int64_t n_in,
                               const std::vector<float>& x, int64_t n_batch) {
  return kt::test::magnitudes(t, w, n_out, n_in, x, n_batch, ref::ActRounding::GgmlCpu);
}

constexpr double kRelTol = 1e-5;
constexpr double kAbsTol = 1e-6;

// In order of importance (llama.cpp's Q4_K_M, Q8_0 and IQ4_XS files), then the rest.
const GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_K, GgmlType::Q5_0,
                           GgmlType::IQ4_XS, GgmlType::Q4_0, GgmlType::BF16, GgmlType::F16, GgmlType::F32,
                           GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K};
const Isa kLevels[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx};

// Sets the ISA ceiling for one scope and restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(Isa limit) : saved_(isa_limit()) { set_isa_limit(limit); }
  ~IsaScope() { set_isa_limit(saved_); }

 private:
  Isa saved_;
};

constexpr uint32_t kPoisonBits = 0x7fc0dea1u;  // a quiet NaN no kernel computes
float poison() {
  float f;
  std::memcpy(&f, &kPoisonBits, 4);
  return f;
}
bool is_poison(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u == kPoisonBits;
}

std::vector<uint8_t> quantize(GgmlType t, const float* x, int64_t stride, int64_t rows, int64_t n) {
  std::vector<uint8_t> xq(act_row_bytes(t, n) * size_t(rows));
  quantize_acts(t, x, stride, rows, n, xq.data());
  return xq;
}

std::string type_str(GgmlType t) { return std::string(kt::type_name(t)); }

bool level_available(Isa level, std::string* why) {
  if (detected_isa() >= level) return true;
  *why = std::string("this CPU has no ") + isa_name(level) + " (detected: " + isa_name(detected_isa()) + ")";
  return false;
}

using Param = std::tuple<GgmlType, Isa>;

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return type_str(std::get<0>(info.param)) + "_" + isa_name(std::get<1>(info.param));
}

class MatmulQ : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string why;
    if (!level_available(level(), &why)) GTEST_SKIP() << why;
  }
  GgmlType type() const { return std::get<0>(GetParam()); }
  Isa level() const { return std::get<1>(GetParam()); }
};

// Every output within the bound of the reference, for every shape; every output
// written and nothing between rows (the y_stride gap) touched.
TEST_P(MatmulQ, MatchesReference) {
  const GgmlType t = type();
  const IsaScope scope(level());
  const int64_t block = kt::type_traits(t).block_size;
  const int64_t kOutMax = 300, kBatchMax = 33;
  double worst = 0.0;
  int checked = 0;
  for (int64_t n_in : {256, 512, 1408, 4096}) {
    if (n_in % block != 0) continue;
    const uint64_t seed = uint64_t(t) * 1000003u + uint64_t(n_in);
    const std::vector<uint8_t> w = random_weights(t, kOutMax, n_in, seed);
    const int64_t x_stride = n_in + 5;  // rows not packed: x_stride is honoured
    const std::vector<float> xs = random_acts(kBatchMax, n_in, x_stride, seed + 7);
    std::vector<float> x(size_t(kBatchMax * n_in));
    for (int64_t b = 0; b < kBatchMax; ++b)
      std::copy_n(xs.data() + b * x_stride, n_in, x.data() + b * n_in);
    // The reference for the largest shape; smaller ones are its top-left corners.
    std::vector<float> yref(size_t(kBatchMax * kOutMax));
    ref::matmul(t, w.data(), n_in, kOutMax, x.data(), kBatchMax, yref.data(), ref::ActRounding::GgmlCpu);
    const std::vector<double> mag = magnitudes(t, w, kOutMax, n_in, x, kBatchMax);
    const uint64_t row_bytes = kt::type_traits(t).row_bytes(n_in);
    for (int64_t n_out : {37, 300}) {
      for (int64_t n_batch : {1, 2, 3, 8, 17, 33}) {
        const std::vector<uint8_t> xq = quantize(t, xs.data(), x_stride, n_batch, n_in);
        const int64_t y_stride = n_out + 3;
        std::vector<float> y(size_t(n_batch * y_stride), poison());
        matmul_q(t, w.data(), row_bytes, n_in, xq.data(), n_batch, y.data(), y_stride, 0, n_out);
        for (int64_t b = 0; b < n_batch; ++b) {
          for (int64_t o = 0; o < y_stride; ++o) {
            const float got = y[size_t(b * y_stride + o)];
            if (o >= n_out) {
              ASSERT_TRUE(is_poison(got)) << "wrote past n_out: b " << b << " o " << o;
              continue;
            }
            ASSERT_FALSE(is_poison(got)) << "not written: n_in " << n_in << " n_out " << n_out << " batch "
                                         << n_batch << " b " << b << " o " << o;
            const double want = yref[size_t(b * kOutMax + o)];
            const double m = mag[size_t(b * kOutMax + o)];
            const double err = std::fabs(double(got) - want);
            ASSERT_LE(err, kRelTol * m + kAbsTol)
                << type_str(t) << " n_in " << n_in << " n_out " << n_out << " batch " << n_batch << " b " << b
                << " o " << o << ": got " << got << " want " << want << " (sum |w x| " << m << ")";
            worst = std::max(worst, err / m);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  RecordProperty("worst_rel_error", std::to_string(worst));
  std::printf("  %s at %s (%s): %d outputs, worst |y - ref| / sum|w x| = %.2e (bound %.0e)\n",
              type_str(t).c_str(), isa_name(level()), matmul_q_impl(t), checked, worst, kRelTol);
}

// Splitting [0, n_out) into pieces, in any order or on several threads, gives
// the same bits as one call.
TEST_P(MatmulQ, SplitRowsGiveIdenticalBits) {
  const GgmlType t = type();
  const IsaScope scope(level());
  const int64_t n_in = kt::type_traits(t).block_size == 256 ? 1024 : 1408;
  const int64_t n_out = 301, n_batch = 11;
  const std::vector<uint8_t> w = random_weights(t, n_out, n_in, 99 + uint64_t(t));
  const std::vector<float> x = random_acts(n_batch, n_in, n_in, 5 + uint64_t(t));
  const std::vector<uint8_t> xq = quantize(t, x.data(), n_in, n_batch, n_in);
  const uint64_t rb = kt::type_traits(t).row_bytes(n_in);
  std::vector<float> whole(size_t(n_batch * n_out), poison()), pieces(whole.size(), poison()),
      threaded(whole.size(), poison());
  matmul_q(t, w.data(), rb, n_in, xq.data(), n_batch, whole.data(), n_out, 0, n_out);
  const int64_t cuts[] = {0, 1, 2, 37, 64, 65, 200, 301};
  for (int i = 6; i >= 0; --i)
    matmul_q(t, w.data(), rb, n_in, xq.data(), n_batch, pieces.data(), n_out, cuts[i], cuts[i + 1]);
  std::vector<std::thread> threads;
  for (int i = 0; i < 7; ++i)
    threads.emplace_back([&, i] {
      matmul_q(t, w.data(), rb, n_in, xq.data(), n_batch, threaded.data(), n_out, cuts[i], cuts[i + 1]);
    });
  for (auto& th : threads) th.join();
  ASSERT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * 4));
  ASSERT_EQ(0, std::memcmp(whole.data(), threaded.data(), whole.size() * 4));
  for (float v : whole) ASSERT_FALSE(is_poison(v));
  // An empty range writes nothing.
  std::vector<float> none(whole.size(), poison());
  matmul_q(t, w.data(), rb, n_in, xq.data(), n_batch, none.data(), n_out, 5, 5);
  for (float v : none) ASSERT_TRUE(is_poison(v));
}

// Rows with exact rounding ties (a block whose largest value is 127 has scale 1,
// so x.5 values meet the rounding rule: Q8_0 rounds half away from zero, Q8_K to
// even), the largest magnitude present with both signs (Q8_K takes the first),
// an all-zero block, then random rows. Each row quantized and decoded is the
// reference rounding, bit for bit (zeros may differ in sign: no sum sees that).
std::vector<float> crafted_acts(int64_t rows, int64_t n, uint64_t seed) {
  std::vector<float> x = random_acts(rows, n, n, seed);
  SplitMix64 rng(seed ^ 0x5555);
  for (int64_t i = 0; i < n; ++i) {
    const float half = float(int(rng.next() % 253) - 126) + (rng.next() & 1 ? 0.5f : 0.0f);
    x[size_t(i)] = i % 32 == 0 ? 127.0f : i % 32 == 9 ? -127.0f : half;
  }
  if (rows > 1)
    for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) x[size_t(n + i)] = 0.0f;
  return x;
}

TEST_P(MatmulQ, QuantizedActsAreTheReferenceRounding) {
  const GgmlType t = type();
  const IsaScope scope(level());
  const int64_t block = kt::type_traits(t).block_size;
  for (int64_t n : {256, 1408, 4096}) {
    if (n % block != 0) continue;
    const int64_t rows = 5;
    const std::vector<float> x = crafted_acts(rows, n, 17 + uint64_t(n));
    const std::vector<uint8_t> xq = quantize(t, x.data(), n, rows, n);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      ref::round_activations(t, ref::ActRounding::GgmlCpu, x.data() + r * n, n, want.data());
      dequantize_acts(t, xq.data() + size_t(r) * act_row_bytes(t, n), n, got.data());
      for (int64_t i = 0; i < n; ++i) {
        const float a = got[size_t(i)], b = want[size_t(i)];
        uint32_t ua, ub;
        std::memcpy(&ua, &a, 4);
        std::memcpy(&ub, &b, 4);
        ASSERT_TRUE(ua == ub || (a == 0.0f && b == 0.0f))
            << type_str(t) << " n " << n << " row " << r << " value " << i << ": x " << x[size_t(r * n + i)]
            << " rounds to " << b << ", quantize_acts gives " << a;
      }
    }
    // Every level writes the same bytes (padding included): a row quantized at one
    // level is valid input at any other.
    const IsaScope scalar(Isa::Scalar);
    ASSERT_EQ(xq, quantize(t, x.data(), n, rows, n)) << "differs from the scalar quantizer";
  }
}

// The dispatcher really switches: at this level the type gets the kernel named
// for it (so the loop over levels tests different code, not one path thrice).
TEST_P(MatmulQ, DispatchFollowsTheLevel) {
  const GgmlType t = type();
  const IsaScope scope(level());
  const std::string impl = matmul_q_impl(t);
  const bool avx2 = t != GgmlType::Q2_K && t != GgmlType::Q3_K;  // the AVX2 file's types
  if (level() == Isa::Scalar) {
    EXPECT_EQ(impl, "scalar");
  } else if (level() == Isa::Avx2) {
    EXPECT_EQ(impl, avx2 ? "avx2" : "scalar");
  } else if (level() == Isa::Avx512 || !matmul_detail::matmul_q_amx_covers(t)) {
    EXPECT_EQ(impl, "avx512-vnni");  // every type
  } else {
    EXPECT_EQ(impl, "amx-int8");  // from kAmxMinBatch activation rows on
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, MatmulQ, testing::Combine(testing::ValuesIn(kTypes), testing::ValuesIn(kLevels)),
                         param_name);

// The AMX path's layouts and arithmetic with the tile instructions emulated in
// plain C++ (so CPUs without AMX test them; the hardware path runs in
// MatchesReference at the amx level, batch 17, where the CPU has it): row
// counts that leave a partial tile of rows, token counts that leave a partial
// tile of tokens, odd numbers of 32-value blocks, more tokens than one group.
class MatmulQAmxEmulated : public testing::TestWithParam<GgmlType> {};

TEST_P(MatmulQAmxEmulated, MatchesReference) {
  const GgmlType t = GetParam();
  if (detected_isa() < Isa::Avx512) GTEST_SKIP() << "the emulated tiles still need AVX-512 around them";
  const IsaScope scope(Isa::Avx512);  // the quantizers as the AMX level runs them
  const int64_t block = kt::type_traits(t).block_size;
  double worst = 0.0;
  for (int64_t n_in : {96, 256, 1408, 2048}) {
    if (n_in % block != 0) continue;
    const int64_t n_out = 37, n_batch_max = 150;
    const uint64_t seed = uint64_t(t) * 7919u + uint64_t(n_in);
    const std::vector<uint8_t> w = random_weights(t, n_out, n_in, seed);
    const std::vector<float> x = random_acts(n_batch_max, n_in, n_in, seed + 1);
    std::vector<float> yref(size_t(n_batch_max * n_out));
    ref::matmul(t, w.data(), n_in, n_out, x.data(), n_batch_max, yref.data(), ref::ActRounding::GgmlCpu);
    const std::vector<double> mag = magnitudes(t, w, n_out, n_in, x, n_batch_max);
    const uint64_t rb = kt::type_traits(t).row_bytes(n_in);
    for (int64_t n_batch : {16, 17, 33, 150}) {  // 150: two groups of 128 tokens, the second partial
      const std::vector<uint8_t> xq = quantize(t, x.data(), n_in, n_batch, n_in);
      std::vector<float> y(size_t(n_batch * n_out), poison());
      // Rows [3, n_out) in two calls: a range not starting at a tile boundary.
      for (auto [o0, o1] : {std::pair<int64_t, int64_t>{3, 21}, {21, n_out}})
        ASSERT_TRUE(matmul_detail::matmul_q_amx(t, w.data(), rb, n_in, xq.data(), act_row_bytes(t, n_in), n_batch,
                                                y.data(), n_out, o0, o1, /*emulate=*/true));
      // The same product from activations tiled once (what the MoE operator
      // passes for every block of an expert's rows): the same bits.
      std::vector<uint8_t> tiles(matmul_detail::amx_tiles_bytes(t, n_in, n_batch) + 64);
      uint8_t* tp = tiles.data() + (64 - reinterpret_cast<uintptr_t>(tiles.data()) % 64) % 64;
      matmul_detail::amx_pack_tiles(t, xq.data(), act_row_bytes(t, n_in), n_in, n_batch, tp);
      std::vector<float> yt(size_t(n_batch * n_out), poison());
      for (auto [o0, o1] : {std::pair<int64_t, int64_t>{3, 21}, {21, n_out}})
        matmul_detail::matmul_q_amx_tiles(t, w.data(), rb, n_in, tp, n_batch, yt.data(), n_out, o0, o1,
                                          /*emulate=*/true);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_TRUE(std::memcmp(&y[i], &yt[i], 4) == 0) << "tiled activations differ at " << i;
      for (int64_t b = 0; b < n_batch; ++b)
        for (int64_t o = 0; o < n_out; ++o) {
          const float got = y[size_t(b * n_out + o)];
          if (o < 3) {
            ASSERT_TRUE(is_poison(got)) << "wrote outside [o_begin, o_end)";
            continue;
          }
          const double want = yref[size_t(b * n_out + o)], m = mag[size_t(b * n_out + o)];
          ASSERT_LE(std::fabs(double(got) - want), kRelTol * m + kAbsTol)
              << type_str(t) << " n_in " << n_in << " batch " << n_batch << " b " << b << " o " << o << ": got "
              << got << " want " << want;
          worst = std::max(worst, std::fabs(double(got) - want) / m);
        }
    }
  }
  std::printf("  %s emulated AMX: worst |y - ref| / sum|w x| = %.2e (bound %.0e)\n", type_str(t).c_str(), worst,
              kRelTol);
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulQAmxEmulated,
                         testing::Values(GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0,
                                         GgmlType::Q5_0, GgmlType::Q4_0, GgmlType::IQ4_NL),
                         [](const testing::TestParamInfo<GgmlType>& i) { return type_str(i.param); });

// The comparison above is able to fail: one changed weight block moves the
// outputs of its row well outside the bound.
TEST(MatmulQCheck, OneChangedBlockIsCaught) {
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0}) {
    const int64_t n_in = 512, n_out = 4;
    std::vector<uint8_t> w = random_weights(t, n_out, n_in, 3);
    const std::vector<float> x = random_acts(1, n_in, n_in, 4);
    std::vector<float> yref(static_cast<size_t>(n_out)), y(static_cast<size_t>(n_out));
    ref::matmul(t, w.data(), n_in, n_out, x.data(), 1, yref.data(), ref::ActRounding::GgmlCpu);
    const std::vector<double> mag = magnitudes(t, w, n_out, n_in, x, 1);
    const uint64_t rb = kt::type_traits(t).row_bytes(n_in);
    w[size_t(rb + rb / 2)] ^= 0x11;  // a quant byte in the middle of row 1
    const std::vector<uint8_t> xq = quantize(t, x.data(), n_in, 1, n_in);
    matmul_q(t, w.data(), rb, n_in, xq.data(), 1, y.data(), n_out, 0, n_out);
    EXPECT_LE(std::fabs(double(y[0]) - yref[0]), kRelTol * mag[0] + kAbsTol);
    EXPECT_GT(std::fabs(double(y[1]) - yref[1]), 10 * (kRelTol * mag[1] + kAbsTol)) << type_str(t);
  }
}

TEST(CpuFeatures, LevelsAndOverride) {
  const Isa saved = isa_limit();
  const Isa detected = detected_isa();
  for (Isa l : kLevels) {
    set_isa_limit(l);
    EXPECT_EQ(active_isa(), int(l) < int(detected) ? l : detected);
    Isa parsed;
    ASSERT_TRUE(parse_isa(isa_name(l), &parsed));
    EXPECT_EQ(parsed, l);
  }
  Isa parsed;
  EXPECT_FALSE(parse_isa("avx512f", &parsed));
  set_isa_limit(saved);
  const CpuFeatures& f = cpu_features();
  if (detected >= Isa::Avx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && f.avx2);
  }
  if (detected >= Isa::Avx2) {
    EXPECT_TRUE(f.avx2);
  }
  std::printf("  detected %s; avx512bf16 %d, amx tile/int8/bf16 %d%d%d\n", isa_name(detected), f.avx512bf16,
              f.amx_tile, f.amx_int8, f.amx_bf16);
}

}  // namespace
