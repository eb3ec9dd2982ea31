// Random inputs for the quantized-product tests (matmul_q_test, matmul_bf16_test).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

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

}  // namespace kt::test
