// matmul_bf16 (kernels/cpu/matmul_bf16.h) against the reference matmul with BF16
// rounding (ops_ref.h ActRounding::Bf16), with AMX tiles where this CPU has them
// and always with their AVX-512 emulation.
//
// The bound. The reference sums exact products of the rounded weights and
// activations in double; the kernels add the same products (exact in float: 8 x 8
// significant bits) into float accumulators, one per output, n_in roundings of
// relative error <= u = 2^-24 each: at most n_in * u * sum|w x| (1.2e-4 at
// n_in = 2048; random roundings reach ~sqrt(n_in) * u = 3e-6). One weight decoded
// wrongly moves an output by ~1e-2 of that sum, so 2e-4 still catches it; and
// DecodesEachWeightAsTheReferenceRoundsIt checks every decoded value bit for bit.
#include "kernels/cpu/matmul_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_ref.h"
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

constexpr double kRelTol = 2e-4;
constexpr double kAbsTol = 1e-6;

const GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::IQ4_XS,
                           GgmlType::Q5_K, GgmlType::Q4_0, GgmlType::BF16, GgmlType::F16,  GgmlType::F32};

std::string type_str(GgmlType t) { return std::string(kt::type_name(t)); }

using Aligned = kt::test::AlignedBytes;

// The ways this CPU runs it: the emulation, and AMX tiles where it has them.
std::vector<bool> engines() {
  std::vector<bool> e{true};
  if (active_isa() >= Isa::Amx) e.push_back(false);
  return e;
}

class MatmulBf16 : public testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!matmul_bf16_available(GetParam())) GTEST_SKIP() << "no AVX-512 (BW, DQ, VL) here";
  }
};

// Partial panels (37 rows, ranges not starting at a panel), partial tiles of
// tokens (1, 17, 33, 50), n_in not a multiple of 32 where the type allows.
TEST_P(MatmulBf16, MatchesReference) {
  const GgmlType t = GetParam();
  const int64_t block = kt::type_traits(t).block_size;
  double worst = 0.0;
  for (int64_t n_in : {40, 96, 256, 1408, 2048}) {
    if (n_in % block != 0) continue;
    const int64_t n_out = 37, n_batch_max = 50;
    const uint64_t seed = uint64_t(t) * 7919u + uint64_t(n_in);
    const std::vector<uint8_t> w = random_weights(t, n_out, n_in, seed);
    const std::vector<float> x = random_acts(n_batch_max, n_in, n_in, seed + 1);
    std::vector<float> yref(size_t(n_batch_max * n_out));
    ref::matmul(t, w.data(), n_in, n_out, x.data(), n_batch_max, yref.data(), ref::ActRounding::Bf16);
    // sum |w x| per output (the tolerance's scale).
    const std::vector<double> mag = kt::test::magnitudes(t, w, n_out, n_in, x, n_batch_max);
    const auto& tt = kt::type_traits(t);
    const uint64_t rb = tt.row_bytes(n_in);
    for (int64_t n_batch : {1, 17, 33, 50}) {
      Aligned acts(bf16_acts_bytes(n_in, n_batch));
      pack_bf16_acts(x.data(), n_in, n_in, n_batch, acts.p);
      for (bool emulate : engines()) {
        std::vector<float> y(size_t(n_batch * n_out), -12345.0f);
        for (auto [o0, o1] : {std::pair<int64_t, int64_t>{3, 21}, {21, n_out}})
          matmul_bf16(t, w.data(), rb, n_in, acts.p, n_batch, y.data(), n_out, o0, o1, emulate);
        for (int64_t b = 0; b < n_batch; ++b)
          for (int64_t o = 0; o < n_out; ++o) {
            const float got = y[size_t(b * n_out + o)];
            if (o < 3) {
              ASSERT_EQ(got, -12345.0f) << "wrote outside [o_begin, o_end)";
              continue;
            }
            const double want = yref[size_t(b * n_out + o)], m = mag[size_t(b * n_out + o)];
            ASSERT_LE(std::fabs(double(got) - want), kRelTol * m + kAbsTol)
                << type_str(t) << (emulate ? " emulated" : " amx") << " n_in " << n_in << " batch " << n_batch
                << " b " << b << " o " << o << ": got " << got << " want " << want;
            worst = std::max(worst, std::fabs(double(got) - want) / m);
          }
      }
    }
  }
  std::printf("  %s (%s): worst |y - ref| / sum|w x| = %.2e (bound %.0e)\n", type_str(t).c_str(), matmul_bf16_impl(),
              worst, kRelTol);
}

