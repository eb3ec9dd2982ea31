// kt-bench matmul: matmul_q's speed on a weight matrix streamed from DRAM, as GB/s
// of weights against the STREAM triad measured in the same run (decode is bound
// by memory bandwidth) and, for batches, GFLOP/s.
//
// The matrix is repeated in enough copies to fill 4x the last-level cache, and
// each call reads the next copy, so no call finds its weights in cache. A call is
// what a model layer does: quantize the activation rows (one thread), then split
// the output rows across the threads of a small spinning pool (no thread start-up
// inside the timing).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_i8.h"
#include "kernels/cpu/matmul_q.h"
#include "runtime/thread_pool.h"
#include "kernels/random_blocks.h"
#include "kernels/type_traits.h"
#include "tools/kt-bench/machine_limits.h"

namespace kt::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The runtime's own pool (spinning workers, denormals flushed): what kernels
// get in kt-exec, so the figures are the executor's.
class SpinPool {
 public:
  explicit SpinPool(int threads) : pool_(threads) {}
  // Runs fn(thread_index) on every thread (the caller is thread 0) and waits.
  void run(const std::function<void(int)>& fn) {
    pool_.for_range(pool_.n_threads(), [&](int64_t, int64_t, int t) { fn(t); });
  }
  int size() const { return pool_.n_threads(); }

 private:
  kt::ThreadPool pool_;
};

uint64_t last_level_cache_bytes() {
  // sysfs first: in VMs sysconf can report the host's cache (320 MiB for 32).
  for (const char* idx : {"index3", "index2"}) {
    FILE* f = std::fopen((std::string("/sys/devices/system/cpu/cpu0/cache/") + idx + "/size").c_str(), "r");
    if (!f) continue;
    unsigned long kib = 0;
    char unit = 0;
    const int got = std::fscanf(f, "%lu%c", &kib, &unit);
    std::fclose(f);
    if (got >= 1 && kib > 0) return uint64_t(kib) << (unit == 'M' ? 20 : 10);
  }
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l3 > 0 ? uint64_t(l3) : uint64_t(32) << 20;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

struct Result {
  std::string type, impl;
  int64_t batch;
  int threads;
  double ms, gbps, gflops, quant_ms, median_ms;  // ms, gbps, gflops: the best call
};

int usage() {
  std::fprintf(stderr,
               "usage: kt-bench matmul [--type Q4_K[,Q6_K,...]] [--rows N] [--cols K] [--batch B[,B...]]\n"
               "                       [--threads T[,T...]] [--reps R] [--isa scalar|avx2|avx512|amx] [--no-triad]\n"
               "                       [--hot]   (one copy of the weights: cache-resident, the compute ceiling)\n"
               "                       [--bf16]  (matmul_bf16: weights and activations rounded to BF16)\n"
               "                       [--int8]  (matmul_i8: weights repacked to int8 first, as AMXInt8 plans)\n"
               "                       [--int4]  (matmul_i8: weights repacked to int4 first, as AMXInt4 plans)\n"
               "  defaults: --type Q4_K --rows 14336 --cols 4096 --batch 1 --threads <all> --reps 20\n");
  return 2;
}

}  // namespace

