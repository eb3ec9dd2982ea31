// The reference operators (kernels/cpu/ops_ref.h) against values worked out by
// hand from their definitions (RMSNorm, softmax, RoPE/YaRN, attention, MoE
// routing as llama.cpp's build_moe_ffn), and against each other where two
// computations must agree (absorbed and decompressed MLA, GQA and repeated
// heads). Inputs are random and non-zero unless a test needs crafted values.
#include "kernels/cpu/ops_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/float_ref.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/type_traits.h"

namespace {

using kt::GgmlType;
namespace ref = kt::cpu::ref;

// Uniform in +-[0.1, 1]: never zero, both signs.
std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// ---- basic ops ---------------------------------------------------------------

TEST(OpsRefBasic, RmsNormOfAKnownVector) {
  const std::vector<float> x = {1.5f, -2.25f, 3.0f, 0.5f, 2.0f, 2.0f, 2.0f, 2.0f};
  const std::vector<float> w = {0.5f, 1.25f, -1.0f, 2.0f};
  std::vector<float> y(8);
  ref::rms_norm(x.data(), w.data(), 4, 2, 1e-6f, y.data());
  // Row 0: mean of squares (2.25 + 5.0625 + 9 + 0.25) / 4 = 4.140625.
  const double inv = 1.0 / std::sqrt(4.140625 + 1e-6);
  EXPECT_NEAR(y[0], 1.5 * inv * 0.5, 1e-6);
  EXPECT_NEAR(y[1], -2.25 * inv * 1.25, 1e-6);
  EXPECT_NEAR(y[2], 3.0 * inv * -1.0, 1e-6);
  EXPECT_NEAR(y[3], 0.5 * inv * 2.0, 1e-6);
  // Row 1: all 2, rms 2 (up to eps): 1 * w.
  EXPECT_NEAR(y[4], 0.5, 1e-6);
  EXPECT_NEAR(y[6], -1.0, 1e-6);
  // No weight: unit RMS.
  ref::rms_norm(x.data(), nullptr, 4, 1, 1e-6f, y.data());
  EXPECT_NEAR(y[2], 3.0 * inv, 1e-6);
}

TEST(OpsRefBasic, SoftmaxOfKnownRowsAndLargeValues) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 1000.0f, 1001.0f, 1002.0f};
  ref::softmax(x.data(), 3, 2);
  // e^k / (e + e^2 + e^3)
  EXPECT_NEAR(x[0], 0.0900305732, 1e-7);
  EXPECT_NEAR(x[1], 0.2447284711, 1e-7);
  EXPECT_NEAR(x[2], 0.6652409558, 1e-7);
  // Max-subtracted: a shift by 999 changes nothing and does not overflow.
  EXPECT_NEAR(x[3], 0.0900305732, 1e-7);
  EXPECT_NEAR(x[5], 0.6652409558, 1e-7);
}

TEST(OpsRefBasic, SiluGluAndSigmoid) {
  const std::vector<float> gate = {1.0f, -2.0f, 0.5f}, up = {2.0f, 3.0f, -4.0f};
  std::vector<float> y(3);
  ref::silu_glu(gate.data(), up.data(), 3, y.data());
  EXPECT_NEAR(y[0], 0.7310585786 * 2.0, 1e-6);  // silu(1) = 1/(1+e^-1)
  EXPECT_NEAR(y[1], -2.0 / (1.0 + std::exp(2.0)) * 3.0, 1e-6);
  EXPECT_NEAR(y[2], 0.5 / (1.0 + std::exp(-0.5)) * -4.0, 1e-6);
  EXPECT_NEAR(ref::sigmoid(-1.5f), 1.0 / (1.0 + std::exp(1.5)), 1e-7);
}

