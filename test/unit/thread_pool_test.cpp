// runtime/thread_pool: every index of a for_range runs exactly once, in one
// contiguous chunk per thread slot, whatever the pool's size against the
// machine's cores (this CI machine has 2: 8 and 16 threads oversubscribe it,
// so the caller must run the chunks of workers that have no core), pass after
// pass, including after the workers have gone to sleep. And kern::Scratch,
// the kernels' per-thread buffers, keeps a buffer through small growths.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/work_split.h"
#include "runtime/thread_pool.h"

namespace kt {
namespace {

// One pass over n: each index counted once, chunks disjoint and contiguous,
// chunk slots below the pool's thread count and distinct.
void check_pass(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::vector<std::atomic<int>> slot_used(static_cast<size_t>(pool.n_threads()));
  std::atomic<bool> bad_slot{false};
  pool.for_range(n, [&](int64_t b, int64_t e, int slot) {
    if (slot < 0 || slot >= pool.n_threads() || slot_used[size_t(slot)].fetch_add(1) != 0) bad_slot = true;
    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
  });
  ASSERT_FALSE(bad_slot) << "n " << n;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, EveryIndexOnceAtEverySize) {
  for (int threads : {1, 2, 3, 8, 16}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 300; ++rep)
      for (int64_t n : {1, 2, 3, 7, 15, 16, 17, 100, 1000}) check_pass(pool, n);
  }
}

// Items handed out one at a time (kern::for_each_item) over many short passes,
// the pattern of a decode step's kernels: every item once per pass.
TEST(ThreadPool, ItemsOfManyShortPasses) {
  ThreadPool pool(8);
  std::vector<int> seen(64);
  for (int pass = 1; pass <= 5000; ++pass) {
    std::atomic<int> count{0};
    kern::for_each_item(pool, 64, true, [&](int64_t i, int) {
      seen[size_t(i)] = pass;  // each item written by exactly one thread
      count.fetch_add(1, std::memory_order_relaxed);
    });
    ASSERT_EQ(count.load(), 64);
    for (int v : seen) ASSERT_EQ(v, pass);
  }
}

// Items in a range a thread (kern::for_each_item_by_range): every item once
// whatever the pool and the items' lengths (threads finishing at different
// times take the others' back ends), and a thread starts with its own range in
// order: what keeps an expert's blocks of rows on the core that holds its
// activations.
TEST(ThreadPool, ItemsByRangeEachOnceOwnRangeFirst) {
  for (int threads : {1, 2, 3, 8, 16}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 16, 17, 100, 1000}) {
      for (int pass = 0; pass < 10; ++pass) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        const int64_t t = std::min<int64_t>(n, threads);
        // Per slot: the items it ran, in order (a slot is one thread at a time).
        std::vector<std::vector<int64_t>> ran(static_cast<size_t>(threads));
        kern::for_each_item_by_range(pool, n, true, [&](int64_t i, int slot) {
          hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
          ran[size_t(slot)].push_back(i);
          if (i % 7 == 3) std::this_thread::sleep_for(std::chrono::microseconds(20));  // uneven items
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "item " << i << " of " << n;
        // Slot r ran items of its own range [b, e) first, as b, b + 1, ...
        // (thieves take back ends), then only others' (all of its range may
        // have been taken before its thread started, on a loaded machine).
        for (int64_t r = 0; r < t; ++r) {
          const auto& v = ran[size_t(r)];
          const int64_t b = n * r / t, e = n * (r + 1) / t;
          size_t k = 0;
          for (; k < v.size() && v[k] >= b && v[k] < e; ++k)
            ASSERT_EQ(v[k], b + int64_t(k)) << "slot " << r << " of " << t << ", n " << n;
          for (; k < v.size(); ++k) ASSERT_TRUE(v[k] < b || v[k] >= e) << "slot " << r << " item " << v[k];
        }
      }
    }
  }
}

// Workers past their spin sleep on the condition variable: a pass after a
// pause wakes them (or runs without them) and still covers every index.
TEST(ThreadPool, PassesAfterTheWorkersSleep) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 5; ++rep) {
    check_pass(pool, 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(8));
  }
}

// A kernel's scratch keeps its buffer while requests wander a little above the
// largest so far (an expert's tiles follow the routing): each new buffer is
// fresh pages to fault in. Aligned for the vector kernels, and it still grows
// past the headroom.
TEST(Scratch, KeepsItsBufferWhenARequestGrowsALittle) {
  kern::Scratch s;
  void* p = s.get(1000000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(s.get(1010000), p);
  EXPECT_EQ(s.get(1200000), p);
  EXPECT_EQ(s.get(500), p);
  void* q = s.get(4000000);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  static_cast<uint8_t*>(q)[3999999] = 1;  // the whole request is ours (ASan checks)
}

}  // namespace
}  // namespace kt