// With one-hot activations (token b holds 1 at value b) each output is a single
// product: exactly the weight as decoded and rounded, bit for bit the
// reference decoder's float rounded to nearest even.
TEST_P(MatmulBf16, DecodesEachWeightAsTheReferenceRoundsIt) {
  const GgmlType t = GetParam();
  const int64_t n_in = kt::type_traits(t).block_size > 32 ? 512 : 96, n_out = 20;
  const std::vector<uint8_t> w = random_weights(t, n_out, n_in, uint64_t(t) + 99);
  std::vector<float> x(size_t(n_in * n_in), 0.0f);
  for (int64_t b = 0; b < n_in; ++b) x[size_t(b * n_in + b)] = 1.0f;
  Aligned acts(bf16_acts_bytes(n_in, n_in));
  pack_bf16_acts(x.data(), n_in, n_in, n_in, acts.p);
  const auto& tt = kt::type_traits(t);
  std::vector<float> wrow(static_cast<size_t>(n_in));
  for (bool emulate : engines()) {
    std::vector<float> y(size_t(n_in * n_out));
    matmul_bf16(t, w.data(), tt.row_bytes(n_in), n_in, acts.p, n_in, y.data(), n_out, 0, n_out, emulate);
    for (int64_t o = 0; o < n_out; ++o) {
      tt.dequant_row(w.data() + uint64_t(o) * tt.row_bytes(n_in), wrow.data(), n_in);
      for (int64_t k = 0; k < n_in; ++k) {
        const float want = bf16_to_f32(f32_to_bf16(wrow[size_t(k)]));
        const float got = y[size_t(k * n_out + o)];
        // (-0 comes out +0: the accumulator starts at +0.)
        ASSERT_TRUE(want == got && (want == 0 || std::memcmp(&want, &got, 4) == 0)) << type_str(t) << (emulate ? " emulated" : " amx") << " row " << o
                                                  << " value " << k << ": got " << got << " want " << want;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulBf16, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& i) { return type_str(i.param); });

// Activations are rounded to nearest even, as float_ref's f32_to_bf16: packed
// values read back through one-hot weights.
TEST(MatmulBf16Acts, RoundToNearestEven) {
  if (!matmul_bf16_available(GgmlType::F32)) GTEST_SKIP() << "no AVX-512 here";
  const int64_t n = 64;
  std::vector<float> x = random_acts(3, n, n, 5);
  // Values halfway between two BF16s: ties go to the even one.
  uint32_t tie = 0x3F808000u;  // 1.00390625: between 1.0 (0x3F80) and 0x3F81
  std::memcpy(&x[7], &tie, 4);
  tie = 0x3F818000u;  // between 0x3F81 and 0x3F82: up to the even 0x3F82
  std::memcpy(&x[8], &tie, 4);
  std::vector<float> eye(size_t(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = 1.0f;
  Aligned acts(bf16_acts_bytes(n, 3));
  pack_bf16_acts(x.data(), n, n, 3, acts.p);
  for (bool emulate : engines()) {
    std::vector<float> y(size_t(3 * n));
    matmul_bf16(GgmlType::F32, eye.data(), n * 4, n, acts.p, 3, y.data(), n, 0, n, emulate);
    for (int64_t i = 0; i < 3 * n; ++i) {
      const float want = bf16_to_f32(f32_to_bf16(x[size_t(i)]));
      ASSERT_EQ(std::memcmp(&want, &y[size_t(i)], 4), 0) << "value " << i;
    }
    uint32_t bits;
    std::memcpy(&bits, &y[7], 4);
    EXPECT_EQ(bits, 0x3F800000u);
    std::memcpy(&bits, &y[8], 4);
    EXPECT_EQ(bits, 0x3F820000u);
  }
}

}  // namespace