TEST(OpsRefBasic, MatmulF32ByHand) {
  // W: 3 rows of 2 ([2, 3] in ggml order); x: 2 rows of 2.
  const std::vector<float> w = {1.0f, 2.0f, -3.0f, 0.5f, 0.25f, 4.0f};
  const std::vector<float> x = {2.0f, -1.0f, 0.5f, 3.0f};
  std::vector<float> y(6);
  ref::matmul(GgmlType::F32, w.data(), 2, 3, x.data(), 2, y.data());
  const std::vector<float> want = {0.0f, -6.5f, -3.5f, 6.5f, 0.0f, 12.125f};
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(OpsRefBasic, MatmulQ8_0AndGetRowsDecodeTheBlocks) {
  // Two rows of one Q8_0 block each: d = 0.5 and 0.25, q = j - 16 and 3 - j.
  std::vector<kt::cpu::BlockQ8_0> rows(2);
  rows[0].d = kt::cpu::f32_to_fp16(0.5f);
  rows[1].d = kt::cpu::f32_to_fp16(0.25f);
  for (int j = 0; j < 32; ++j) {
    rows[0].qs[j] = int8_t(j - 16);
    rows[1].qs[j] = int8_t(3 - j);
  }
  const std::vector<float> x = random_values(32, 1);
  std::vector<float> y(2);
  ref::matmul(GgmlType::Q8_0, rows.data(), 32, 2, x.data(), 1, y.data());
  double want0 = 0, want1 = 0;
  for (int j = 0; j < 32; ++j) {
    want0 += 0.5 * (j - 16) * x[size_t(j)];
    want1 += 0.25 * (3 - j) * x[size_t(j)];
  }
  EXPECT_NEAR(y[0], want0, 1e-5);
  EXPECT_NEAR(y[1], want1, 1e-5);

  const int32_t ids[] = {1, 0, 1};
  std::vector<float> e(3 * 32);
  ref::get_rows(GgmlType::Q8_0, rows.data(), 32, ids, 3, e.data());
  EXPECT_EQ(e[0], 0.25f * 3);
  EXPECT_EQ(e[32 + 5], 0.5f * (5 - 16));
  EXPECT_EQ(e[64 + 31], 0.25f * (3 - 31));
}

TEST(OpsRefBasic, GgmlRoundingOfActivations) {
  const std::vector<float> x = random_values(256, 2);
  std::vector<float> out(256);
  // F32 weights see the floats as they are.
  ref::round_activations(GgmlType::F32, ref::ActRounding::GgmlCpu, x.data(), 256, out.data());
  EXPECT_EQ(out, x);
  // Q8_0: per 32 values, d = amax/127 in fp16, each value a multiple of it.
  ref::round_activations(GgmlType::Q4_0, ref::ActRounding::GgmlCpu, x.data(), 256, out.data());
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(j)]));
  const float d = kt::cpu::fp16_to_f32(kt::cpu::f32_to_fp16(amax / 127.0f));
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[size_t(j)], d * std::round(x[size_t(j)] * (127.0f / amax))) << j;
    EXPECT_LE(std::fabs(out[size_t(j)] - x[size_t(j)]), 0.51 * amax / 127 + 1e-3 * amax) << j;
  }
  // Q8_K: one float scale per 256, the largest magnitude maps onto itself.
  ref::round_activations(GgmlType::Q4_K, ref::ActRounding::GgmlCpu, x.data(), 256, out.data());
  size_t imax = 0;
  for (size_t j = 0; j < 256; ++j)
    if (std::fabs(x[j]) > std::fabs(x[imax])) imax = j;
  EXPECT_NEAR(out[imax], x[imax], 1e-6);
  const float dk = std::fabs(x[imax]) / 127.0f;
  for (size_t j = 0; j < 256; ++j) {
    EXPECT_LE(std::fabs(out[j] - x[j]), 0.5f * dk * 1.0001f) << j;
    const float q = out[j] / dk;
    EXPECT_NEAR(q, std::round(q), 1e-3) << j;  // on the grid
  }
  // Exact leaves everything alone.
  ref::round_activations(GgmlType::Q4_K, ref::ActRounding::Exact, x.data(), 256, out.data());
  EXPECT_EQ(out, x);
}

// ---- rope --------------------------------------------------------------------

ref::RopeParams plain_rope(int n_dims, ref::RopeMode mode) {
  ref::RopeParams p;
  p.n_dims = n_dims;
  p.mode = mode;
  p.freq_base = 10000.0f;
  return p;
}

