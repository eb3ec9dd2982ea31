// Random inputs for the quantized-product tests (matmul_q_test, matmul_bf16_test,
// matmul_i8_test) and the scale their tolerances are held to.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/ops_ref.h"
#include "kernels/random_blocks.h"
#include "kernels/type_traits.h"

namespace kt::test {

// Non-zero activations of both signs with magnitudes that change from block to
// block (2^-6..2^6), so per-block scales differ; row r at x + r * stride.
inline std::vector<float> random_acts(int64_t rows, int64_t n, int64_t stride, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(size_t(rows * stride), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 32 == 0) scale = std::ldexp(1.0f, int(rng.next() % 13) - 6);
      const float mag = 0.05f + 0.95f * rng.uniform();
      x[size_t(r * stride + i)] = (rng.next() & 1 ? scale : -scale) * mag;
    }
  }
  return x;
}

// n_out rows of n_in values of type t, random valid blocks.
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t n_out, int64_t n_in, uint64_t seed) {
  std::vector<uint8_t> w(size_t(type_traits(t).row_bytes(n_in) * uint64_t(n_out)));
  SplitMix64 rng(seed);
  fill_random_blocks(t, w.data(), w.size(), rng);
  return w;
}

// sum_i |w_i x_i| per output [b * n_out + o] (the scale of a product's float
// rounding), with x rounded as `rounding` has the kernels see it.
inline std::vector<double> magnitudes(GgmlType t, const std::vector<uint8_t>& w, int64_t n_out, int64_t n_in,
                                      const std::vector<float>& x, int64_t n_batch,
                                      cpu::ref::ActRounding rounding = cpu::ref::ActRounding::Exact) {
  const auto& tt = type_traits(t);
  std::vector<float> wrow(static_cast<size_t>(n_in)), xr(static_cast<size_t>(n_in));
  std::vector<double> mag(size_t(n_batch * n_out));
  for (int64_t b = 0; b < n_batch; ++b) {
    cpu::ref::round_activations(t, rounding, x.data() + b * n_in, n_in, xr.data());
    for (int64_t o = 0; o < n_out; ++o) {
      tt.dequant_row(w.data() + uint64_t(o) * tt.row_bytes(n_in), wrow.data(), n_in);
      double s = 0.0;
      for (int64_t i = 0; i < n_in; ++i) s += std::fabs(double(wrow[size_t(i)]) * double(xr[size_t(i)]));
      mag[size_t(b * n_out + o)] = s;
    }
  }
  return mag;
}

// A 64-byte aligned buffer of n bytes.
struct AlignedBytes {
  std::vector<uint8_t> v;
  uint8_t* p;
  explicit AlignedBytes(size_t n) : v(n + 64) { p = v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64; }
};

}  // namespace kt::test
