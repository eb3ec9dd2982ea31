#include "tools/kt-bench/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include <dnnl.hpp>

#include "kernels/device.h"

namespace kt::bench {

using Clock = std::chrono::steady_clock;

GemmResult gemm_onednn(int64_t m, int64_t n, int64_t k, bool bf16, int reps);

TriadResult measure_triad(uint64_t working_set_bytes, int threads, int reps) {
  const size_t n = working_set_bytes / 3 / sizeof(double);
  // Uninitialised allocations: each thread first-touches its own slice, so pages
  // land on its NUMA node as they will for weights.
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  auto slice = [&](int t, size_t* lo, size_t* hi) {
    *lo = n * size_t(t) / size_t(threads);
    *hi = n * size_t(t + 1) / size_t(threads);
  };
  auto run = [&](auto body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        size_t lo, hi;
        slice(t, &lo, &hi);
        body(lo, hi);
      });
    for (auto& th : pool) th.join();
  };
  run([&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });
  double best = 0;
  const double s = 3.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    run([&](size_t lo, size_t hi) {
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, double(3 * n * sizeof(double)) / sec / 1e9);
  }
  if (a[n / 2] != 7.0) best = best;  // keep the stores observable
  return {best, uint64_t(3 * n * sizeof(double)), threads};
}

GpuCopyResult measure_gpu_copy(int index, uint64_t bytes, int reps) {
  GpuCopyResult r;
  r.bytes = bytes;
  kern::DeviceApi* api = kern::find_device_api("cuda");
  if (!api || index < 0 || index >= api->count()) {
    r.error = "no CUDA device " + std::to_string(index);
    return r;
  }
  r.name = api->name(index);
  void* src = api->alloc(index, bytes, &r.error);
  void* dst = src ? api->alloc(index, bytes, &r.error) : nullptr;
  void* queue = dst ? api->create_queue(index, &r.error) : nullptr;
  // Zeroed source: a copy's time does not depend on the values, and an
  // untouched allocation must not be what is measured.
  bool ok = queue && api->memset_zero(index, src, bytes, &r.error) && api->sync(queue, &r.error);
  for (int rep = 0; ok && rep <= reps; ++rep) {
    void* from = api->record_timed_event(queue, &r.error);
    ok = from && api->copy(dst, src, bytes, queue, &r.error);
    void* to = ok ? api->record_timed_event(queue, &r.error) : nullptr;
    ok = ok && to && api->sync(queue, &r.error);
    const double ms = ok ? api->elapsed_ms(from, to) : -1;
    if (from) api->release_event(from);
    if (to) api->release_event(to);
    if (!ok || ms <= 0) {
      if (r.error.empty()) r.error = "the copy's events gave no time";
      ok = false;
      break;
    }
    if (rep > 0) r.gbps = std::max(r.gbps, 2.0 * double(bytes) / (ms * 1e-3) / 1e9);  // rep 0 warms up
  }
  if (!ok) r.gbps = 0;
  if (queue) api->destroy_queue(index, queue);
  if (dst) api->free(index, dst);
  if (src) api->free(index, src);
  return r;
}

// Debian's oneDNN uses the OpenMP runtime (libgomp, loaded with it): its
// omp_set_num_threads holds the calling thread's parallel regions to n
// threads. Looked up at run time so kt-bench does not link OpenMP itself; a
// oneDNN on another runtime has no such symbol and keeps its own count.
static void set_onednn_threads(int n) {
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) f(n);
}

GemmResult measure_gemm_onednn(int64_t m, int64_t n, int64_t k, bool bf16, int reps, int threads) {
  set_onednn_threads(threads);
  try {
    return gemm_onednn(m, n, k, bf16, reps);
  } catch (const dnnl::error& e) {
    // oneDNN has no BF16 GEMM on CPUs without AVX-512 BF16 or AMX.
    return {0, m, n, k, bf16 ? "bf16" : "f32", std::string("unavailable: ") + e.what()};
  }
}

GemmResult gemm_onednn(int64_t m, int64_t n, int64_t k, bool bf16, int reps) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const auto dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::desc a_md({m, k}, dt, memory::format_tag::ab);
  memory::desc b_md({k, n}, dt, memory::format_tag::any);
  memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(a_md, b_md, c_md), eng);
  memory a(a_md, eng), b(pd.weights_desc(), eng), c(c_md, eng);
  // Non-zero inputs: some units short-cut zeros.
  std::memset(a.get_data_handle(), 0x3f, a_md.get_size());
  std::memset(b.get_data_handle(), 0x3f, pd.weights_desc().get_size());
  matmul mm(pd);
  const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  mm.execute(strm, args);  // warm-up: JIT and first touch
  strm.wait();
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    mm.execute(strm, args);
    strm.wait();
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * double(m) * double(n) * double(k) / sec / 1e12);
  }
  return {best, m, n, k, bf16 ? "bf16" : "f32", pd.impl_info_str()};
}

uint64_t l3_cache_bytes() {
  // Each L3 instance once: the CPUs sharing it name it.
  std::set<std::string> seen;
  uint64_t total = 0;
  for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/cache/index3/";
    std::ifstream size(dir + "size"), shared(dir + "shared_cpu_list");
    std::string sz, who;
    if (!(size >> sz) || !(shared >> who) || !seen.insert(who).second) continue;
    uint64_t v = std::strtoull(sz.c_str(), nullptr, 10);
    if (sz.back() == 'K') v <<= 10;
    if (sz.back() == 'M') v <<= 20;
    total += v;
  }
  if (total > 0) return total;
  const long one = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return one > 0 ? uint64_t(one) : 0;
}

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  std::string feats;
  for (const char* f : {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"})
    if (flags.find(std::string(" ") + f) != std::string::npos) feats += std::string(feats.empty() ? "" : " ") + f;
  return model + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads; " + feats + ")";
}

}  // namespace kt::bench