// DeepSeek's YaRN as llama.cpp configures it: factor 40, unit magnitude.
ref::RopeParams yarn_rope(int n_dims, float factor) {
  ref::RopeParams p = plain_rope(n_dims, ref::RopeMode::Normal);
  p.freq_scale = 1.0f / factor;
  p.n_ctx_orig = 4096;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f / (1.0f + 0.1f * std::log(factor));
  return p;
}

TEST(OpsRefRope, PositionZeroIsIdentity) {
  for (const ref::RopeParams& p : {plain_rope(16, ref::RopeMode::Normal),
                                   plain_rope(16, ref::RopeMode::NeoX), yarn_rope(16, 40)}) {
    const std::vector<float> x = random_values(3 * 16, 3);
    std::vector<float> y = x;
    const int32_t pos = 0;
    ref::rope(y.data(), 1, 48, 3, 16, &pos, p);
    EXPECT_LT(max_abs_diff(x, y), 1e-6);
  }
}

TEST(OpsRefRope, NormalAndNeoxPairsByHand) {
  const std::vector<float> x = {0.3f, -0.7f, 0.9f, 0.2f};
  const int32_t pos = 3;
  // theta_i = 3 * 10000^(-2i/4): 3 and 0.03.
  const double a0 = 3.0, a1 = 0.03;
  std::vector<float> y = x;
  ref::rope(y.data(), 1, 4, 1, 4, &pos, plain_rope(4, ref::RopeMode::Normal));
  EXPECT_NEAR(y[0], 0.3 * std::cos(a0) + 0.7 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 0.3 * std::sin(a0) - 0.7 * std::cos(a0), 1e-6);
  EXPECT_NEAR(y[2], 0.9 * std::cos(a1) - 0.2 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 0.9 * std::sin(a1) + 0.2 * std::cos(a1), 1e-6);
  y = x;
  ref::rope(y.data(), 1, 4, 1, 4, &pos, plain_rope(4, ref::RopeMode::NeoX));
  // NeoX pairs (x0, x2) at angle 3 and (x1, x3) at 0.03.
  EXPECT_NEAR(y[0], 0.3 * std::cos(a0) - 0.9 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 0.3 * std::sin(a0) + 0.9 * std::cos(a0), 1e-6);
  EXPECT_NEAR(y[1], -0.7 * std::cos(a1) - 0.2 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], -0.7 * std::sin(a1) + 0.2 * std::cos(a1), 1e-6);
}

TEST(OpsRefRope, YarnWithFactorOneIsPlainRope) {
  ref::RopeParams yarn = yarn_rope(32, 1.0f);
  yarn.attn_factor = 1.0f;  // 1 + 0.1 ln 1 = 1: nothing to cancel
  const std::vector<float> x = random_values(4 * 2 * 32, 4);
  const std::vector<int32_t> pos = {0, 7, 130, 4095};
  std::vector<float> a = x, b = x;
  ref::rope(a.data(), 4, 64, 2, 32, pos.data(), yarn);
  ref::rope(b.data(), 4, 64, 2, 32, pos.data(), plain_rope(32, ref::RopeMode::Normal));
  EXPECT_LT(max_abs_diff(a, b), 1e-6);
}

TEST(OpsRefRope, YarnCorrectionRangeAndRamp) {
  float dims[2];
  // 64 * ln(4096 / (32 * 2 pi)) / (2 ln 10000) = 10.47 -> 10; beta_slow 1: 22.51 -> 23.
  ref::rope_yarn_corr_dims(64, 4096, 10000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 10.0f);
  EXPECT_EQ(dims[1], 23.0f);

  // Below the range a pair keeps its angle (extrapolation), above it the
  // angle is divided by the factor (interpolation); magnitude stays 1.
  const float factor = 40.0f;
  const int32_t pos = 5;
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;   // pair 0
  x[62] = 1.0f;  // pair 31
  ref::rope(x.data(), 1, 64, 1, 64, &pos, yarn_rope(64, factor));
  const double theta31 = 5.0 * std::pow(10000.0, -62.0 / 64.0) / factor;
  EXPECT_NEAR(x[0], std::cos(5.0), 1e-5);
  EXPECT_NEAR(x[1], std::sin(5.0), 1e-5);
  EXPECT_NEAR(x[62], std::cos(theta31), 1e-5);
  EXPECT_NEAR(x[63], std::sin(theta31), 1e-5);
}

