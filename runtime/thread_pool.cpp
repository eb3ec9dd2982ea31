#include "runtime/thread_pool.h"

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kt {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// How long an idle worker spins before it sleeps: long enough to bridge the
// serial work between two calls of a step (a decode step has ~10 parallel
// calls per layer, and waking a sleeping thread costs tens of microseconds),
// short enough not to burn the cores between steps for long.
constexpr auto kSpin = std::chrono::milliseconds(3);

}  // namespace

void set_flush_denormals() {
#if defined(__x86_64__)
  // FTZ and DAZ: float results and operands below 1e-38 count as zero. Some
  // x86 cores take a microcode assist (~100 cycles) on every denormal, and
  // products of small quantization scales and activations can make them.
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

int physical_cores() {
  std::set<std::pair<int, int>> cores;  // (package, core)
  for (int cpu = 0;; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    int c = 0, p = 0;
    if (!(core >> c)) break;
    if (!(pkg >> p)) p = 0;
    cores.insert({p, c});
  }
  if (!cores.empty()) return int(cores.size());
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : physical_cores()) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  if (index >= parts_) return;
  const int64_t b = n_ * index / parts_, e = n_ * (index + 1) / parts_;
  if (b < e) (*fn_)(b, e, index);
}

void ThreadPool::for_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  fn_ = &fn;
  n_ = n;
  parts_ = int(std::min<int64_t>(n, n_threads_));
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock orders the job's fields before the generation a sleeper wakes to.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
  run_chunk(0);
  while (pending_.load(std::memory_order_acquire) > 0) cpu_relax();
  fn_ = nullptr;
}

void ThreadPool::worker(int index) {
  set_flush_denormals();
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      while ((g = generation_.load(std::memory_order_acquire)) == seen &&
             std::chrono::steady_clock::now() < until)
        for (int i = 0; i < 64; ++i) cpu_relax();
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return (g = generation_.load()) != seen; });
        sleepers_.fetch_sub(1);
      }
    }
    seen = g;
    if (stop_.load()) return;
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kt
