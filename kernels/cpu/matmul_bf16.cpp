// matmul_bf16's dispatch (matmul_bf16.h), compiled for plain x86-64: the work
// is in matmul_bf16_amx.cpp, called only where cpu_features says it may run.
#include "kernels/cpu/matmul_bf16.h"

#include "kernels/cpu/cpu_features.h"

namespace kt::cpu {

bool matmul_bf16_available(GgmlType t) {
#if defined(__x86_64__)
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) || active_isa() < Isa::Avx512) return false;
  return type_traits(t).dequant_row != nullptr;
#else
  (void)t;
  return false;
#endif
}

const char* matmul_bf16_impl() {
  if (!matmul_bf16_available(GgmlType::F32)) return "unsupported";
  return active_isa() >= Isa::Amx ? "amx-bf16" : "avx512-bf16";
}

size_t bf16_acts_bytes(int64_t n_in, int64_t n_batch) {
  return size_t((n_batch + 15) / 16) * size_t((n_in + 31) / 32 * 32) * 32;
}

void pack_bf16_acts(const float* x, int64_t x_stride, int64_t n_in, int64_t n_batch, void* dst) {
  matmul_detail::bf16_pack(x, x_stride, n_in, n_batch, dst);
}

void matmul_bf16(GgmlType t, const void* w, uint64_t w_row_bytes, int64_t n_in, const void* acts, int64_t n_batch,
                 float* y, int64_t y_stride, int64_t o_begin, int64_t o_end, bool emulate) {
  if (o_begin >= o_end || n_batch <= 0) return;
  matmul_detail::bf16_run(t, static_cast<const uint8_t*>(w), w_row_bytes, n_in, static_cast<const uint8_t*>(acts),
                          n_batch, y, y_stride, o_begin, o_end, !emulate && active_isa() >= Isa::Amx,
                          cpu_features().avx512bf16);
}

}  // namespace kt::cpu