TEST(OpsRefRope, RotatesOnlyItsSliceAndKeepsNorms) {
  // Heads of 24 values with rope on the last 8 (deepseek2's q_pe layout).
  const std::vector<float> x = random_values(2 * 3 * 24, 5);
  std::vector<float> y = x;
  const std::vector<int32_t> pos = {3, 11};
  ref::rope(y.data() + 16, 2, 72, 3, 24, pos.data(), plain_rope(8, ref::RopeMode::Normal));
  for (size_t t = 0; t < 2; ++t) {
    for (size_t h = 0; h < 3; ++h) {
      const size_t base = t * 72 + h * 24;
      for (size_t i = 0; i < 16; ++i) EXPECT_EQ(y[base + i], x[base + i]);
      double nx = 0, ny = 0;
      for (size_t i = 16; i < 24; ++i) {
        nx += double(x[base + i]) * x[base + i];
        ny += double(y[base + i]) * y[base + i];
      }
      EXPECT_NEAR(nx, ny, 1e-5);
      EXPECT_NE(y[base + 16], x[base + 16]);
    }
  }
}

// ---- attention ---------------------------------------------------------------

TEST(OpsRefAttention, OneKeyReturnsItsValue) {
  const std::vector<float> q = random_values(2 * 8, 6), k = random_values(8, 7),
                           v = random_values(4, 8);
  std::vector<float> out(2 * 4);
  // Two query heads sharing one KV head, one cached token.
  ref::attention(q.data(), k.data(), v.data(), 1, 0, 2, 1, 8, 4, 0.35f, out.data());
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[size_t(h * 4 + i)], v[size_t(i)]);
}

TEST(OpsRefAttention, TwoKeysByHand) {
  const std::vector<float> q = {1.0f, 2.0f};
  const std::vector<float> k = {0.5f, -1.0f, 2.0f, 0.25f};  // scores -1.5, 2.5
  const std::vector<float> v = {1.0f, 3.0f, -2.0f, 0.5f};
  std::vector<float> out(2);
  // The query at position 1 sees both keys; kq_scale 0.5 -> logits -0.75, 1.25.
  ref::attention(q.data(), k.data(), v.data(), 1, 1, 1, 1, 2, 2, 0.5f, out.data());
  const double p1 = 1.0 / (1.0 + std::exp(-2.0)), p0 = 1.0 - p1;
  EXPECT_NEAR(out[0], p0 * 1.0 + p1 * -2.0, 1e-6);
  EXPECT_NEAR(out[1], p0 * 3.0 + p1 * 0.5, 1e-6);
}

