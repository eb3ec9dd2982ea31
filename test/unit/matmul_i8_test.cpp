// matmul_i8 (kernels/cpu/matmul_i8.h: weights repacked to int8 or int4 at load)
// against the reference matmul with Int8 / Int4 rounding (ops_ref.h ActRounding), on every
// engine this CPU has: the portable kernel, AVX-512 VNNI, and the AMX tiles'
// layout with the tile instructions emulated in C++ (and run for real where the
// CPU has AMX).
//
// The bound. The kernels' integer sums per chunk are exact; each chunk's sum is
// scaled and added in float: a few roundings of relative error 2^-24 per
// chunk, so |y - ref| <= ~1e-6 * sum |w x| (for 8 chunks). One int8 value
// wrong by one step moves an output by d_w d_x ~ 1e-4 of that sum at these
// sizes, so 2e-6 catches it. Separately, the repacked weights decode to within
// half a step of the file's (MatmulI8Repack).
#include "kernels/cpu/matmul_i8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/random_blocks.h"
#include "kernels/type_traits.h"
#include "test/unit/quant_test_inputs.h"

namespace {

using kt::GgmlType;
using namespace kt::cpu;
namespace ref = kt::cpu::ref;
using kt::test::random_acts;
using kt::test::random_weights;

constexpr double kRelTol = 2e-6;

using Aligned = kt::test::AlignedBytes;

std::string type_str(GgmlType t) { return std::string(kt::type_name(t)); }

// The ISA levels to run at: every one this CPU has up to AVX-512.
std::vector<Isa> levels() {
  std::vector<Isa> l{Isa::Scalar};
  if (detected_isa() >= Isa::Avx512) l.push_back(Isa::Avx512);
  if (detected_isa() >= Isa::Amx) l.push_back(Isa::Amx);
  return l;
}

class MatmulI8 : public testing::TestWithParam<std::tuple<GgmlType, WeightBits>> {};

const char* bits_str(WeightBits b) { return b == WeightBits::Int4 ? "int4" : "int8"; }

// Odd shapes: n_in not a multiple of 256 (a short last chunk), 37, 53 and 133
// rows (a partial block of rows, ranges that start inside the matrix; 133: the
// AMX loop's groups of row pairs, whole and ending in one block), 1..50 tokens
// (partial tiles of tokens, one and two tiles a step). Int4 values are a
// coarser step (d_w ~ 1/8 of a chunk's largest), so a value wrong by one moves
// an output further: the same bound catches it.
TEST_P(MatmulI8, MatchesReference) {
  const auto [t, bits] = GetParam();
  const int64_t block = kt::type_traits(t).block_size;
  const ref::ActRounding rounding = bits == WeightBits::Int4 ? ref::ActRounding::Int4 : ref::ActRounding::Int8;
  const Isa saved = isa_limit();
  double worst = 0.0;
  for (int64_t n_in : {96, 256, 1408, 2048}) {
    if (n_in % block != 0) continue;
    for (int64_t n_out : {37, 53, 133}) {
      const int64_t n_batch_max = 50;
      const uint64_t seed = uint64_t(t) * 7919u + uint64_t(n_in) + uint64_t(n_out);
      const std::vector<uint8_t> w = random_weights(t, n_out, n_in, seed);
      const std::vector<float> x = random_acts(n_batch_max, n_in, n_in, seed + 1);
      const auto& tt = kt::type_traits(t);
      Aligned wi8(i8_matrix_bytes(n_in, n_out, bits));
      repack_i8(t, w.data(), tt.row_bytes(n_in), n_in, n_out, wi8.p, 0, i8_row_blocks(n_out), bits);
      std::vector<float> yref(size_t(n_batch_max * n_out));
      ref::matmul(t, w.data(), n_in, n_out, x.data(), n_batch_max, yref.data(), rounding);
      // sum |w x| per output (the tolerance's scale).
      const std::vector<double> mag = kt::test::magnitudes(t, w, n_out, n_in, x, n_batch_max);
      for (int64_t n_batch : {1, 3, 17, 33, 50}) {
        for (Isa isa : levels()) {
          set_isa_limit(isa);
          Aligned xq(i8_act_row_bytes(n_in) * size_t(n_batch));
          quantize_acts_i8(x.data(), n_in, n_batch, n_in, xq.p);
          // The AMX layout: emulated below the Amx level (the engine of record
          // there is VNNI or scalar, run through matmul_i8 as well).
          std::vector<std::pair<std::string, bool>> engines{{isa_name(isa), false}};
          if (isa == Isa::Avx512 && n_batch >= kI8TileMinBatch) engines.push_back({"amx-emulated", true});
          for (auto [name, emu] : engines) {
            std::vector<float> y(size_t(n_batch * n_out), -12345.0f);
            Aligned tiles(size_t((n_batch + 15) / 16) * matmul_detail::i8_tile_bytes(n_in));
            const bool tiled = (emu || i8_tiles_bytes(n_in, n_batch) > 0);
            if (tiled) tile_acts_i8(xq.p, n_in, n_batch, tiles.p);
            for (auto [o0, o1] : {std::pair<int64_t, int64_t>{16, 32}, {32, n_out}}) {
              if (emu)
                matmul_detail::i8_run_amx(wi8.p, n_in, tiles.p, n_batch, y.data(), n_out, o0, o1, n_out, true, bits);
              else
                matmul_i8(wi8.p, n_in, n_out, xq.p, tiled ? tiles.p : nullptr, n_batch, y.data(), n_out, o0, o1,
                          bits);
            }
            for (int64_t b = 0; b < n_batch; ++b)
              for (int64_t o = 0; o < n_out; ++o) {
                const float got = y[size_t(b * n_out + o)];
                if (o < 16) {
                  ASSERT_EQ(got, -12345.0f) << "wrote outside [o_begin, o_end)";
                  continue;
                }
                const double want = yref[size_t(b * n_out + o)], m = mag[size_t(b * n_out + o)];
                ASSERT_LE(std::fabs(double(got) - want), kRelTol * m + 1e-9)
                    << type_str(t) << " " << bits_str(bits) << " " << name << " n_in " << n_in << " n_out " << n_out << " batch " << n_batch
                    << " b " << b << " o " << o << ": got " << got << " want " << want;
                worst = std::max(worst, std::fabs(double(got) - want) / m);
              }
          }
        }
      }
    }
  }
  set_isa_limit(saved);
  std::printf("  %s %s: worst |y - ref| / sum|w x| = %.2e (bound %.0e)\n", type_str(t).c_str(), bits_str(bits),
              worst, kRelTol);
}

// Each repacked weight, q * d, is within half a step (d / 2) of the value the
// file's block decodes to, and d is its chunk's largest magnitude / 127.
class MatmulI8Repack : public testing::TestWithParam<GgmlType> {};

TEST_P(MatmulI8Repack, Int8StaysWithinHalfAStep) {
  const GgmlType t = GetParam();
  const int64_t n_in = kt::type_traits(t).block_size > 32 ? 512 : 320, n_out = 20;
  const auto& tt = kt::type_traits(t);
  const std::vector<uint8_t> w = random_weights(t, n_out, n_in, uint64_t(t) + 5);
  Aligned wi8(i8_matrix_bytes(n_in, n_out));
  repack_i8(t, w.data(), tt.row_bytes(n_in), n_in, n_out, wi8.p, 0, i8_row_blocks(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  const int64_t nc = i8_chunks(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    tt.dequant_row(w.data() + uint64_t(o) * tt.row_bytes(n_in), row.data(), n_in);
    for (int64_t c = 0; c < nc; ++c) {
      const uint8_t* blk = wi8.p + size_t(o / 16 * nc + c) * kI8BlockBytes;
      float d;
      std::memcpy(&d, blk + 4096 + 4 * (o % 16), 4);
      float amax = 0;
      const int64_t n = std::min<int64_t>(256, n_in - 256 * c);
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(row[size_t(256 * c + i)]));
      ASSERT_GT(amax, 0.0f);
      ASSERT_FLOAT_EQ(d, amax / 127.0f);
      int32_t qsum = 0, stored;
      for (int64_t i = 0; i < 256; ++i) {
        const int8_t q = int8_t(blk[(o % 16) * 256 + i]);
        if (i >= n) {
          ASSERT_EQ(q, 0) << "padding past n_in";
          continue;
        }
        qsum += q;
        ASSERT_LE(std::fabs(double(q) * d - row[size_t(256 * c + i)]), 0.5 * d * (1 + 1e-4))  // x / d rounds in float
            << type_str(t) << " row " << o << " value " << 256 * c + i;
      }
      std::memcpy(&stored, blk + 4096 + 64 + 4 * (o % 16), 4);
      ASSERT_EQ(stored, qsum);
    }
  }
}

// Int4: each chunk's stored values and scale are ref::quantize_chunk_i4's on the
// decoded row, two a byte as q + 8; padding past n_in and n_out is 8 (zero),
// scales 0; qsum is the sum of q.
TEST_P(MatmulI8Repack, Int4IsTheReferenceQuantization) {
  const GgmlType t = GetParam();
  constexpr WeightBits bits = WeightBits::Int4;
  const int64_t n_in = kt::type_traits(t).block_size > 32 ? 512 : 320, n_out = 20;
  const auto& tt = kt::type_traits(t);
  const std::vector<uint8_t> w = random_weights(t, n_out, n_in, uint64_t(t) + 9);
  Aligned wi4(i8_matrix_bytes(n_in, n_out, bits));
  std::memset(wi4.p, 0x5A, i8_matrix_bytes(n_in, n_out, bits));
  repack_i8(t, w.data(), tt.row_bytes(n_in), n_in, n_out, wi4.p, 0, i8_row_blocks(n_out), bits);
  std::vector<float> row(static_cast<size_t>(n_in));
  const int64_t nc = i8_chunks(n_in);
  for (int64_t o = 0; o < i8_row_blocks(n_out) * 16; ++o) {
    if (o < n_out) tt.dequant_row(w.data() + uint64_t(o) * tt.row_bytes(n_in), row.data(), n_in);
    for (int64_t c = 0; c < nc; ++c) {
      const uint8_t* blk = wi4.p + size_t(o / 16 * nc + c) * kI4BlockBytes;
      const int r = int(o % 16);
      const int64_t n = o < n_out ? std::min<int64_t>(256, n_in - 256 * c) : 0;
      int8_t want[256] = {};
      const float dwant = n > 0 ? ref::quantize_chunk_i4(row.data() + 256 * c, n, want) : 0.0f;
      float d;
      int32_t qsum = 0, stored;
      std::memcpy(&d, blk + 2048 + 4 * r, 4);
      std::memcpy(&stored, blk + 2048 + 64 + 4 * r, 4);
      ASSERT_EQ(d, dwant) << type_str(t) << " row " << o << " chunk " << c;
      for (int64_t i = 0; i < 256; ++i) {
        const uint8_t u = blk[r * 128 + i % 128];
        const int q = int(i < 128 ? u & 15 : u >> 4) - 8;
        ASSERT_EQ(q, i < n ? want[i] : 0) << type_str(t) << " row " << o << " value " << 256 * c + i;
        qsum += q;
      }
      ASSERT_EQ(stored, qsum);
    }
  }
}

const auto kTypes = testing::Values(GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q6_K,
                                    GgmlType::IQ4_XS, GgmlType::BF16, GgmlType::F32);

INSTANTIATE_TEST_SUITE_P(Types, MatmulI8Repack, kTypes,
                         [](const testing::TestParamInfo<GgmlType>& i) { return type_str(i.param); });

INSTANTIATE_TEST_SUITE_P(Types, MatmulI8, testing::Combine(kTypes, testing::Values(WeightBits::Int8, WeightBits::Int4)),
                         [](const testing::TestParamInfo<std::tuple<GgmlType, WeightBits>>& i) {
                           return type_str(std::get<0>(i.param)) + "_" + bits_str(std::get<1>(i.param));
                         });

// quantize_chunk_i4: values in [-8, 7]; the largest magnitude lands on -8 with
// the first scale; the chosen scale's squared error is no larger than that
// first scale's (computed here independently); every value not clamped is
// within half a step; a chunk of zeros is zeros.
TEST(QuantizeChunkI4, ScaleAndValues) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const int64_t n = seed % 5 == 0 ? 37 : 256;
    std::vector<float> x = random_acts(1, n, n, seed);
    if (seed % 3 == 0) x[size_t(seed % n)] = 9.0f;  // a positive outlier: q = -8, d < 0
    int8_t q[256];
    const float d = ref::quantize_chunk_i4(x.data(), n, q);
    float big = 0;
    for (float v : x) big = std::fabs(v) > std::fabs(big) ? v : big;
    const float d0 = big / -8.0f;
    double e0 = 0, e = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v0 = std::clamp(std::nearbyint(x[size_t(i)] / d0), -8.0f, 7.0f);
      e0 += (x[size_t(i)] - v0 * d0) * (x[size_t(i)] - v0 * d0);
      e += (x[size_t(i)] - double(q[i]) * d) * (x[size_t(i)] - double(q[i]) * d);
      ASSERT_GE(q[i], -8);
      ASSERT_LE(q[i], 7);
      if (q[i] > -8 && q[i] < 7) {
        ASSERT_LE(std::fabs(x[size_t(i)] - double(q[i]) * d), std::fabs(d) * 0.5 * (1 + 1e-5)) << seed << " " << i;
      }
    }
    ASSERT_LE(e, e0 * (1 + 1e-9)) << seed;
    ASSERT_NE(d, 0.0f);
    if (d == d0) {
      ASSERT_EQ(q[std::find(x.begin(), x.end(), big) - x.begin()], -8);
    }
  }
  std::vector<float> z(100, 0.0f);
  int8_t q[256];
  std::fill(q, q + 256, int8_t(3));
  EXPECT_EQ(ref::quantize_chunk_i4(z.data(), 100, q), 0.0f);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(q[i], 0);
}

