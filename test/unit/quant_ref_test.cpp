// Properties of the reference quant kernels that llama.cpp's vectors do not pin
// down on their own: block structs agree with the type table, rows are read at any
// byte alignment, dot_row is the dot product of what dequant_row decodes (random
// valid blocks, odd block counts), and two layouts (Q4_K's and Q3_K's packed
// scales) decode hand-built blocks to values worked out from ggml's encoders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/type_traits.h"

namespace {

using kt::GgmlType;
using namespace kt::cpu;

struct BlockInfo {
  GgmlType type;
  size_t size;
  int values;
  std::vector<size_t> fp16_offsets;  // the block's fp16 fields (d, and m or dmin)
};

const std::vector<BlockInfo>& blocks() {
  static const std::vector<BlockInfo> kBlocks = {
      {GgmlType::Q4_0, sizeof(BlockQ4_0), BlockQ4_0::kValues, {offsetof(BlockQ4_0, d)}},
      {GgmlType::Q4_1, sizeof(BlockQ4_1), BlockQ4_1::kValues,
       {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}},
      {GgmlType::Q5_0, sizeof(BlockQ5_0), BlockQ5_0::kValues, {offsetof(BlockQ5_0, d)}},
      {GgmlType::Q5_1, sizeof(BlockQ5_1), BlockQ5_1::kValues,
       {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}},
      {GgmlType::Q8_0, sizeof(BlockQ8_0), BlockQ8_0::kValues, {offsetof(BlockQ8_0, d)}},
      {GgmlType::IQ4_NL, sizeof(BlockIq4_nl), BlockIq4_nl::kValues, {offsetof(BlockIq4_nl, d)}},
      {GgmlType::Q2_K, sizeof(BlockQ2_K), BlockQ2_K::kValues,
       {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}},
      {GgmlType::Q3_K, sizeof(BlockQ3_K), BlockQ3_K::kValues, {offsetof(BlockQ3_K, d)}},
      {GgmlType::Q4_K, sizeof(BlockQ4_K), BlockQ4_K::kValues,
       {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}},
      {GgmlType::Q5_K, sizeof(BlockQ5_K), BlockQ5_K::kValues,
       {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}},
      {GgmlType::Q6_K, sizeof(BlockQ6_K), BlockQ6_K::kValues, {offsetof(BlockQ6_K, d)}},
      {GgmlType::IQ4_XS, sizeof(BlockIq4_xs), BlockIq4_xs::kValues, {offsetof(BlockIq4_xs, d)}},
  };
  return kBlocks;
}

// n_blocks random blocks: random bytes, with every fp16 field a random finite
// non-zero value (any sign, exponent 0..30: subnormals included, inf/NaN
// excluded).
std::vector<uint8_t> random_row(const BlockInfo& b, int n_blocks, std::mt19937& rng) {
  std::vector<uint8_t> row(b.size * size_t(n_blocks));
  for (auto& byte : row) byte = uint8_t(rng());
  for (int i = 0; i < n_blocks; ++i) {
    for (size_t off : b.fp16_offsets) {
      const uint16_t exp = uint16_t(rng() % 31);
      uint16_t h = uint16_t((rng() & 0x8000) | exp << 10 | (rng() & 0x3ff));
      if ((h & 0x7fff) == 0) h |= 1;  // a zero scale could zero the whole block
      std::memcpy(&row[b.size * size_t(i) + off], &h, 2);
    }
  }
  return row;
}

TEST(QuantRef, BlockStructsMatchTypeTable) {
  for (const BlockInfo& b : blocks()) {
    const kt::TypeTraits& tt = kt::type_traits(b.type);
    EXPECT_EQ(b.size, tt.type_size) << tt.name;
    EXPECT_EQ(b.values, tt.block_size) << tt.name;
    EXPECT_TRUE(tt.supported()) << tt.name;
    EXPECT_NE(tt.dot_row, nullptr) << tt.name;
  }
}

// dot_row must equal the double-precision dot product of dequant_row's floats,
// for rows whose block count is odd, read from an odd address.
TEST(QuantRef, DotIsDotOfDequant) {
  std::mt19937 rng(1234);
  for (const BlockInfo& b : blocks()) {
    const kt::TypeTraits& tt = kt::type_traits(b.type);
    for (int n_blocks : {1, 3, 7}) {
      for (int trial = 0; trial < 20; ++trial) {
        const std::vector<uint8_t> row = random_row(b, n_blocks, rng);
        std::vector<uint8_t> shifted(row.size() + 1);  // at offset 1: misaligned
        std::memcpy(shifted.data() + 1, row.data(), row.size());
        const int64_t n = int64_t(n_blocks) * b.values;
        std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
        std::normal_distribution<float> normal;
        for (auto& v : x) v = normal(rng);
        tt.dequant_row(shifted.data() + 1, w.data(), n);

        double want = 0, magnitude = 0;
        bool any_nonzero = false;
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_TRUE(std::isfinite(w[size_t(j)])) << tt.name << " value " << j;
          any_nonzero |= w[size_t(j)] != 0;
          want += double(w[size_t(j)]) * double(x[size_t(j)]);
          magnitude += std::fabs(double(w[size_t(j)]) * double(x[size_t(j)]));
        }
        ASSERT_TRUE(any_nonzero) << tt.name << ": a random block decoded to all zeros";
        const double got = tt.dot_row(shifted.data() + 1, x.data(), n);
        EXPECT_NEAR(got, want, 1e-13 * magnitude) << tt.name << " blocks " << n_blocks;
      }
    }
  }
}