TEST(OpsRefAttention, GroupedHeadsEqualRepeatedHeadsAndAreCausal) {
  const int64_t n = 5, h = 4, hkv = 2, dk = 8, dv = 6;
  const std::vector<float> q = random_values(size_t(n * h * dk), 9);
  const std::vector<float> k = random_values(size_t(n * hkv * dk), 10);
  const std::vector<float> v = random_values(size_t(n * hkv * dv), 11);
  // Repeat each KV head for its group: heads 0,1 read KV head 0; 2,3 read 1.
  std::vector<float> k4(size_t(n * h * dk)), v4(size_t(n * h * dv));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t hh = 0; hh < h; ++hh) {
      std::copy_n(&k[size_t((t * hkv + hh / 2) * dk)], dk, &k4[size_t((t * h + hh) * dk)]);
      std::copy_n(&v[size_t((t * hkv + hh / 2) * dv)], dv, &v4[size_t((t * h + hh) * dv)]);
    }
  std::vector<float> a(size_t(n * h * dv)), b(a.size());
  ref::attention(q.data(), k.data(), v.data(), n, 0, h, hkv, dk, dv, 0.3f, a.data());
  ref::attention(q.data(), k4.data(), v4.data(), n, 0, h, h, dk, dv, 0.3f, b.data());
  EXPECT_LT(max_abs_diff(a, b), 1e-6);

  // Token 2 sees only positions 0..2: changing position 3 and 4 changes nothing
  // for it, and running it alone at pos0 = 2 gives the same.
  std::vector<float> k_late = k;
  for (size_t i = size_t(3 * hkv * dk); i < k_late.size(); ++i) k_late[i] *= -3.0f;
  std::vector<float> c(a.size()), one(size_t(h * dv));
  ref::attention(q.data(), k_late.data(), v.data(), n, 0, h, hkv, dk, dv, 0.3f, c.data());
  for (size_t i = 0; i < size_t(3 * h * dv); ++i) EXPECT_EQ(a[i], c[i]) << i;
  EXPECT_NE(a.back(), c.back());
  ref::attention(q.data() + 2 * h * dk, k.data(), v.data(), 1, 2, h, hkv, dk, dv, 0.3f, one.data());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], a[size_t(2 * h * dv) + i], 1e-7);

  // llama.cpp's F16 rounding moves the result by F16 noise only.
  ref::attention(q.data(), k.data(), v.data(), n, 0, h, hkv, dk, dv, 0.3f, b.data(),
                 ref::ActRounding::GgmlCpu);
  EXPECT_LT(max_abs_diff(a, b), 3e-3);
  EXPECT_GT(max_abs_diff(a, b), 0.0);
}

// kv_b [r, n_heads * (d_nope + d_v)] as random F32 or quantized to Q8_0.
std::vector<uint8_t> make_kv_b(GgmlType type, const ref::MlaShape& s, uint32_t seed) {
  const int64_t rows = s.n_heads * (s.d_nope + s.d_v);
  const std::vector<float> w = random_values(size_t(rows * s.kv_lora_rank), seed);
  if (type == GgmlType::F32) {
    std::vector<uint8_t> bytes(w.size() * 4);
    std::memcpy(bytes.data(), w.data(), bytes.size());
    return bytes;
  }
  // Q8_0 by the textbook rule (d = amax / 127): any valid blocks will do.
  std::vector<kt::cpu::BlockQ8_0> blocks(w.size() / 32);
  for (size_t b = 0; b < blocks.size(); ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b * 32 + size_t(j)]));
    const float d = amax / 127.0f;
    blocks[b].d = kt::cpu::f32_to_fp16(d);
    for (int j = 0; j < 32; ++j) blocks[b].qs[j] = int8_t(std::lround(w[b * 32 + size_t(j)] / d));
  }
  std::vector<uint8_t> bytes(blocks.size() * sizeof(kt::cpu::BlockQ8_0));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

TEST(OpsRefAttention, AbsorbedMlaEqualsDecompressedMla) {
  const ref::MlaShape s{3, 16, 8, 12, 64};
  const int64_t n_kv = 7, pos0 = 4, n_new = 3, dq = s.d_nope + s.d_rope;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const std::vector<uint8_t> kv_b = make_kv_b(type, s, 12);
    const std::vector<float> latent = random_values(size_t(n_kv * s.kv_lora_rank), 13);
    const std::vector<float> k_pe = random_values(size_t(n_kv * s.d_rope), 14);
    const std::vector<float> q = random_values(size_t(n_new * s.n_heads * dq), 15);

    std::vector<float> k(size_t(n_kv * s.n_heads * dq)), v(size_t(n_kv * s.n_heads * s.d_v));
    ref::mla_decompress_kv(type, kv_b.data(), s, latent.data(), k_pe.data(), n_kv, k.data(),
                           v.data());
    // Every head's key ends with the token's shared rope key.
    EXPECT_EQ(k[size_t(2 * dq + s.d_nope + 3)], k_pe[3]);
    EXPECT_EQ(k[size_t((s.n_heads + 1) * dq + s.d_nope)], k_pe[size_t(s.d_rope)]);

    std::vector<float> plain(size_t(n_new * s.n_heads * s.d_v)), absorbed(plain.size());
    ref::attention(q.data(), k.data(), v.data(), n_new, pos0, s.n_heads, s.n_heads, dq, s.d_v, 0.2f,
                   plain.data());
    ref::mla_attention_absorbed(type, kv_b.data(), s, q.data(), latent.data(), k_pe.data(), n_new,
                                pos0, 0.2f, absorbed.data());
    EXPECT_LT(max_abs_diff(plain, absorbed), 1e-5) << kt::type_name(type);
    double norm = 0;
    for (float x : plain) norm = std::max(norm, std::fabs(double(x)));
    EXPECT_GT(norm, 0.1);  // not trivially equal
  }
}

