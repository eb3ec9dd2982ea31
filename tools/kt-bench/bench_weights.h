// What kt-bench's kernel benchmarks share: a weight tensor of random valid
// blocks (any GGUF type) and its view as the registry's kernels take it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/random_blocks.h"

namespace kt::bench {

// n_mat matrices of n_out rows of n_in values, random valid blocks of `t`.
inline std::vector<uint8_t> random_weight_bytes(GgmlType t, int64_t n_in, int64_t n_out, int64_t n_mat,
                                                SplitMix64& rng) {
  std::vector<uint8_t> b(size_t(type_traits(t).row_bytes(n_in) * uint64_t(n_out * n_mat)));
  fill_random_blocks(t, b.data(), b.size(), rng);
  return b;
}

inline kern::WeightView weight_view(const std::vector<uint8_t>& bytes, GgmlType t, int64_t n_in, int64_t n_out,
                                    int64_t n_mat, const char* name) {
  kern::WeightView v;
  v.data = v.host = bytes.data();
  v.type = t;
  v.name = name;
  v.ne[0] = n_in;
  v.ne[1] = n_out;
  v.ne[2] = n_mat;
  v.set_packed_strides();
  return v;
}

}  // namespace kt::bench
