// Reading and writing rows of a KV cache of any element type (F32, F16, BF16)
// as floats, and the runs of a step: maximal groups of consecutive tokens of one
// sequence at consecutive positions, which attention handles as one causal block.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel.h"

namespace kt::kern {

void store_row(GgmlType type, const float* src, int64_t n, void* dst);
void load_rows(GgmlType type, const void* src, int64_t n, float* dst);

// Cache rows [0, n_pos) of one slot as floats: k into k_out [n_pos][k_cols], v likewise.
void load_cache(const KvView& kv, int64_t slot, int64_t n_pos, std::vector<float>& k_out,
                std::vector<float>& v_out);

struct Run {
  int64_t first;  // token index in the step
  int64_t n;      // tokens
  int32_t slot;
  int32_t pos0;   // position of the first
};
std::vector<Run> step_runs(const Step& s);

}  // namespace kt::kern
