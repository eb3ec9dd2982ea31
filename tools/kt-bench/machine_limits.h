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

// The GPU's memory bandwidth, the limit an all-GPU decode is held against: a
// device-to-device copy of `bytes` on CUDA device `index`, each byte read and
// written, so 2 x bytes a copy (as test/cuda/cuda_bench_test.cpp and
// ../shared/PEERS.md count it), best of `reps`. Through the runtime's device
// API, so this needs no CUDA header. gbps stays 0 and `error` says why where
// the build has no CUDA, the machine no GPU, or the buffers do not fit.
struct GpuCopyResult {
  double gbps = 0;
  uint64_t bytes = 0;
  std::string name;   // "NVIDIA H100 80GB HBM3"
  std::string error;
};
GpuCopyResult measure_gpu_copy(int index, uint64_t bytes, int reps);

// CPU model and the features kernels dispatch on.
std::string cpu_description();

// The last-level caches' bytes, all instances together (sysfs; else what the
// C library reports for one; 0 when neither says).
uint64_t l3_cache_bytes();

}  // namespace kt::bench
