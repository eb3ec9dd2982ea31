// A fork-join thread pool for kernels (kernels/kernel.h Parallel). Decode runs
// thousands of small calls per token, so dispatch must cost microseconds:
// workers spin on a generation counter for a while before sleeping. for_range
// splits [0, n) into one contiguous chunk per thread (the split never depends
// on timing: results are the same run to run), and the chunks are claimed,
// not assigned: the calling thread and the workers take the next unclaimed
// chunk until none is left. On an idle machine each thread gets one; on an
// oversubscribed one the caller runs the chunks of workers that have no core
// yet instead of waiting for them (a barrier on a descheduled worker cost 100x
// on a loaded 2-core machine).
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
  void worker();
  void run_chunk(int index);
  // Claims and runs chunks of job `job` until none is left.
  void run_claimed(uint32_t job);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job: written by the caller before claim_ is published, read
  // by whoever claims a chunk of it.
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  uint32_t job_ = 0;  // the caller's count of jobs
  // The job's number (high 32 bits), its chunk count (16 bits) and the next
  // unclaimed chunk (low 16 bits): one word, so a late worker can never claim
  // a chunk of a job other than the one it checked.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};  // chunks of the current job finished
  std::atomic<uint64_t> generation_{0};
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