// The repack's AVX-512 int4 quantizer gives the reference's scale and values
// bit for bit (full and short chunks, outliers of either sign, ties at half a
// step, a chunk of zeros).
TEST(QuantizeChunkI4, VectorMatchesReference) {
  if (detected_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 here";
  int differ = 0;  // chunks where the refined scale won
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const int64_t n = seed % 7 == 0 ? int64_t(1 + seed % 255) : 256;
    std::vector<float> x = random_acts(1, n, n, seed + 1000);
    if (seed % 3 == 0) x[size_t(seed % n)] = (seed % 2 ? 1 : -1) * 9.0f;
    if (seed % 5 == 0)  // values on half steps of the first scale
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(int(i % 15) - 7) * 0.5f + (i == 0 ? 8.0f : 0.0f);
    if (seed == 11) std::fill(x.begin(), x.end(), 0.0f);
    int8_t a[256], b[256];
    const float da = ref::quantize_chunk_i4(x.data(), n, a), db = matmul_detail::i4_quantize_avx512(x.data(), n, b);
    ASSERT_EQ(std::memcmp(&da, &db, 4), 0) << "seed " << seed << ": scale " << da << " against " << db;
    ASSERT_EQ(std::memcmp(a, b, size_t(n)), 0) << "seed " << seed;
    float big = 0;
    for (float v : x) big = std::fabs(v) > std::fabs(big) ? v : big;
    differ += da != big / -8.0f;  // the least-squares scale won
  }
  EXPECT_GT(differ, 100) << "the second scale was hardly ever taken: the comparison covers half the function";
}

