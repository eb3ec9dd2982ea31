// A fork-join thread pool for kernels (kernels/kernel.h Parallel). Decode runs
// thousands of small calls per token, so dispatch must cost microseconds:
// workers spin on a generation counter for a while before sleeping. for_range
// splits [0, n) into one contiguous chunk per thread (the split never depends
// on timing: results are the same run to run). Chunk i is worker i's (the
// caller's is 0), claimed in a slot of its own cache line: the caller, done
// with its chunk, claims and runs every chunk no worker has claimed yet, so on
// an oversubscribed machine it does not wait for workers that have no core
// (a barrier on a descheduled worker cost 100x on a loaded 2-core machine).
// One word that every thread claimed from and counted into cost 3.1-4.0 us an
// empty pass with 16 threads on the device's Xeon (each atomic a trip of the
// line between cores, one after another); slots of their own, 1.3-1.5 us
// (`kt-bench pool`).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  // Per chunk index: the last job whose chunk someone claimed, and the last
  // whose chunk finished. Jobs are numbered from 1 and only grow, so a late
  // worker holding an old job number can never claim a newer job's chunk.
  struct alignas(64) Slot {
    std::atomic<uint64_t> claimed{0};
    std::atomic<uint64_t> done{0};
  };

  void worker(int index);
  // Claims chunk `index` of job `job` if no one has, and runs it.
  void run_if_unclaimed(int index, uint64_t job);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Slot[]> slots_;
  // The current job: written by the caller before job_ is published, read by
  // whoever claims a chunk of it (the caller waits for every claimed chunk
  // before it writes them again).
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  // The job's number (high 48 bits) and its chunk count (low 16): one word, so
  // a worker reads the count of the job it claims from.
  std::atomic<uint64_t> job_{0};
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