// ---- mixture of experts --------------------------------------------------------

float logit_of(float p) { return std::log(p / (1.0f - p)); }

TEST(OpsRefMoe, SoftmaxTopKWithNormIsSoftmaxOverTheChosen) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.1f, 0.9f, -0.4f, 1.7f};
  ref::MoeRouting r;
  r.n_expert = 6;
  r.n_used = 2;
  r.norm_weights = true;
  int32_t ids[2];
  float w[2];
  ref::moe_route(logits.data(), 1, r, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 5);
  // Mixtral: softmax over the two chosen logits.
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(1.7 - 2.1)), 1e-6);
  EXPECT_NEAR(w[1], 1.0 / (1.0 + std::exp(2.1 - 1.7)), 1e-6);

  // Without norm (Qwen2-MoE, DeepSeek-V2): the full softmax's probabilities.
  r.norm_weights = false;
  ref::moe_route(logits.data(), 1, r, ids, w);
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  EXPECT_NEAR(w[0], std::exp(2.1) / z, 1e-6);
  EXPECT_NEAR(w[1], std::exp(1.7) / z, 1e-6);
}

TEST(OpsRefMoe, SigmoidRoutingUsesTheBiasToChooseButNotToWeigh) {
  // Probabilities 0.9, 0.8, 0.3, 0.6; the bias lifts expert 2 above the others.
  const std::vector<float> logits = {logit_of(0.9f), logit_of(0.8f), logit_of(0.3f),
                                     logit_of(0.6f)};
  const std::vector<float> bias = {0.05f, -0.1f, 0.7f, 0.02f};  // selection 0.95, 0.7, 1.0, 0.62
  ref::MoeRouting r;
  r.n_expert = 4;
  r.n_used = 2;
  r.gating = ref::MoeGating::Sigmoid;
  r.selection_bias = bias.data();
  int32_t ids[2];
  float w[2];
  ref::moe_route(logits.data(), 1, r, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(w[0], 0.3f, 1e-6);  // sigmoid(logit), not 1.0
  EXPECT_NEAR(w[1], 0.9f, 1e-6);

  // DeepSeek-V3: normalised, then scaled by expert_weights_scale.
  r.norm_weights = true;
  r.weights_scale = 2.5f;
  ref::moe_route(logits.data(), 1, r, ids, w);
  EXPECT_NEAR(w[0], 2.5 * 0.3 / 1.2, 1e-6);
  EXPECT_NEAR(w[1], 2.5 * 0.9 / 1.2, 1e-6);
}

TEST(OpsRefMoe, GroupedTopKKeepsOnlyTheBestGroups) {
  // 8 experts in 4 groups of 2; group scores (sum of the two) 1.0, 1.15, 1.02, 0.5.
  const std::vector<float> probs = {0.9f, 0.1f, 0.6f, 0.55f, 0.5f, 0.52f, 0.3f, 0.2f};
  std::vector<float> logits;
  for (float p : probs) logits.push_back(logit_of(p));
  ref::MoeRouting r;
  r.n_expert = 8;
  r.n_used = 2;
  r.gating = ref::MoeGating::Sigmoid;
  r.n_group = 4;
  r.topk_group = 2;  // groups 1 and 2 survive; expert 0 (0.9) is out
  int32_t ids[2];
  float w[2], margin;
  ref::moe_route(logits.data(), 1, r, ids, w, &margin);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_NEAR(w[0], 0.6f, 1e-6);
  // The closest call: group 2 (1.02) beat group 0 (1.0).
  EXPECT_NEAR(margin, 0.02f, 1e-5);

  r.n_group = 1;  // ungrouped: the best two overall
  ref::moe_route(logits.data(), 1, r, ids, w, &margin);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(margin, 0.6f - 0.55f, 1e-5);
}

TEST(OpsRefMoe, RunnerUpReplacesTheWeakestChoice) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.1f,  0.9f, -0.4f, 1.7f,   // token 0
                                     1.0f, 0.5f,  -0.5f, 0.1f, 0.2f,  0.3f};  // token 1
  ref::MoeRouting r;
  r.n_expert = 6;
  r.n_used = 2;
  r.norm_weights = true;
  int32_t ids[4];
  float w[4];
  const uint8_t swap[2] = {1, 0};
  ref::moe_route(logits.data(), 2, r, ids, w, nullptr, swap);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);  // 0.9 in place of 1.7
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(0.9 - 2.1)), 1e-6);
  EXPECT_EQ(ids[2], 0);  // token 1 untouched
  EXPECT_EQ(ids[3], 1);
}