// The vector quantizer writes the bytes of the portable one (a chunk of zeros,
// a short last chunk, ties at half a step).
TEST(MatmulI8Acts, VectorQuantizerMatchesPortable) {
  if (detected_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 here";
  const int64_t n = 600;
  std::vector<float> x = random_acts(3, n, n, 11);
  for (int64_t i = 256; i < 512; ++i) x[size_t(i)] = 0.0f;  // row 0's second chunk
  x[size_t(n + 5)] = 127.0f, x[size_t(n + 6)] = 2.5f, x[size_t(n + 7)] = -3.5f;  // ties: d = 1
  const Isa saved = isa_limit();
  Aligned a(i8_act_row_bytes(n) * 3), b(i8_act_row_bytes(n) * 3);
  std::memset(a.p, 0x5A, i8_act_row_bytes(n) * 3);
  set_isa_limit(Isa::Scalar);
  quantize_acts_i8(x.data(), n, 3, n, a.p);
  set_isa_limit(Isa::Avx512);
  quantize_acts_i8(x.data(), n, 3, n, b.p);
  set_isa_limit(saved);
  ASSERT_EQ(std::memcmp(a.p, b.p, i8_act_row_bytes(n) * 3), 0);
  const auto* q = reinterpret_cast<const int8_t*>(a.p + i8_act_row_bytes(n));
  EXPECT_EQ(q[6], 2);   // 2.5 to even
  EXPECT_EQ(q[7], -4);  // -3.5 to even
}

// A row made a chunk at a time (the MoE operator rounds each expert's SwiGLU
// rows so) is the row quantize_acts_i8 writes, byte for byte, on every engine:
// chunks in any order, over a buffer of garbage, the short last chunk and the
// row's padding included.
TEST(MatmulI8Acts, ChunkByChunkIsTheRow) {
  const Isa saved = isa_limit();
  for (Isa isa : {Isa::Scalar, Isa::Avx512}) {
    if (detected_isa() < isa) continue;
    set_isa_limit(isa);
    for (int64_t n : {int64_t(256), int64_t(600), int64_t(1408)}) {
      const std::vector<float> x = random_acts(2, n, n, 13);
      const size_t rb = i8_act_row_bytes(n);
      Aligned whole(rb * 2), chunked(rb * 2);
      std::memset(whole.p, 0x5A, rb * 2);
      std::memset(chunked.p, 0xA5, rb * 2);
      quantize_acts_i8(x.data(), n, 2, n, whole.p);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = i8_chunks(n) - 1; c >= 0; --c)
          quantize_act_chunk_i8(x.data() + r * n + c * kI8Chunk, n, c, chunked.p + size_t(r) * rb);
      EXPECT_EQ(std::memcmp(whole.p, chunked.p, rb * 2), 0) << "n_in " << n << ", isa " << int(isa);
    }
  }
  set_isa_limit(saved);
}

}  // namespace
