// kt-bench: speed as ratios to this machine's limits, measured in the same run.
// Today: the limits themselves (DRAM triad, oneDNN BF16/F32 GEMM) and
// `kt-bench matmul` (matmul_bench.cpp: CPU matmul over GGUF blocks). End-to-end
// figures join as the runtime lands.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/kt-bench/machine_limits.h"

namespace kt::bench {
int run_matmul_bench(int argc, char** argv);  // matmul_bench.cpp
int run_e2e_bench(int argc, char** argv);     // e2e_bench.cpp
int run_moe_bench(int argc, char** argv);     // moe_bench.cpp
int run_mla_bench(int argc, char** argv);     // mla_bench.cpp
int run_pool_bench(int argc, char** argv);    // pool_bench.cpp
}

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "matmul")) return kt::bench::run_matmul_bench(argc - 2, argv + 2);
  if (argc > 1 && !std::strcmp(argv[1], "e2e")) return kt::bench::run_e2e_bench(argc - 2, argv + 2);
  if (argc > 1 && !std::strcmp(argv[1], "moe")) return kt::bench::run_moe_bench(argc - 2, argv + 2);
  if (argc > 1 && !std::strcmp(argv[1], "mla")) return kt::bench::run_mla_bench(argc - 2, argv + 2);
  if (argc > 1 && !std::strcmp(argv[1], "pool")) return kt::bench::run_pool_bench(argc - 2, argv + 2);
  int threads = int(std::thread::hardware_concurrency());
  double gib = 3.0;  // triad working set: far above any L3 (the device's is 300 MiB)
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--triad-gib") && i + 1 < argc) gib = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: kt-bench [--threads N] [--triad-gib G] [--quick]\n"
                           "       kt-bench matmul --help\n"
                           "       kt-bench e2e PLAN.ktp --help\n"
                           "       kt-bench moe --help\n"
                           "       kt-bench mla --help\n"
                           "       kt-bench pool [--threads N]\n");
      return 2;
    }
  }
  if (threads < 1 || gib <= 0) {
    std::fprintf(stderr, "kt-bench: --threads and --triad-gib must be positive\n");
    return 2;
  }
  using namespace kt::bench;
  std::printf("cpu: %s\n", cpu_description().c_str());
  const TriadResult triad = measure_triad(uint64_t(gib * double(1ull << 30)), threads, quick ? 3 : 10);
  const TriadResult triad1 = measure_triad(uint64_t(gib * double(1ull << 30)), 1, quick ? 2 : 3);
  const int64_t sz = quick ? 1024 : 4096;
  const GemmResult bf16 = measure_gemm_onednn(sz, sz, sz, true, quick ? 3 : 10, threads);
  const GemmResult f32 = measure_gemm_onednn(sz, sz, sz, false, quick ? 3 : 10, threads);
  std::printf("%-34s %10s   %s\n", "limit", "value", "how");
  std::printf("%-34s %7.1f GB/s   triad, %d threads, %.1f GiB working set\n", "DRAM bandwidth", triad.gbps, threads,
              double(triad.bytes) / double(1ull << 30));
  std::printf("%-34s %7.1f GB/s   triad, 1 thread\n", "DRAM bandwidth, one core", triad1.gbps);
  std::printf("%-34s %7.2f TFLOP/s %lldx%lldx%lld, %s (%.3f per thread)\n", "BF16 GEMM (oneDNN)", bf16.tflops,
              (long long)sz, (long long)sz, (long long)sz, bf16.impl.c_str(), bf16.tflops / threads);
  std::printf("%-34s %7.2f TFLOP/s %lldx%lldx%lld, %s\n", "F32 GEMM (oneDNN)", f32.tflops, (long long)sz, (long long)sz,
              (long long)sz, f32.impl.c_str());
  nlohmann::json j = {{"cpu", cpu_description()},
                      {"threads", threads},
                      {"triad_gbps", triad.gbps},
                      {"triad_1t_gbps", triad1.gbps},
                      {"gemm_bf16_tflops", bf16.tflops},
                      {"gemm_bf16_impl", bf16.impl},
                      {"gemm_f32_tflops", f32.tflops}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