int run_matmul_bench(int argc, char** argv) {
  std::vector<std::string> types = {"Q4_K"};
  std::vector<int64_t> batches = {1};
  std::vector<int> thread_counts = {int(std::thread::hardware_concurrency())};
  int64_t rows = 14336, cols = 4096;
  int reps = 20;
  bool triad = true;
  bool hot = false;  // one copy: weights stay in cache (compute ceiling)
  bool bf16 = false;  // matmul_bf16 (BF16 rounding) instead of matmul_q
  std::optional<cpu::WeightBits> repacked;  // matmul_i8 over the weights repacked to int8 / int4
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--type" && has) {
      types = split(argv[++i]);
    } else if (a == "--rows" && has) {
      rows = std::atoll(argv[++i]);
    } else if (a == "--cols" && has) {
      cols = std::atoll(argv[++i]);
    } else if (a == "--batch" && has) {
      batches.clear();
      for (const auto& s : split(argv[++i])) batches.push_back(std::atoll(s.c_str()));
    } else if (a == "--threads" && has) {
      thread_counts.clear();
      for (const auto& s : split(argv[++i])) thread_counts.push_back(std::atoi(s.c_str()));
    } else if (a == "--reps" && has) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--isa" && has) {
      cpu::Isa isa;
      if (!cpu::parse_isa(argv[++i], &isa)) return usage();
      cpu::set_isa_limit(isa);
    } else if (a == "--no-triad") {
      triad = false;
    } else if (a == "--hot") {
      hot = true;
    } else if (a == "--bf16") {
      bf16 = true;
    } else if (a == "--int8" && !repacked) {
      repacked = cpu::WeightBits::Int8;
    } else if (a == "--int4" && !repacked) {
      repacked = cpu::WeightBits::Int4;
    } else {
      return usage();
    }
  }
  if (rows < 1 || cols < 1 || reps < 1 || batches.empty() || thread_counts.empty()) return usage();
  for (int64_t b : batches)
    if (b < 1) return usage();
  for (int t : thread_counts)
    if (t < 1) return usage();
  if (bf16 && repacked) return usage();
  const bool i8 = repacked.has_value();  // matmul_i8's path, int8 or int4 weights
  const cpu::WeightBits bits = repacked.value_or(cpu::WeightBits::Int8);
  // What the weights are as the kernel reads them (the plan's layout names).
  const char* weights = !repacked ? "gguf" : bits == cpu::WeightBits::Int4 ? "int4" : "int8";

  std::printf("cpu: %s\n", cpu_description().c_str());
  std::printf("isa: %s (detected %s)\n", cpu::isa_name(cpu::active_isa()), cpu::isa_name(cpu::detected_isa()));
  const uint64_t llc = last_level_cache_bytes();
  std::vector<std::pair<int, double>> triads;
  if (triad) {
    for (int t : thread_counts) {
      // 1 GiB (or 8x the LLC) is plenty to leave the caches; best of 3.
      const uint64_t ws = std::max<uint64_t>(uint64_t(1) << 30, 8 * llc);
      triads.push_back({t, measure_triad(ws, t, 3).gbps});
      std::printf("triad, %d thread%s: %.1f GB/s\n", t, t == 1 ? "" : "s", triads.back().second);
    }
  }
  auto triad_for = [&](int t) {
    for (auto& p : triads)
      if (p.first == t) return p.second;
    return 0.0;
  };

  std::vector<Result> results;
  for (const std::string& tname : types) {
    const TypeTraits* tt = find_type_by_name(tname);
    if (!tt || !cpu::matmul_q_supported(tt->type) || !random_blocks_supported(tt->type)) {
      std::fprintf(stderr, "kt-bench matmul: type %s is not supported\n", tname.c_str());
      return 2;
    }
    if (cols % tt->block_size != 0) {
      std::fprintf(stderr, "kt-bench matmul: --cols %lld is not a multiple of %s's block (%lld)\n",
                   (long long)cols, tname.c_str(), (long long)tt->block_size);
      return 2;
    }
    const GgmlType t = tt->type;
    const uint64_t row_bytes = tt->row_bytes(cols);
    const uint64_t bytes = i8 ? cpu::i8_matrix_bytes(cols, rows, bits) : row_bytes * uint64_t(rows);
    const int copies = hot ? 1 : int(std::max<uint64_t>(2, (4 * llc + bytes - 1) / bytes));
    std::unique_ptr<uint8_t[]> w(new (std::align_val_t(64)) uint8_t[bytes * uint64_t(copies)]);
    SplitMix64 rng(42);
    if (i8) {  // the file's blocks, repacked as the runtime repacks an "int8" or "int4" weight
      std::vector<uint8_t> file(row_bytes * uint64_t(rows));
      fill_random_blocks(t, file.data(), file.size(), rng);
      cpu::repack_i8_matrices(t, file.data(), row_bytes, file.size(), cols, rows, 1, w.get(),
                              int(std::thread::hardware_concurrency()), bits);
    } else {
      fill_random_blocks(t, w.get(), bytes, rng);
    }
    for (int c = 1; c < copies; ++c) std::memcpy(w.get() + bytes * uint64_t(c), w.get(), bytes);
    std::printf("\n%s: %lld x %lld, %.1f MB per copy, %d copies (LLC %.0f MiB), kernel %s%s%s\n", tname.c_str(),
                (long long)rows, (long long)cols, double(bytes) / 1e6, copies, double(llc) / double(1 << 20),
                i8 ? cpu::matmul_i8_impl() : cpu::matmul_q_impl(t), i8 ? " over " : "", i8 ? weights : "");

    for (int threads : thread_counts) {
      SpinPool pool(threads);
      for (int64_t batch : batches) {
        std::vector<float> x(size_t(batch * cols));
        for (auto& v : x) v = 2.0f * rng.uniform() - 1.0f;
        const size_t ab = bf16   ? (cpu::bf16_acts_bytes(cols, batch) + size_t(batch) - 1) / size_t(batch)
                          : i8 ? cpu::i8_act_row_bytes(cols)
                                 : cpu::act_row_bytes(t, cols);
        std::unique_ptr<uint8_t[]> xq(new (std::align_val_t(64)) uint8_t[ab * size_t(batch)]);
        const size_t tiles_bytes = i8 ? cpu::i8_tiles_bytes(cols, batch) : 0;
        std::unique_ptr<uint8_t[]> tiles(new (std::align_val_t(64)) uint8_t[std::max<size_t>(tiles_bytes, 64)]);
        std::vector<float> y(size_t(batch * rows));
        int copy = 0;
        double quant_s = 0;
        auto call = [&] {
          const uint8_t* wc = w.get() + bytes * uint64_t(copy);
          copy = (copy + 1) % copies;
          const auto q0 = Clock::now();
          if (bf16) {
            cpu::pack_bf16_acts(x.data(), cols, cols, batch, xq.get());
          } else if (i8) {
            cpu::quantize_acts_i8(x.data(), cols, batch, cols, xq.get());
            if (tiles_bytes > 0) cpu::tile_acts_i8(xq.get(), cols, batch, tiles.get());
          } else {
            cpu::quantize_acts(t, x.data(), cols, batch, cols, xq.get());
          }
          quant_s += std::chrono::duration<double>(Clock::now() - q0).count();
          pool.run([&](int ti) {
            // Whole 16-row chunks per thread, so no two threads share a cache line of y.
            const int64_t chunks = (rows + 15) / 16;
            const int64_t o0 = std::min(rows, chunks * ti / threads * 16);
            const int64_t o1 = std::min(rows, chunks * (ti + 1) / threads * 16);
            if (bf16) cpu::matmul_bf16(t, wc, row_bytes, cols, xq.get(), batch, y.data(), rows, o0, o1);
            else if (i8)
              cpu::matmul_i8(wc, cols, rows, xq.get(), tiles_bytes ? tiles.get() : nullptr, batch, y.data(), rows, o0,
                             o1, bits);
            else cpu::matmul_q(t, wc, row_bytes, cols, xq.get(), batch, y.data(), rows, o0, o1);
          });
        };
        for (int i = 0; i < std::min(copies, 3); ++i) call();  // warm-up: page faults, pool spin-up
        quant_s = 0;
        std::vector<double> times;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = Clock::now();
          call();
          times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        // Best call, as the triad reports its best repetition (what the hardware
        // does when nothing else runs); the median beside it shows the spread.
        std::sort(times.begin(), times.end());
        const double best = times.front(), med = times[times.size() / 2];
        Result res{tname, bf16 ? cpu::matmul_bf16_impl() : i8 ? cpu::matmul_i8_impl() : cpu::matmul_q_impl(t), batch, threads, best * 1e3, double(bytes) / best / 1e9,
                   2.0 * double(rows) * double(cols) * double(batch) / best / 1e9, quant_s / reps * 1e3, med * 1e3};
        results.push_back(res);
        const double tr = triad_for(threads);
        std::printf("  %-6s batch %3lld  threads %2d  %8.3f ms  %7.2f GB/s", tname.c_str(), (long long)batch, threads,
                    res.ms, res.gbps);
        if (tr > 0) std::printf(" (%5.1f%% of triad)", 100.0 * res.gbps / tr);
        std::printf("  %8.1f GFLOP/s  median %.3f ms  quantize %.3f ms\n", res.gflops, res.median_ms, res.quant_ms);
      }
    }
  }
  nlohmann::json j = nlohmann::json::array();
  for (const Result& r : results)
    j.push_back({{"type", r.type}, {"impl", r.impl}, {"batch", r.batch}, {"threads", r.threads}, {"ms", r.ms},
                 {"median_ms", r.median_ms},
                 {"gbps", r.gbps}, {"triad_gbps", triad_for(r.threads)}, {"gflops", r.gflops}});
  std::printf("%s\n",
              nlohmann::json{{"matmul", j}, {"rows", rows}, {"cols", cols}, {"weights", weights}}.dump().c_str());
  return 0;
}

}  // namespace kt::bench