// Decoding from any byte alignment gives the same floats.
TEST(QuantRef, AlignmentDoesNotMatter) {
  std::mt19937 rng(99);
  for (const BlockInfo& b : blocks()) {
    const kt::TypeTraits& tt = kt::type_traits(b.type);
    const std::vector<uint8_t> row = random_row(b, 2, rng);
    std::vector<float> ref(size_t(2 * b.values));
    tt.dequant_row(row.data(), ref.data(), 2 * b.values);
    for (size_t shift = 1; shift < 8; ++shift) {
      std::vector<uint8_t> buf(row.size() + shift);
      std::memcpy(buf.data() + shift, row.data(), row.size());
      std::vector<float> got(ref.size());
      tt.dequant_row(buf.data() + shift, got.data(), 2 * b.values);
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * 4), 0)
          << tt.name << " at offset " << shift;
    }
  }
}

constexpr uint16_t kFp16One = 0x3C00, kFp16Half = 0x3800;

// Q4_K sub-block 5 takes the low 4 bits of its scale and min from byte 9 and the
// high 2 bits from the top of bytes 1 (scale) and 5 (min), as ggml's
// quantize_row_q4_K_ref packs them. Sub-block 5 is the high nibbles of qs[64..95].
TEST(QuantRef, Q4KPackedScaleOfUpperSubBlock) {
  BlockQ4_K b{};
  b.d = kFp16One;
  b.dmin = kFp16Half;
  const int sc = 37, m = 50;  // 6-bit values with both high bits in use
  b.scales[9] = uint8_t((sc & 0xF) | (m & 0xF) << 4);
  b.scales[1] = uint8_t((sc >> 4) << 6);
  b.scales[5] = uint8_t((m >> 4) << 6);
  std::memset(b.qs, 0x73, sizeof b.qs);  // low nibble 3, high nibble 7
  float y[256];
  kt::type_traits(GgmlType::Q4_K).dequant_row(&b, y, 256);
  for (int v = 0; v < 256; ++v) {
    // Sub-block 1 reads bytes 1 and 5 masked to 6 bits: scale and min 0.
    const float want = v / 32 == 5 ? float(sc * 7) - 0.5f * float(m) : 0.0f;
    EXPECT_EQ(y[v], want) << "value " << v;
  }
}

// Q3_K scales packed as ggml's quantize_row_q3_K_ref does: low nibble in byte
// j (j < 8) or high nibble of byte j - 8, high 2 bits into byte 8 + j % 4 at
// bit 2 * (j / 4). With all 2-bit q zero, value v is d * (stored - 32) * (0 or
// -4) by hmask bit v / 32 of byte v % 32.
TEST(QuantRef, Q3KPackedScalesAndHmask) {
  BlockQ3_K b{};
  b.d = kFp16Half;
  int stored[16];
  for (int j = 0; j < 16; ++j) {
    stored[j] = (j * 23 + 5) % 64;
    const int l = stored[j];
    if (j < 8) b.scales[j] |= uint8_t(l & 0xF);
    else b.scales[j - 8] |= uint8_t((l & 0xF) << 4);
    b.scales[8 + j % 4] |= uint8_t((l >> 4) << (2 * (j / 4)));
  }
  for (int i = 0; i < 32; ++i) b.hmask[i] = uint8_t(i * 37 + 11);
  float y[256];
  kt::type_traits(GgmlType::Q3_K).dequant_row(&b, y, 256);
  for (int v = 0; v < 256; ++v) {
    const bool high = (b.hmask[v % 32] >> (v / 32)) & 1;
    const float want = 0.5f * float(stored[v / 16] - 32) * float(high ? 0 : -4);
    EXPECT_EQ(y[v], want) << "value " << v;
  }
}

}  // namespace
