// A fork-join thread pool for kernels (kernels/kernel.h Parallel). Decode runs
// thousands of small calls per token, so dispatch must cost microseconds:
// workers spin on a generation counter for a while before sleeping, and
// for_range splits [0, n) statically, one contiguous chunk per thread, with
// the calling thread taking the first.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/kernel.h"

namespace kt {

class ThreadPool final : public kern::Parallel {
 public:
  // n_threads includes the calling thread; 0 means physical_cores().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const override { return n_threads_; }
  void for_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) override;

 private:
  void worker(int index);
  void run_chunk(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job, published by bumping generation_.
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

// Flushes denormal floats to zero on the calling thread (the pool's workers
// do it at start; the executor for the thread that calls forward()).
void set_flush_denormals();

// Physical cores of this machine (hyper-threads counted once), at least 1:
// memory-bound kernels gain nothing from a core's second thread.
int physical_cores();

}  // namespace kt
