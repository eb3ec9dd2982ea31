#include "kernels/cpu/kv_rows.h"

#include <cstring>

#include "kernels/cpu/float_ref.h"

namespace kt::kern {

void store_row(GgmlType type, const float* src, int64_t n, void* dst) {
  switch (type) {
    case GgmlType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = cpu::f32_to_fp16(src[i]);
      return;
    }
    case GgmlType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = cpu::f32_to_bf16(src[i]);
      return;
    }
    default:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
  }
}

void load_rows(GgmlType type, const void* src, int64_t n, float* dst) {
  switch (type) {
    case GgmlType::F16:
      cpu::dequant_row_f16(src, dst, n);
      return;
    case GgmlType::BF16:
      cpu::dequant_row_bf16(src, dst, n);
      return;
    default:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
  }
}

void load_cache(const KvView& kv, int64_t slot, int64_t n_pos, std::vector<float>& k_out,
                std::vector<float>& v_out) {
  k_out.resize(size_t(n_pos * kv.k_cols));
  v_out.resize(size_t(n_pos * kv.v_cols));
  // Rows of one slot are contiguous.
  load_rows(kv.type, kv.k_row(slot, 0), n_pos * kv.k_cols, k_out.data());
  load_rows(kv.type, kv.v_row(slot, 0), n_pos * kv.v_cols, v_out.data());
}

std::vector<Run> step_runs(const Step& s) {
  std::vector<Run> runs;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    if (!runs.empty()) {
      Run& r = runs.back();
      if (s.slot[t] == r.slot && s.pos[t] == r.pos0 + r.n) {
        ++r.n;
        continue;
      }
    }
    runs.push_back(Run{t, 1, s.slot[t], s.pos[t]});
  }
  return runs;
}

}  // namespace kt::kern
