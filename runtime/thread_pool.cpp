#include "runtime/thread_pool.h"

#include <algorithm>
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

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::min(n_threads > 0 ? n_threads : physical_cores(), 0xffff)),
      slots_(std::make_unique<Slot[]>(size_t(n_threads_))) {
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

void ThreadPool::run_if_unclaimed(int index, uint64_t job) {
  Slot& slot = slots_[size_t(index)];
  uint64_t c = slot.claimed.load(std::memory_order_acquire);
  while (c < job)
    if (slot.claimed.compare_exchange_weak(c, job, std::memory_order_acq_rel, std::memory_order_acquire)) {
      // Claimed: the caller waits for this chunk, so the job's fields hold.
      const int64_t b = n_ * index / parts_, e = n_ * (index + 1) / parts_;
      if (b < e) (*fn_)(b, e, index);
      slot.done.store(job, std::memory_order_release);
      return;
    }
}

void ThreadPool::for_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  // The previous job is finished (every chunk claimed and done), so no one
  // reads these fields until the new job_ is published.
  fn_ = &fn;
  n_ = n;
  parts_ = int(std::min<int64_t>(n, n_threads_));
  const uint64_t job = (job_.load(std::memory_order_relaxed) >> 16) + 1;
  job_.store(job << 16 | uint64_t(parts_), std::memory_order_release);
  {
    // The lock orders the job before the generation a sleeper wakes to.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
  for (int i = 0; i < parts_; ++i) run_if_unclaimed(i, job);
  // Only chunks already running on workers are left: wait for them, yielding
  // now and then in case one of them waits for this core.
  for (int i = 1; i < parts_; ++i)
    for (int spins = 1; slots_[size_t(i)].done.load(std::memory_order_acquire) < job; ++spins) {
      cpu_relax();
      if ((spins & 255) == 0) std::this_thread::yield();
    }
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
    // The job now published (a later one than woke it is as good): its own
    // chunk, if the job has one and the caller has not taken it.
    const uint64_t job = job_.load(std::memory_order_acquire);
    if (index < int(job & 0xffff)) run_if_unclaimed(index, job >> 16);
  }
}

}  // namespace kt