TEST(OpsRefMoe, ExpertsAreWeightedSumsOfTheirSlices) {
  const int64_t n_embd = 32, n_ff = 16, n_expert = 3;
  const std::vector<float> gate = random_values(size_t(n_expert * n_ff * n_embd), 20);
  const std::vector<float> up = random_values(gate.size(), 21);
  const std::vector<float> down = random_values(gate.size(), 22);
  const ref::FfnWeights all{GgmlType::F32, GgmlType::F32, GgmlType::F32, gate.data(),
                            up.data(),     down.data(),   n_embd,        n_ff};
  auto slice = [&](int64_t e) {
    ref::FfnWeights f = all;
    f.gate = gate.data() + e * n_ff * n_embd;
    f.up = up.data() + e * n_ff * n_embd;
    f.down = down.data() + e * n_embd * n_ff;
    return f;
  };
  const std::vector<float> x = random_values(size_t(2 * n_embd), 23);
  const int32_t ids[4] = {2, 0, 1, 2};
  const float weights[4] = {0.7f, 0.3f, 1.5f, -0.25f};
  std::vector<float> out(size_t(2 * n_embd));
  ref::moe_experts(all, n_expert, x.data(), 2, ids, weights, 2, out.data());

  std::vector<float> y2(static_cast<size_t>(n_embd)), y0(y2.size()), y1(y2.size()), y2b(y2.size());
  ref::ffn_swiglu(slice(2), x.data(), 1, y2.data());
  ref::ffn_swiglu(slice(0), x.data(), 1, y0.data());
  ref::ffn_swiglu(slice(1), x.data() + n_embd, 1, y1.data());
  ref::ffn_swiglu(slice(2), x.data() + n_embd, 1, y2b.data());
  for (int64_t i = 0; i < n_embd; ++i) {
    EXPECT_NEAR(out[size_t(i)], 0.7 * y2[size_t(i)] + 0.3 * y0[size_t(i)], 1e-5);
    EXPECT_NEAR(out[size_t(n_embd + i)], 1.5 * y1[size_t(i)] - 0.25 * y2b[size_t(i)], 1e-5);
  }
  // Hand check of one dense FFN output value: down . (silu(gate x) * up x).
  std::vector<double> h(static_cast<size_t>(n_ff));
  for (int64_t f = 0; f < n_ff; ++f) {
    double g = 0, u = 0;
    for (int64_t i = 0; i < n_embd; ++i) {
      g += double(gate[size_t(f * n_embd + i)]) * x[size_t(i)];
      u += double(up[size_t(f * n_embd + i)]) * x[size_t(i)];
    }
    h[size_t(f)] = g / (1.0 + std::exp(-g)) * u;
  }
  double o = 0;
  for (int64_t f = 0; f < n_ff; ++f) o += double(down[size_t(f)]) * h[size_t(f)];
  EXPECT_NEAR(y0[0], o, 1e-5);
}

}  // namespace
