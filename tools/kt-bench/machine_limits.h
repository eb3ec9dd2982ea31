// The machine's limits, measured in the same run as the figures held against
// them: DRAM bandwidth (STREAM triad over buffers far larger than the caches,
// all threads) and peak matrix throughput (oneDNN BF16 and F32 GEMM, which uses
// AMX or AVX-512 BF16 where the CPU has them).
#pragma once

#include <cstdint>
#include <string>

namespace kt::bench {

struct TriadResult {
  double gbps = 0;        // best of the repetitions, STREAM's byte count (24 B per element)
  uint64_t bytes = 0;     // working set
  int threads = 0;
};
TriadResult measure_triad(uint64_t working_set_bytes, int threads, int reps);

struct GemmResult {
  double tflops = 0;
  int64_t m = 0, n = 0, k = 0;
  std::string type;       // "bf16" or "f32"
  std::string impl;       // oneDNN's implementation name (shows amx / avx512_core_bf16 / ...)
};
// On `threads` threads: oneDNN runs on OpenMP's threads, which kt's own pool
// does not govern, so they are set to the same count for the call.
GemmResult measure_gemm_onednn(int64_t m, int64_t n, int64_t k, bool bf16, int reps, int threads);

// CPU model and the features kernels dispatch on.
std::string cpu_description();

// The last-level caches' bytes, all instances together (sysfs; else what the
// C library reports for one; 0 when neither says).
uint64_t l3_cache_bytes();

}  // namespace kt::bench
