// Activation rows already rounded to 8-bit blocks, where the kernel that
// writes the rows rounds them too (cuda.add_rms_norm's optional third output,
// made by kt-fuse-calls) so the products reading them need no rounding kernel
// of their own (ncu: 2.3 us a launch, 188 of them in a V2-Lite decode step).
//
// The buffer is a plan buffer of I32 words, max_rows rows of n / 4 + n / act
// words: q [max_rows][n] int8, then d [max_rows][n / act] float scales, the
// layout MatmulOp's scratch holds after its own rounding (quantize_q8's bits).
#pragma once

#include <cstdint>

namespace kt::cuda {

struct RoundedRows {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  int act = 0;  // values a block: 32 (Q8_0) or 256 (Q8_K)
};

// Words a row of the buffer for rows of n values in blocks of act.
inline int64_t rounded_rows_cols(int64_t n, int act) { return n / 4 + n / act; }

// The block size a buffer of `cols` words a row holds for rows of n values
// (32 or 256), or 0 when it is neither.
inline int rounded_rows_act(int64_t n, int64_t cols) {
  for (int act : {32, 256})
    if (n % act == 0 && cols == rounded_rows_cols(n, act)) return act;
  return 0;
}

// Writable views of the buffer at data (max_rows rows of n values).
inline int8_t* rounded_q(void* data) { return static_cast<int8_t*>(data); }
inline float* rounded_d(void* data, int64_t max_rows, int64_t n) {
  return reinterpret_cast<float*>(static_cast<int8_t*>(data) + max_rows * n);
}
inline RoundedRows rounded_rows(const void* data, int64_t max_rows, int64_t n, int act) {
  auto* p = const_cast<void*>(data);
  return {rounded_q(p), rounded_d(p, max_rows, n), act};
}

}  // namespace kt::cuda
